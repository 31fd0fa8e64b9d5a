package model

import (
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/mempo/mempo/lib/checkpoint"
	"github.com/mempo/mempo/lib/tensor"
)

// Benchmarks report throughput in tokens/s and as a fraction of the sgemm
// FLOP rate of this machine (OpenBLAS, 1024³) measured by the same benchmark
// just before and after its timed part, so numbers from different machines,
// and from a shared machine under different load, compare. Run with
// -benchtime 1x.

func sgemmRate() float64 { return tensor.SgemmFLOPS(1024, 500*time.Millisecond) }

func demoConfig() *checkpoint.Config {
	return &checkpoint.Config{
		Architecture: checkpoint.ArchQwen2, ModelType: "qwen2",
		VocabSize: 2048, HiddenSize: 256, IntermediateSize: 704, NumLayers: 4,
		NumHeads: 4, NumKVHeads: 2, HeadDim: 64, MaxPositions: 4096,
		RopeTheta: 1e6, RMSNormEps: 1e-6, TieWordEmbeddings: true, AttentionBias: true,
		InitializerRange: 0.02,
	}
}

var benchModels sync.Map

func benchModel(b *testing.B, name string) *Model {
	if m, ok := benchModels.Load(name); ok {
		return m.(*Model)
	}
	var cfg *checkpoint.Config
	if name == "demo" {
		cfg = demoConfig()
	} else {
		var err error
		if cfg, err = checkpoint.Preset(name); err != nil {
			b.Fatal(err)
		}
	}
	tensors := checkpoint.RandomInit(cfg, 1)
	m, err := New(cfg, tensors, NewCPU())
	if err != nil {
		b.Fatal(err)
	}
	benchModels.Store(name, m)
	runtime.GC()
	return m
}

// trainFLOPs counts the useful FLOPs of one forward+backward over T tokens
// of one sequence: 2 per weight per token for each matrix product (linear
// layers and LM head), the causal half of QKᵀ and PV, and twice the forward
// for the backward.
func trainFLOPs(m *Model, T int) float64 {
	a := m.a
	var w float64
	for _, s := range m.specs {
		if s.rows > 1 && s.name != "model.embed_tokens.weight" {
			w += float64(s.rows * s.cols)
		}
	}
	w += float64(a.vocab * a.hidden) // LM head (tied: the embedding)
	fwd := 2*w*float64(T) + float64(a.layers)*2*float64(T)*float64(T)*float64(a.heads*a.headDim)
	return 3 * fwd
}

func benchTrain(b *testing.B, name string, T int, recompute bool) {
	m := benchModel(b, name)
	m.Recompute = recompute
	seq := make([]int, T)
	w := make([]float32, T)
	for i := range seq {
		seq[i] = (i * 7919) % m.a.vocab
		w[i] = 1
	}
	// A full-size warm-up step: the timed step then runs as every step after
	// the first does, with gradients allocated and its buffers reused from the
	// backend's pool instead of faulted in fresh.
	m.Backward([][]int{seq}, [][]float32{w})
	ref := sgemmRate()
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		if _, _, err := m.Backward([][]int{seq}, [][]float32{w}); err != nil {
			b.Fatal(err)
		}
	}
	sec := time.Since(start).Seconds() / float64(b.N)
	b.StopTimer()
	ref = (ref + sgemmRate()) / 2
	rate := trainFLOPs(m, T) / sec
	b.ReportMetric(float64(T)/sec, "tokens/s")
	b.ReportMetric(rate/1e9, "GFLOP/s")
	b.ReportMetric(rate/ref, "of_sgemm")
	b.ReportMetric(ref/1e9, "sgemm_GFLOP/s")
}

func BenchmarkTrainDemo512(b *testing.B)             { benchTrain(b, "demo", 512, false) }
func BenchmarkTrainDemo512Recompute(b *testing.B)    { benchTrain(b, "demo", 512, true) }
func BenchmarkTrainQwen05B512(b *testing.B)          { benchTrain(b, "qwen2.5-0.5b", 512, false) }
func BenchmarkTrainQwen05B512Recompute(b *testing.B) { benchTrain(b, "qwen2.5-0.5b", 512, true) }

// benchDecode generates newTokens tokens for each of batch rows after a
// prompt of promptLen tokens, sampling at temperature 1 without top-p (a
// random model's flat distribution would make top-p sort the whole
// vocabulary, which a trained model's peaked one does not); tokens/s counts
// generated tokens, with the prefill included in the time.
func benchDecode(b *testing.B, name string, batch, promptLen, newTokens int) {
	m := benchModel(b, name)
	var reqs []Request
	for r := 0; r < batch; r++ {
		p := make([]int, promptLen)
		for i := range p {
			p[i] = (r*131 + i*7919) % m.a.vocab
		}
		reqs = append(reqs, Request{Prompt: p, Seed: uint64(r)})
	}
	opts := GenerateOptions{MaxTokens: newTokens, Sampling: SampleParams{Temperature: 1}, IgnoreEOS: true}
	if name == "demo" {
		m.Generate(reqs, opts) // warm-up (skipped for the 0.5B model: minutes on 2 cores)
	}
	ref := sgemmRate()
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		if _, err := m.Generate(reqs, opts); err != nil {
			b.Fatal(err)
		}
	}
	sec := time.Since(start).Seconds() / float64(b.N)
	b.StopTimer()
	tokens := float64(batch * newTokens)
	// Decoding FLOPs: 2 per weight per token (the attention over the short
	// cache is negligible here).
	flops := trainFLOPs(m, 1) / 3 * tokens
	ref = (ref + sgemmRate()) / 2
	b.ReportMetric(tokens/sec, "tokens/s")
	b.ReportMetric(flops/sec/ref, "of_sgemm")
	b.ReportMetric(ref/1e9, "sgemm_GFLOP/s")
}

func BenchmarkDecodeDemo(b *testing.B) {
	for _, batch := range []int{1, 32} {
		b.Run(fmt.Sprintf("batch%d", batch), func(b *testing.B) { benchDecode(b, "demo", batch, 32, 64) })
	}
}

func BenchmarkDecodeQwen05B(b *testing.B) {
	for _, batch := range []int{1, 32} {
		b.Run(fmt.Sprintf("batch%d", batch), func(b *testing.B) { benchDecode(b, "qwen2.5-0.5b", batch, 8, 16) })
	}
}
