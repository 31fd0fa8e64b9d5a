package model

import (
	"fmt"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mempo/mempo/lib/checkpoint"
	"github.com/mempo/mempo/lib/tensor"
)

// Benchmarks report throughput in tokens/s and as a fraction of the sgemm
// FLOP rate of this machine (OpenBLAS, 1024³) measured by the same benchmark
// just before and after its timed part, so numbers from different machines
// compare. On a shared machine wall-clock rates swing with the load, so each
// is also given per CPU-second of this process (getrusage: all its threads,
// OpenBLAS's included): tokens/cpu-s and of_sgemm_cpu, the FLOPs per
// CPU-second over sgemm's FLOPs per CPU-second. Run with -benchtime 1x.

// cpuSeconds is the user+system CPU time of the whole process.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

// refRate is sgemm's FLOP rate per wall second and per CPU-second.
type refRate struct{ wall, cpu float64 }

func sgemmRate() refRate {
	const n = 1024
	a, b, c := make([]float32, n*n), make([]float32, n*n), make([]float32, n*n)
	for i := range a {
		a[i], b[i] = float32(i%7)*0.01, float32(i%5)*0.01
	}
	tensor.Sgemm(false, false, n, n, n, 1, a, n, b, n, 0, c, n)
	c0, t0 := cpuSeconds(), time.Now()
	reps := 0
	for reps < 2 || time.Since(t0) < 500*time.Millisecond {
		tensor.Sgemm(false, false, n, n, n, 1, a, n, b, n, 0, c, n)
		reps++
	}
	f := 2 * float64(n) * n * n * float64(reps)
	return refRate{f / time.Since(t0).Seconds(), f / (cpuSeconds() - c0)}
}

func (r refRate) avg(o refRate) refRate { return refRate{(r.wall + o.wall) / 2, (r.cpu + o.cpu) / 2} }

// report writes the metrics of a timed part that did flops useful FLOPs and
// produced tokens tokens in sec wall seconds and cpu CPU-seconds.
func report(b *testing.B, ref refRate, flops, tokens, sec, cpu float64) {
	b.ReportMetric(tokens/sec, "tokens/s")
	b.ReportMetric(tokens/cpu, "tokens/cpu-s")
	b.ReportMetric(flops/sec/ref.wall, "of_sgemm")
	b.ReportMetric(flops/cpu/ref.cpu, "of_sgemm_cpu")
	b.ReportMetric(ref.wall/1e9, "sgemm_GFLOP/s")
}

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
	c0, start := cpuSeconds(), time.Now()
	for i := 0; i < b.N; i++ {
		if _, _, err := m.Backward([][]int{seq}, [][]float32{w}); err != nil {
			b.Fatal(err)
		}
	}
	sec := time.Since(start).Seconds() / float64(b.N)
	cpu := (cpuSeconds() - c0) / float64(b.N)
	b.StopTimer()
	report(b, ref.avg(sgemmRate()), trainFLOPs(m, T), float64(T), sec, cpu)
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
	c0, start := cpuSeconds(), time.Now()
	for i := 0; i < b.N; i++ {
		if _, err := m.Generate(reqs, opts); err != nil {
			b.Fatal(err)
		}
	}
	sec := time.Since(start).Seconds() / float64(b.N)
	cpu := (cpuSeconds() - c0) / float64(b.N)
	b.StopTimer()
	tokens := float64(batch * newTokens)
	// Decoding FLOPs: 2 per weight per token (the attention over the short
	// cache is negligible here; the prefill is not counted).
	flops := trainFLOPs(m, 1) / 3 * tokens
	report(b, ref.avg(sgemmRate()), flops, tokens, sec, cpu)
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
