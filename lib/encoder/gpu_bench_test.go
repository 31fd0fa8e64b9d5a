package encoder

import (
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mempo/mempo/lib/envconfig"
	"github.com/mempo/mempo/lib/tokenizer"
)

// TestCUDAEncoderBenchmarks measures a base-sized random encoder (e5-base-v2's
// shape: 768 hidden, 12 layers × 12 heads, 3072 intermediate, 30522 ids) on
// the GPU and, for comparison, on this machine's CPU: passages of exactly
// 256 tokens (Search-R1's passage max_length) through EmbedIDs (forward,
// pooling on the device, [B, H] back to the host), queries of 24 tokens,
// and EmbedPassages end to end on text (tokenization, length-sorted
// batches, padding, forward, pooling). It runs only with
// MEMPO_CUDA_BENCH=1, on a GPU; scripts/gpu/run_encoder.sh runs it beside
// scripts/bench_encoder.py (transformers on the same shapes). Each result is
// one line starting with BENCH.
//
// MEMPO_BENCH_ENCODER_BATCHES: GPU batches at 256 tokens (default 64,128,256);
// MEMPO_BENCH_ENCODER_CPU_BATCH: the CPU's batch (default 16; 0 skips it).
func TestCUDAEncoderBenchmarks(t *testing.T) {
	if envconfig.CUDABench.Get() != "1" {
		t.Skip("set MEMPO_CUDA_BENCH=1 to run the encoder benchmarks (on a GPU)")
	}
	dev := requireCUDA(t)
	runEncoderBench(t, os.Stdout, dev, "cuda", encBench{cfg: BaseConfig, T: 256, query: 24,
		batches: intList(t, envconfig.BenchEncoderBatches, "64,128,256"), queryBatches: []int{1, 32, 256},
		cpuBatch: intList(t, envconfig.BenchEncoderCPUBatch, "16")[0], secs: 2, texts: 4096, textBatch: 128})
}

// The benchmark's code on the kernel emulation with a tiny encoder, so that
// a mistake in it shows here and not on the GPU.
func TestEmuEncoderBenchmarkCode(t *testing.T) {
	cfg := oddConfigs[0]
	cfg.VocabSize, cfg.MaxPositionEmbeddings = 1300, 64
	var out strings.Builder
	runEncoderBench(t, &out, emuDevice(t, 16), "emu", encBench{cfg: cfg, T: 48, query: 8, batches: []int{3}, queryBatches: []int{1, 2},
		cpuBatch: 2, texts: 20, textBatch: 8})
	if n := strings.Count(out.String(), "BENCH "); n != 11 {
		t.Errorf("%d BENCH lines:\n%s", n, out.String())
	}
}

type encBench struct {
	cfg                   Config
	T, query              int   // passage and query lengths
	batches, queryBatches []int // GPU batches of passages and queries
	cpuBatch              int   // 0: no CPU run
	secs                  float64
	texts, textBatch      int // EmbedPassages end to end
}

