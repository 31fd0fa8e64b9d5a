package model

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/mempo/mempo/lib/checkpoint"
)

// tinyConfig is a model small enough for finite differences, with every
// optional part switched on for Qwen3 (q/k norm, q/k/v/o biases, untied
// head) and GQA with two query heads per kv head.
func tinyConfig(qwen3 bool) *checkpoint.Config {
	c := &checkpoint.Config{
		Architecture: checkpoint.ArchQwen2, ModelType: "qwen2",
		VocabSize: 13, HiddenSize: 8, IntermediateSize: 12, NumLayers: 2,
		NumHeads: 2, NumKVHeads: 1, HeadDim: 4, MaxPositions: 64,
		RopeTheta: 10000, RMSNormEps: 1e-6, TieWordEmbeddings: true, AttentionBias: true,
		InitializerRange: 0.02, EOSTokenIDs: []int{12},
	}
	if qwen3 {
		c.Architecture, c.ModelType = checkpoint.ArchQwen3, "qwen3"
		c.QKNorm, c.TieWordEmbeddings = true, false
	}
	return c
}

// randomModel fills every parameter with values large enough that the
// network is far from linear (RandomInit's 0.02 would make it nearly so).
func randomModel(t testing.TB, cfg *checkpoint.Config, seed uint64) *Model {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, 1))
	tensors := map[string][]float32{}
	for _, s := range cfg.Tensors() {
		n := 1
		for _, d := range s.Shape {
			n *= d
		}
		v := make([]float32, n)
		for i := range v {
			switch {
			case strings.Contains(s.Name, "norm"):
				v[i] = float32(1 + 0.2*r.NormFloat64())
			case strings.Contains(s.Name, "embed"):
				v[i] = float32(r.NormFloat64())
			default:
				v[i] = float32(0.4 * r.NormFloat64())
			}
		}
		tensors[s.Name] = v
	}
	m, err := New(cfg, tensors, NewCPU())
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func lossOf(t *testing.T, m *Model, seqs [][]int, w [][]float32) float64 {
	lps, err := m.LogProbs(seqs)
	if err != nil {
		t.Fatal(err)
	}
	var l float64
	for b := range seqs {
		for i := 1; i < len(seqs[b]); i++ {
			l -= float64(w[b][i]) * float64(lps[b][i])
		}
	}
	return l
}

// TestFiniteDifferenceGradients checks the backward independently of any
// fixture: central differences of the loss against the analytic gradient,
// for a few elements of every kind of parameter.
func TestFiniteDifferenceGradients(t *testing.T) {
	for _, qwen3 := range []bool{false, true} {
		cfg := tinyConfig(qwen3)
		m := randomModel(t, cfg, 3)
		seqs := [][]int{{1, 5, 7, 2, 9, 11, 3}, {4, 4, 0, 12}}
		w := [][]float32{{0, 1, 0.5, 2, 1, 0.3, 1}, {0, 1, 1, 0.7}}
		for _, recompute := range []bool{false, true} {
			m.ZeroGrads()
			m.Recompute = recompute
			if _, _, err := m.Backward(seqs, w); err != nil {
				t.Fatal(err)
			}
			grads := m.Grads()
			r := rand.New(rand.NewPCG(9, 9))
			checked := 0
			for _, name := range m.ParamNames() {
				p := m.Param(name)
				for k := 0; k < 2; k++ {
					i := r.IntN(len(p))
					if name == "model.embed_tokens.weight" {
						i = 5*cfg.HiddenSize + k // a row that is used
					}
					const h = 1e-2
					orig := p[i]
					p[i] = orig + h
					m.SetParam(name, p)
					lp := lossOf(t, m, seqs, w)
					p[i] = orig - h
					m.SetParam(name, p)
					lm := lossOf(t, m, seqs, w)
					p[i] = orig
					m.SetParam(name, p)
					fd := (lp - lm) / (2 * h)
					g := float64(grads[name][i])
					if math.Abs(fd-g) > 1e-2*math.Max(math.Abs(g), 0.1) {
						t.Errorf("qwen3=%v recompute=%v %s[%d]: analytic %g, finite difference %g", qwen3, recompute, name, i, g, fd)
					}
					checked++
				}
			}
			if checked < 2*len(cfg.Tensors()) {
				t.Fatalf("checked only %d elements", checked)
			}
		}
	}
}

