package model

import (
	"math"
	"testing"
)

// The adapter on the CUDA backend: the dropout kernel bit for bit against
// the CPU's, the adapted model's log-probs and adapter gradients against the
// CPU backend's (fp32 mode; with dropout and recomputation), and the frozen
// bf16 base (bf16-only weights) giving exactly the log-probs of the fp32
// weights in bf16 mode, in half the memory of an fp32 weight. Without a GPU they skip.

func TestCUDALoRADropout(t *testing.T) {
	p := newOpPair(t, 21)
	for _, n := range []int{1, 257, 100003} {
		x := p.rnd(1, n, 1)
		d := p.out(1, n)
		p.cpu.Dropout(d.c, x.c, 0.3, 99)
		p.gpu.Dropout(d.g, x.g, 0.3, 99)
		p.check("Dropout", d, 0)
		// In place (the backward's use).
		p.cpu.Dropout(x.c, x.c, 0.1, 7)
		p.gpu.Dropout(x.g, x.g, 0.1, 7)
		p.check("Dropout in place", x, 0)
	}
}

// cudaTwin builds the same adapted model on the CPU and on be.
func cudaTwin(t *testing.T, qwen3 bool, be Backend, dropout float64, frozen bool) (cpu, gpu *Model) {
	t.Helper()
	cfg := tinyConfig(qwen3)
	cpu, params := loraModel(t, cfg, NewCPU(), 31, allTargets(3, 6, dropout))
	var err error
	if frozen {
		gpu, err = NewFrozen(cfg, params, be)
	} else {
		gpu, err = New(cfg, params, be)
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := gpu.LoadAdapter(cpu.Adapter()); err != nil {
		t.Fatal(err)
	}
	gpu.FreezeBase()
	return cpu, gpu
}

func TestCUDALoRA(t *testing.T) {
	cudaOrSkip(t)
	seqs := [][]int{{1, 5, 7, 2, 9, 11, 3, 8, 8, 1}, {4, 4, 0, 12}}
	w := [][]float32{{0, 1, 0.5, 2, 1, 0.3, 1, 1, 1, 1}, {0, 1, 1, 0.7}}
	for _, qwen3 := range []bool{false, true} {
		for _, recompute := range []bool{false, true} {
			be, err := NewCUDA()
			if err != nil {
				t.Fatal(err)
			}
			cpu, gpu := cudaTwin(t, qwen3, be, 0.3, false)
			a, _ := cpu.LogProbs(seqs)
			b, _ := gpu.LogProbs(seqs)
			if d := maxAbsDiff(a, b); d > 1e-4 {
				t.Errorf("qwen3=%v: CUDA adapter log-probs differ from the CPU's by %g", qwen3, d)
			}
			cpu.Recompute, gpu.Recompute = recompute, recompute
			cpu.DropoutSeed, gpu.DropoutSeed = 5, 5
			cpu.ZeroGrads()
			gpu.ZeroGrads()
			if _, _, err := cpu.Backward(seqs, w); err != nil {
				t.Fatal(err)
			}
			if _, _, err := gpu.Backward(seqs, w); err != nil {
				t.Fatal(err)
			}
			gc, gg := cpu.Grads(), gpu.Grads()
			if len(gg) != len(gc) || len(gg) == 0 {
				t.Fatalf("%d CUDA gradients, %d CPU", len(gg), len(gc))
			}
			for name, v := range gc {
				var scale, diff float64
				for i, x := range v {
					scale = math.Max(scale, math.Abs(float64(x)))
					diff = math.Max(diff, math.Abs(float64(x-gg[name][i])))
				}
				if diff > 1e-3*math.Max(scale, 1e-2) {
					t.Errorf("qwen3=%v recompute=%v %s: CUDA gradient differs by %g (max |g| %g)", qwen3, recompute, name, diff, scale)
				}
			}
		}
	}
}

func TestCUDAFrozenBF16(t *testing.T) {
	cudaOrSkip(t)
	seqs := [][]int{{1, 5, 7, 2, 9, 11, 3, 8, 8, 1}, {4, 4, 0, 12}}
	for _, qwen3 := range []bool{false, true} {
		beF, _ := NewCUDA()
		beF.SetBF16(true)
		beP, _ := NewCUDA()
		beP.SetBF16(true)
		cpu, frozen := cudaTwin(t, qwen3, beF, 0, true)
		_, plain := cudaTwin(t, qwen3, beP, 0, false)
		a, _ := frozen.LogProbs(seqs)
		b, _ := plain.LogProbs(seqs)
		if d := maxAbsDiff(a, b); d != 0 {
			t.Errorf("qwen3=%v: bf16-only frozen weights differ from fp32 weights in bf16 mode by %g", qwen3, d)
		}
		c, _ := cpu.LogProbs(seqs)
		if d := maxAbsDiff(a, c); d > 0.1 {
			t.Errorf("qwen3=%v: bf16 adapted model differs from the CPU's fp32 by %g", qwen3, d)
		}
		// Training over the frozen bf16 base: adapter gradients near the CPU's.
		w := [][]float32{{0, 1, 0.5, 2, 1, 0.3, 1, 1, 1, 1}, {0, 1, 1, 0.7}}
		cpu.ZeroGrads()
		frozen.ZeroGrads()
		cpu.Backward(seqs, w)
		if _, _, err := frozen.Backward(seqs, w); err != nil {
			t.Fatal(err)
		}
		gc, gg := cpu.Grads(), frozen.Grads()
		for name, v := range gc {
			var scale, diff float64
			for i, x := range v {
				scale = math.Max(scale, math.Abs(float64(x)))
				diff = math.Max(diff, math.Abs(float64(x-gg[name][i])))
			}
			if diff > 0.1*math.Max(scale, 1e-2) {
				t.Errorf("qwen3=%v %s: bf16 gradient differs by %g (max |g| %g)", qwen3, name, diff, scale)
			}
		}
		// A frozen weight holds its bf16 rounding only: the pool's block for
		// 2 bytes a value (plus 16 of alignment slack) where the fp32 tensor
		// takes 4 (measured on a real size: tiny tensors round up to the
		// pool's 512 bytes, and above 1 MiB its size classes are 1/32 of a
		// power of two apart, so 1 MiB + 16 B takes 1,114,112).
		const n = 512 * 1024
		v := make([]float32, n)
		l0 := beF.LiveBytes()
		fw := beF.FromHostFrozen(v, 512, 1024)
		l1 := beF.LiveBytes()
		pw := beF.FromHost(v, 512, 1024)
		l2 := beF.LiveBytes()
		if l1-l0 != int64(poolSize(2*n+16)) || l2-l1 != int64(poolSize(4*n)) {
			t.Errorf("a frozen 512×1024 weight holds %d bytes (want %d), an fp32 one %d (want %d)", l1-l0, poolSize(2*n+16), l2-l1, poolSize(4*n))
		}
		beF.Free(fw)
		beF.Free(pw)
		func() {
			defer func() {
				if recover() == nil {
					t.Error("reading a frozen bf16 weight's fp32 values did not panic")
				}
			}()
			frozen.Param("model.layers.0.self_attn.q_proj.weight")
		}()
	}
}