func runEncoderBench(t *testing.T, w io.Writer, dev gpuDevice, devName string, o encBench) {
	t0 := time.Now()
	tok, err := tokenizer.Load(modelDir + "/tokenizer.json")
	if err != nil {
		t.Fatal(err)
	}
	e, err := Random(o.cfg, tok, 1, Options{Family: "e5", MaxLength: o.T})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("random encoder (%d layers × %d) made in %.1fs; %s; GOMAXPROCS %d", o.cfg.NumHiddenLayers, o.cfg.HiddenSize,
		time.Since(t0).Seconds(), dev, runtime.GOMAXPROCS(0))
	fixed := func(B, T int) ([]int, []int) {
		ids, mask := make([]int, B*T), make([]int, B*T)
		for i := range ids {
			ids[i], mask[i] = 1000+(i*7919)%(o.cfg.VocabSize-1000), 1
		}
		return ids, mask
	}
	// rate runs EmbedIDs on a B×T batch for about secs seconds (at least
	// iters times) after one warm-up call.
	rate := func(B, T int, secs float64, iters int) (perS, msPerBatch float64) {
		ids, mask := fixed(B, T)
		if _, err := e.EmbedIDs(ids, mask, B, T); err != nil {
			t.Fatal(err)
		}
		n := 0
		start := time.Now()
		for n < iters || time.Since(start).Seconds() < secs {
			if _, err := e.EmbedIDs(ids, mask, B, T); err != nil {
				t.Fatal(err)
			}
			n++
		}
		s := time.Since(start).Seconds()
		return float64(n*B) / s, 1000 * s / float64(n)
	}
	// The same 8 passages on every device: how far fp16 and fp32 on the GPU
	// are from the CPU on a base-sized model.
	refIDs, refMask := fixed(8, o.T)
	embedRef := func() []float32 {
		v, err := e.EmbedIDs(refIDs, refMask, 8, o.T)
		if err != nil {
			t.Fatal(err)
		}
		return slices.Concat(v...)
	}
	cpuRef := embedRef()
	bench := func(device, prec string, T, B int, perS, ms float64) {
		fmt.Fprintf(w, "BENCH encoder impl=mempo device=%s precision=%s length=%d batch=%d per_s=%.1f ms_per_batch=%.2f\n", device, prec, T, B, perS, ms)
	}
	if o.cpuBatch > 0 {
		perS, ms := rate(o.cpuBatch, o.T, 0, 1)
		bench("cpu", "fp32", o.T, o.cpuBatch, perS, ms)
		perS, ms = rate(4*o.cpuBatch, o.query, 0, 1)
		bench("cpu", "fp32", o.query, 4*o.cpuBatch, perS, ms)
	}
	for _, prec := range []Precision{FP16, FP32} {
		onGPU(t, e, dev, prec)
		abs, _ := stats(embedRef(), cpuRef)
		fmt.Fprintf(w, "BENCH encoder_error device=%s precision=%s length=%d max_abs_diff_vs_cpu=%.3g\n", devName, prec, o.T, abs)
		for _, B := range o.batches {
			perS, ms := rate(B, o.T, o.secs, 3)
			bench(devName, string(prec), o.T, B, perS, ms)
		}
		for _, B := range o.queryBatches {
			perS, ms := rate(B, o.query, o.secs/2, 3)
			bench(devName, string(prec), o.query, B, perS, ms)
		}
		if e.gpu.fusedAttn {
			// A/B in the same process: the default path with the 64-row
			// attention tile, then without the half residual stream (fp32
			// residual, block-per-row LayerNorms), then without the fused
			// attention and half projection outputs either
			// (strided-batched GEMMs around the softmax kernel).
			for _, v := range []struct {
				impl           string
				fused, halfRes bool
				attn           int
			}{{"mempo-attn64", true, true, 0}, {"mempo-fp32-residual", true, false, 1}, {"mempo-unfused", false, false, 1}} {
				e.gpu.fusedAttn, e.gpu.halfOut, e.gpu.halfRes, e.gpu.attn = v.fused, v.fused, v.halfRes, v.attn
				for _, B := range o.batches {
					perS, ms := rate(B, o.T, o.secs, 3)
					fmt.Fprintf(w, "BENCH encoder impl=%s device=%s precision=%s length=%d batch=%d per_s=%.1f ms_per_batch=%.2f\n", v.impl, devName, prec, o.T, B, perS, ms)
				}
			}
		}
		e.Close()
	}

	// End to end on text: passages of vocabulary words, longer than T
	// tokens as a rule (so cut at T), through EmbedPassages (fp16).
	r := rand.New(rand.NewPCG(1, 2))
	var words []string
	for id := 0; id < tok.VocabSize(); id++ {
		if w, ok := tok.Token(id); ok && w != "" && !strings.HasPrefix(w, "[") && !strings.HasPrefix(w, "##") {
			words = append(words, w)
		}
	}
	texts := make([]string, o.texts)
	for i := range texts {
		var b strings.Builder
		for j := 0; j < o.T*7/10+r.IntN(o.T/2); j++ {
			b.WriteString(words[r.IntN(len(words))])
			b.WriteByte(' ')
		}
		texts[i] = b.String()
	}
	onGPU(t, e, dev, FP16)
	e.BatchSize = o.textBatch
	if _, err := e.EmbedPassages(texts[:min(len(texts), 2*o.textBatch)]); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	vecs, err := e.EmbedPassages(texts)
	if err != nil {
		t.Fatal(err)
	}
	s := time.Since(start).Seconds()
	n := 0
	for _, text := range texts {
		n += len(e.Tokenize(e.PassagePrefix + text))
	}
	fmt.Fprintf(w, "BENCH encoder_text impl=mempo device=%s precision=fp16 max_length=%d batch=%d passages=%d mean_tokens=%.0f per_s=%.1f\n",
		devName, o.T, o.textBatch, len(vecs), float64(n)/float64(len(texts)), float64(len(texts))/s)
}

func intList(t *testing.T, v envconfig.Var, def string) []int {
	s := v.Or(def)
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 0 {
			t.Fatalf("%s=%q: want a list of non-negative integers", v.Name, s)
		}
		out = append(out, n)
	}
	return out
}
