package model

import (
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mempo/mempo/lib/checkpoint"
	"github.com/mempo/mempo/lib/safetensors"
)

// The fixtures of scripts/golden_qwen2.py: tiny random Qwen2/Qwen3 models with
// transformers' float32 logits, token log-probs, loss, gradients and greedy
// continuations.
var fixtureCases = []string{"qwen2-tied-gqa1", "qwen2-untied-gqa4", "qwen3-qknorm-nobias", "qwen3-qknorm-bias-untied", "qwen2-bf16"}

func fixtureDir(name string) string { return filepath.Join("..", "..", "testdata", "models", name) }

type golden struct {
	f *safetensors.File
}

func openGolden(t *testing.T, name string) *golden {
	t.Helper()
	f, err := safetensors.Open(filepath.Join(fixtureDir(name), "golden.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return &golden{f}
}

func (g *golden) f32(t *testing.T, name string) []float32 {
	t.Helper()
	v, _, err := g.f.Float32(name)
	if err != nil {
		t.Fatalf("golden %s: %v", name, err)
	}
	return v
}

func (g *golden) ids(t *testing.T, name string) []int {
	t.Helper()
	v, _, err := g.f.Int64(name)
	if err != nil {
		t.Fatalf("golden %s: %v", name, err)
	}
	out := make([]int, len(v))
	for i, x := range v {
		out[i] = int(x)
	}
	return out
}

// maxRelErr is max|a−b| / max|b|: the error relative to the tensor's scale,
// so near-zero elements are judged against the whole tensor, not themselves.
func maxRelErr(a, b []float32) float64 {
	var d, s float64
	for i := range b {
		d = math.Max(d, math.Abs(float64(a[i])-float64(b[i])))
		s = math.Max(s, math.Abs(float64(b[i])))
	}
	if s == 0 {
		return d
	}
	return d / s
}

func loadFixture(t *testing.T, name string) *Model {
	t.Helper()
	return loadFixtureOn(t, name, NewCPU())
}

func loadFixtureOn(t *testing.T, name string, be Backend) *Model {
	t.Helper()
	m, err := Load(fixtureDir(name), be)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestParityWithTransformers(t *testing.T) {
	runParity(t, func(string) Backend { return NewCPU() })
}

// runParity checks every fixture against transformers' goldens on the
// backends newBackend returns (one per fixture): the CPU here, CUDA in
// cuda_test.go, with the same tolerances.
func runParity(t *testing.T, newBackend func(fixture string) Backend) {
	for _, name := range fixtureCases {
		t.Run(name, func(t *testing.T) {
			m := loadFixtureOn(t, name, newBackend(name))
			g := openGolden(t, name)
			seqs := [][]int{g.ids(t, "ids.0"), g.ids(t, "ids.1")}
			weights := [][]float32{g.f32(t, "weights.0"), g.f32(t, "weights.1")}

			logits, err := m.Logits(seqs)
			if err != nil {
				t.Fatal(err)
			}
			for b := range seqs {
				if e := maxRelErr(logits[b], g.f32(t, "logits."+string(rune('0'+b)))); e > 1e-4 {
					t.Errorf("logits.%d: relative error %.3g > 1e-4", b, e)
				}
			}
			lps, err := m.LogProbs(seqs)
			if err != nil {
				t.Fatal(err)
			}
			for b := range seqs {
				want := g.f32(t, "logprobs."+string(rune('0'+b)))
				for i := range want {
					if d := math.Abs(float64(lps[b][i] - want[i])); d > 1e-4*math.Max(1, math.Abs(float64(want[i]))) {
						t.Errorf("logprobs.%d[%d] = %g, want %g", b, i, lps[b][i], want[i])
					}
				}
			}

			for _, recompute := range []bool{false, true} {
				m.ZeroGrads()
				m.Recompute = recompute
				loss, lp2, err := m.Backward(seqs, weights)
				if err != nil {
					t.Fatal(err)
				}
				wantLoss := float64(g.f32(t, "loss")[0])
				if math.Abs(loss-wantLoss) > 1e-3*math.Abs(wantLoss) {
					t.Errorf("recompute=%v: loss %g, want %g", recompute, loss, wantLoss)
				}
				for b := range seqs {
					if e := maxRelErr(lp2[b], lps[b]); e > 1e-6 {
						t.Errorf("recompute=%v: Backward's log-probs differ from LogProbs' by %.3g", recompute, e)
					}
				}
				grads := m.Grads()
				n := 0
				for _, name := range g.f.Names() {
					if !strings.HasPrefix(name, "grad.") {
						continue
					}
					n++
					p := strings.TrimPrefix(name, "grad.")
					got, ok := grads[p]
					if !ok {
						t.Errorf("no gradient for %s", p)
						continue
					}
					if e := maxRelErr(got, g.f32(t, name)); e > 1e-3 {
						t.Errorf("recompute=%v: grad %s: relative error %.3g > 1e-3", recompute, p, e)
					}
				}
				if n != len(grads) {
					t.Errorf("fixture has %d gradients, model %d", n, len(grads))
				}
			}

			// Greedy: alone, and batched with a longer prompt of another length.
			prompt, want := g.ids(t, "greedy.prompt"), g.ids(t, "greedy.output")
			opts := GenerateOptions{MaxTokens: len(want), IgnoreEOS: true}
			alone, err := m.Generate([]Request{{Prompt: prompt}}, opts)
			if err != nil {
				t.Fatal(err)
			}
			both, err := m.Generate([]Request{{Prompt: seqs[0]}, {Prompt: prompt}}, opts)
			if err != nil {
				t.Fatal(err)
			}
			for _, got := range []*Generation{alone[0], both[1]} {
				if !slices.Equal(got.IDs, want) {
					t.Errorf("greedy continuation\n got %v\nwant %v", got.IDs, want)
				}
			}
			// The log-probs returned while decoding are the teacher-forced ones.
			full := append(append([]int(nil), prompt...), alone[0].IDs...)
			tf, err := m.LogProbs([][]int{full})
			if err != nil {
				t.Fatal(err)
			}
			for i, lp := range alone[0].LogProbs {
				if d := math.Abs(float64(lp - tf[0][len(prompt)+i])); d > 1e-4 {
					t.Errorf("decode log-prob %d = %g, teacher-forced %g", i, lp, tf[0][len(prompt)+i])
				}
			}
		})
	}
}

// The fixture directories are complete HF checkpoints: the config is read by
// lib/checkpoint exactly as transformers wrote it.
func TestFixtureConfigs(t *testing.T) {
	for _, name := range fixtureCases {
		if _, err := os.Stat(filepath.Join(fixtureDir(name), "config.json")); err != nil {
			t.Fatal(err)
		}
		cfg, err := checkpoint.LoadConfig(fixtureDir(name))
		if err != nil {
			t.Fatal(err)
		}
		if cfg.VocabSize != 320 || cfg.HiddenSize != 64 {
			t.Errorf("%s: vocab %d hidden %d", name, cfg.VocabSize, cfg.HiddenSize)
		}
	}
}

// TestParityBlockedAttention reruns the parity checks with attention blocks
// of 4 query rows, so the fixtures' 17- and 9-token sequences span several
// blocks and every block boundary of the causal skipping is exercised.
func TestParityBlockedAttention(t *testing.T) {
	defer func(b int) { attnBlock = b }(attnBlock)
	attnBlock = 4
	runParity(t, func(string) Backend { return NewCPU() })
}
