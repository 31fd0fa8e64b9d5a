package tokenizer

import (
	"runtime"
	"testing"
)

// goldenTexts are the texts of qwen3-golden.jsonl, the same text
// scripts/bench_tokenizer.py gives HF tokenizers.
func goldenTexts(b *testing.B) ([]string, int64) {
	rows := readJSONL[golden](b, testdata("qwen3-golden.jsonl"))
	texts := make([]string, len(rows))
	var n int64
	for i, r := range rows {
		texts[i] = r.Text
		n += int64(len(r.Text))
	}
	return texts, n
}

func benchEncode(b *testing.B, tok *Tokenizer) {
	texts, n := goldenTexts(b)
	b.SetBytes(n)
	b.ReportAllocs()
	var buf []int
	// Pin the goroutine so the thread's CPU time is the benchmark's.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	for _, s := range texts { // warm the BPE cache outside the timing
		buf = tok.AppendEncode(buf[:0], s)
	}
	b.ResetTimer()
	cpu0, iters := threadCPU(), 0
	for b.Loop() {
		for _, s := range texts {
			buf = tok.AppendEncode(buf[:0], s)
		}
		iters++
	}
	if cpu := threadCPU() - cpu0; cpu > 0 {
		b.ReportMetric(float64(n)*float64(iters)/cpu/1e6, "MB/cpu-s")
	}
}

// BenchmarkEncode encodes every golden string once per iteration on one
// goroutine; the BPE cache is warm after the first, as in long runs.
func BenchmarkEncode(b *testing.B) { benchEncode(b, qwen(b, ImplHand)) }

// BenchmarkEncodeRegexp2 is BenchmarkEncode with the regexp2 pre-tokenizer.
func BenchmarkEncodeRegexp2(b *testing.B) { benchEncode(b, qwen(b, ImplRegexp2)) }

// BenchmarkEncodeNoCache runs every pre-token through the merge loop.
func BenchmarkEncodeNoCache(b *testing.B) {
	tok, err := Load(qwenPath(b))
	if err != nil {
		b.Fatal(err)
	}
	tok.model.(*bpeModel).disableCacheForTest = true
	benchEncode(b, tok)
}
