package model

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/mempo/mempo/lib/checkpoint"
	"github.com/mempo/mempo/lib/peft"
)

// The adapter's tests: its forward against the merged weights' forward, its
// gradients against finite differences (with and without dropout and
// recomputation, on Qwen2 and Qwen3 layouts), the frozen base, and the
// dropout mask's properties. The CUDA versions are in cuda_lora_test.go.

// loraModel is a random tiny model with an adapter on every target whose
// B is random too (a fresh adapter's B is zero, which would hide errors in
// the A path and in the merged product).
func loraModel(t testing.TB, cfg *checkpoint.Config, be Backend, seed uint64, lc peft.Config) (*Model, map[string][]float32) {
	t.Helper()
	base := randomModel(t, cfg, seed)
	params := base.Params()
	m, err := New(cfg, params, be)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.AttachLoRA(lc, seed+1); err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(seed, 5))
	for _, name := range m.TrainableNames() {
		p := m.Param(name)
		for i := range p {
			p[i] = float32(0.2 * r.NormFloat64())
		}
		if err := m.SetParam(name, p); err != nil {
			t.Fatal(err)
		}
	}
	return m, params
}

func allTargets(r int, alpha, dropout float64) peft.Config {
	return peft.Config{R: r, Alpha: alpha, Dropout: dropout, Targets: slices.Clone(peft.AllTargets)}
}

func maxAbsDiff(a, b [][]float32) float64 {
	var d float64
	for i := range a {
		for j := range a[i] {
			d = math.Max(d, math.Abs(float64(a[i][j])-float64(b[i][j])))
		}
	}
	return d
}

// TestLoRAForwardEqualsMerged: the adapted model's log-probs equal those of
// the base with s·B·A folded into its weights (peft.Merge), the disabled
// adapter gives the base back exactly, and a fresh adapter (B = 0) changes
// nothing.
func TestLoRAForwardEqualsMerged(t *testing.T) {
	seqs := [][]int{{1, 5, 7, 2, 9, 11, 3}, {4, 4, 0, 12}}
	for _, qwen3 := range []bool{false, true} {
		cfg := tinyConfig(qwen3)
		m, params := loraModel(t, cfg, NewCPU(), 11, allTargets(3, 6, 0))
		got, err := m.LogProbs(seqs)
		if err != nil {
			t.Fatal(err)
		}
		merged := map[string][]float32{}
		shapes := map[string][]int{}
		for k, v := range params {
			merged[k] = slices.Clone(v)
		}
		for _, s := range cfg.Tensors() {
			shapes[s.Name] = s.Shape
		}
		if err := m.Adapter().Merge(merged, cfg.NumLayers, shapes); err != nil {
			t.Fatal(err)
		}
		mm, err := New(cfg, merged, NewCPU())
		if err != nil {
			t.Fatal(err)
		}
		want, _ := mm.LogProbs(seqs)
		if d := maxAbsDiff(got, want); d > 2e-5 {
			t.Errorf("qwen3=%v: adapter vs merged log-probs differ by %g", qwen3, d)
		}
		bm, _ := New(cfg, params, NewCPU())
		base, _ := bm.LogProbs(seqs)
		if d := maxAbsDiff(got, base); d < 1e-3 {
			t.Errorf("qwen3=%v: the adapter changes the log-probs by only %g: the test would not see a missing adapter", qwen3, d)
		}
		m.SetAdapterEnabled(false)
		off, _ := m.LogProbs(seqs)
		m.SetAdapterEnabled(true)
		if d := maxAbsDiff(off, base); d != 0 {
			t.Errorf("qwen3=%v: disabled adapter differs from the base by %g", qwen3, d)
		}
		fresh, _ := New(cfg, params, NewCPU())
		if err := fresh.AttachLoRA(allTargets(4, 8, 0), 1); err != nil {
			t.Fatal(err)
		}
		f, _ := fresh.LogProbs(seqs)
		if d := maxAbsDiff(f, base); d != 0 {
			t.Errorf("qwen3=%v: a fresh adapter (B = 0) changes the log-probs by %g", qwen3, d)
		}
	}
}

// backwardLoss runs Backward (its training forward: dropout on) and
// returns the loss.
func backwardLoss(t *testing.T, m *Model, seqs [][]int, w [][]float32) float64 {
	t.Helper()
	l, _, err := m.Backward(seqs, w)
	if err != nil {
		t.Fatal(err)
	}
	m.ZeroGrads()
	return l
}