// Gradients accumulate across calls, and splitting a batch over two calls
// gives the same sum as one packed call (sequences do not interact).
func TestGradientsAccumulateAndPackingIsolates(t *testing.T) {
	m := randomModel(t, tinyConfig(true), 5)
	a, b := []int{1, 2, 3, 4, 5}, []int{6, 7, 8}
	wa, wb := []float32{0, 1, 1, 1, 1}, []float32{0, 2, 1}
	m.Backward([][]int{a, b}, [][]float32{wa, wb})
	one := m.Grads()
	m.ZeroGrads()
	la, _, _ := m.Backward([][]int{a}, [][]float32{wa})
	lb, _, _ := m.Backward([][]int{b}, [][]float32{wb})
	two := m.Grads()
	for name, g := range one {
		if e := maxRelErr(two[name], g); e > 1e-5 {
			t.Errorf("%s: split batch differs by %.3g", name, e)
		}
	}
	m.ZeroGrads()
	lab, _, _ := m.Backward([][]int{a, b}, [][]float32{wa, wb})
	if math.Abs(lab-(la+lb)) > 1e-5*math.Abs(lab) {
		t.Errorf("loss of the packed batch %g != %g + %g", lab, la, lb)
	}
	// The LM head in chunks of 3 rows (not aligned with the sequences).
	m.ZeroGrads()
	m.headRows = 3
	lc, _, _ := m.Backward([][]int{a, b}, [][]float32{wa, wb})
	chunked := m.Grads()
	for name, g := range one {
		if e := maxRelErr(chunked[name], g); e > 1e-5 {
			t.Errorf("%s: chunked LM head differs by %.3g", name, e)
		}
	}
	if math.Abs(lc-lab) > 1e-5*math.Abs(lab) {
		t.Errorf("chunked loss %g != %g", lc, lab)
	}
}

func TestParamsRoundTripAndErrors(t *testing.T) {
	cfg := tinyConfig(false)
	m := randomModel(t, cfg, 1)
	p := m.Params()
	if len(p) != len(cfg.Tensors()) {
		t.Fatalf("%d params, config lists %d", len(p), len(cfg.Tensors()))
	}
	for _, s := range cfg.Tensors() {
		if got := m.ParamShape(s.Name); !slices.Equal(got, s.Shape) {
			t.Errorf("%s: shape %v, want %v", s.Name, got, s.Shape)
		}
	}
	m2, err := New(cfg, p, nil)
	if err != nil {
		t.Fatal(err)
	}
	l1, _ := m.Logits([][]int{{1, 2, 3}})
	l2, _ := m2.Logits([][]int{{1, 2, 3}})
	if maxRelErr(l1[0], l2[0]) != 0 {
		t.Fatal("a model rebuilt from Params differs")
	}
	if _, err := m.Logits([][]int{{1, 13}}); err == nil || !strings.Contains(err.Error(), "13") {
		t.Errorf("id 13 of a 13-token vocabulary: err = %v", err)
	}
	delete(p, "model.norm.weight")
	if _, err := New(cfg, p, nil); err == nil || !strings.Contains(err.Error(), "model.norm.weight") {
		t.Errorf("missing parameter: err = %v", err)
	}
	if err := m.SetParam("model.norm.weight", []float32{1}); err == nil {
		t.Error("SetParam accepted a wrong size")
	}
}

// The CPU backend reuses freed buffers: a reused one comes back zeroed, and
// a freed tensor can no longer be used.
func TestCPUPool(t *testing.T) {
	be := NewCPU()
	a := be.Zeros(3, 4)
	be.Fill(a, 7)
	view := be.View(a, 1, 1)
	be.Free(view) // views own nothing
	be.Free(a)
	be.Free(a) // a second Free is harmless
	b := be.Zeros(4, 3)
	for _, v := range be.ToHost(b, nil) {
		if v != 0 {
			t.Fatal("a reused buffer was not cleared")
		}
	}
	if len(be.pool[12]) != 0 {
		t.Error("the freed buffer was not reused")
	}
	defer func() {
		if recover() == nil {
			t.Error("using a freed tensor did not panic")
		}
	}()
	be.Fill(a, 1)
}

// LogProbsFrom gives LogProbs' values from each sequence's start position on
// and 0 before it (the head runs on those rows only).
func TestLogProbsFrom(t *testing.T) {
	m := randomModel(t, tinyConfig(false), 7)
	seqs := [][]int{{1, 5, 7, 2, 9, 11, 3}, {4, 4, 0, 12}, {6, 2}}
	from := []int{3, 0, 2}
	want, err := m.LogProbs(seqs)
	if err != nil {
		t.Fatal(err)
	}
	got, err := m.LogProbsFrom(seqs, from)
	if err != nil {
		t.Fatal(err)
	}
	for i := range seqs {
		for p := range seqs[i] {
			w := want[i][p]
			if p < from[i] {
				w = 0
			}
			if math.Abs(float64(got[i][p]-w)) > 1e-6 {
				t.Errorf("sequence %d position %d: %g, want %g", i, p, got[i][p], w)
			}
		}
	}
	if _, err := m.LogProbsFrom(seqs, from[:1]); err == nil {
		t.Error("LogProbsFrom took 1 start for 3 sequences")
	}
}