// TestLoRAFiniteDifferenceGradients checks dA and dB of every target
// against central differences of Backward's own loss (which, with dropout,
// is a fixed function of the parameters for a fixed DropoutSeed), and that
// the frozen base gets no gradient.
func TestLoRAFiniteDifferenceGradients(t *testing.T) {
	seqs := [][]int{{1, 5, 7, 2, 9, 11, 3}, {4, 4, 0, 12}}
	w := [][]float32{{0, 1, 0.5, 2, 1, 0.3, 1}, {0, 1, 1, 0.7}}
	for _, qwen3 := range []bool{false, true} {
		for _, dropout := range []float64{0, 0.3} {
			for _, recompute := range []bool{false, true} {
				cfg := tinyConfig(qwen3)
				m, _ := loraModel(t, cfg, NewCPU(), 3, allTargets(2, 4, dropout))
				m.Recompute = recompute
				m.DropoutSeed = 77
				m.ZeroGrads()
				if _, _, err := m.Backward(seqs, w); err != nil {
					t.Fatal(err)
				}
				grads := m.Grads()
				if len(grads) != len(m.TrainableNames()) || len(grads) != 2*nTargets*cfg.NumLayers {
					t.Fatalf("%d gradients for %d trainable tensors", len(grads), len(m.TrainableNames()))
				}
				if m.grads.layers[0].wq != nil || m.grads.embed != nil {
					t.Fatal("the frozen base has weight gradients")
				}
				m.ZeroGrads()
				r := rand.New(rand.NewPCG(9, 9))
				for _, name := range m.TrainableNames() {
					p := m.Param(name)
					for k := 0; k < 2; k++ {
						i := r.IntN(len(p))
						orig := p[i]
						diff := func(h float32) float64 {
							p[i] = orig + h
							m.SetParam(name, p)
							lp := backwardLoss(t, m, seqs, w)
							p[i] = orig - h
							m.SetParam(name, p)
							lm := backwardLoss(t, m, seqs, w)
							p[i] = orig
							m.SetParam(name, p)
							return (lp - lm) / (2 * float64(h))
						}
						// Richardson: the h² terms of two step sizes cancel.
						fd := (4*diff(5e-3) - diff(1e-2)) / 3
						g := float64(grads[name][i])
						if math.Abs(fd-g) > 1e-2*math.Max(math.Abs(g), 0.1) {
							t.Errorf("qwen3=%v dropout=%v recompute=%v %s[%d]: analytic %g, finite difference %g", qwen3, dropout, recompute, name, i, g, fd)
						}
					}
				}
			}
		}
	}
}

// TestLoRADropout: the mask keeps about 1−p of the elements, scales them by
// 1/(1−p), depends on the seed, and the inference forward has no dropout.
func TestLoRADropout(t *testing.T) {
	be := NewCPU()
	n := 100000
	x := make([]float32, n)
	for i := range x {
		x[i] = 1
	}
	src := be.FromHost(x, 1, n)
	dst := be.Zeros(1, n)
	be.Dropout(dst, src, 0.25, 5)
	out := be.ToHost(dst, nil)
	kept := 0
	for _, v := range out {
		switch v {
		case 0:
		case float32(1 / 0.75):
			kept++
		default:
			t.Fatalf("dropout output %v: want 0 or 1/(1−p)", v)
		}
	}
	if f := float64(kept) / float64(n); math.Abs(f-0.75) > 0.01 {
		t.Errorf("kept %.4f of the elements, want 0.75", f)
	}
	be.Dropout(dst, src, 0.25, 6)
	other := be.ToHost(dst, nil)
	if slices.Equal(out, other) {
		t.Error("two seeds gave the same mask")
	}

	cfg := tinyConfig(false)
	seqs := [][]int{{1, 5, 7, 2, 9, 11, 3}}
	m, _ := loraModel(t, cfg, NewCPU(), 4, allTargets(2, 4, 0.5))
	a, _ := m.LogProbs(seqs)
	m.DropoutSeed = 123
	b, _ := m.LogProbs(seqs)
	if maxAbsDiff(a, b) != 0 {
		t.Error("the inference forward depends on the dropout seed")
	}
}

// TestLoRAAdapterRoundTrip: Adapter → peft.Write → peft.Read → LoadAdapter
// gives the same log-probs; a mismatched adapter is refused by name.
func TestLoRAAdapterRoundTrip(t *testing.T) {
	cfg := tinyConfig(true)
	m, params := loraModel(t, cfg, NewCPU(), 8, peft.Config{R: 2, Alpha: 3, Targets: []string{"o_proj", "q_proj", "v_proj"}})
	dir := t.TempDir() + "/adapter"
	ad := m.Adapter()
	ad.Config.Base = "base-dir"
	if err := peft.Write(dir, ad, nil); err != nil {
		t.Fatal(err)
	}
	back, err := peft.Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	if back.Config.Base != "base-dir" || back.Config.R != 2 || back.Config.Alpha != 3 || !slices.Equal(back.Config.Targets, []string{"o_proj", "q_proj", "v_proj"}) {
		t.Fatalf("config came back as %+v", back.Config)
	}
	m2, _ := NewFrozen(cfg, params, NewCPU())
	if err := m2.LoadAdapter(back); err != nil {
		t.Fatal(err)
	}
	seqs := [][]int{{1, 5, 7, 2, 9, 11, 3}}
	a, _ := m.LogProbs(seqs)
	b, _ := m2.LogProbs(seqs)
	if d := maxAbsDiff(a, b); d != 0 {
		t.Errorf("reloaded adapter differs by %g", d)
	}
	other := tinyConfig(true)
	other.HiddenSize, other.HeadDim = 16, 8
	m3 := randomModel(t, other, 1)
	if err := m3.LoadAdapter(back); err == nil {
		t.Error("an adapter for another shape was accepted")
	}
}
