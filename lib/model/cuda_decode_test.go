package model

import (
	"fmt"
	"math"
	"testing"
)

// TestStepBucket: rows are padded to powers of two.
func TestStepBucket(t *testing.T) {
	for n, want := range map[int]int{1: 1, 2: 2, 3: 4, 6: 8, 32: 32, 33: 64, 256: 256, 300: 512} {
		if got := stepBucket(n); got != want {
			t.Errorf("stepBucket(%d) = %d, want %d", n, got, want)
		}
	}
}

// TestCUDADecodeStep holds the CUDA decoding step (cuda_decode.go) to the
// model's op-by-op path on every parity fixture, in fp32 and bf16 mode:
// greedy and sampled continuations of batches whose rows finish at
// different steps (so the step runs several buckets, padded rows included),
// with the step run directly and replayed from CUDA graphs. Graph replays
// must equal the direct step bit for bit (the same launches); both must give
// the op-by-op path's tokens, and log-probs within 1e-4 (fp32) or 2e-2
// (bf16): the step's attention splits the keys and its small-batch products
// are its own kernel, so sums run in another order, and a padded bucket's
// GEMMs have other shapes, so cuBLAS may sum in another order too.
func TestCUDADecodeStep(t *testing.T) {
	cudaOrSkip(t)
	for _, name := range fixtureCases {
		for _, bf16 := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/bf16=%v", name, bf16), func(t *testing.T) {
				be, err := NewCUDA()
				if err != nil {
					t.Fatal(err)
				}
				be.SetBF16(bf16)
				m := loadFixtureOn(t, name, be)
				g := openGolden(t, name)
				p0, p1, p2 := g.ids(t, "greedy.prompt"), g.ids(t, "ids.0"), g.ids(t, "ids.1")
				reqs := []Request{{Prompt: p0, N: 1, Seed: 1}, {Prompt: p1[:len(p1)/2+1], N: 2, Seed: 2}, {Prompt: p2, N: 3, Seed: 3}}
				run := func(mode string, opts GenerateOptions) []*Generation {
					be.decode = mode
					out, err := m.Generate(reqs, opts)
					if err != nil {
						t.Fatal(err)
					}
					return out
				}
				greedy := GenerateOptions{MaxTokens: 20, IgnoreEOS: true}
				ref := run(decodeGeneric, greedy)
				// An EOS id that one row emits early, so rows end at different
				// steps and the active rows move to smaller buckets.
				eos := ref[1].IDs[3]
				cases := []struct {
					what string
					opts GenerateOptions
				}{
					{"greedy", greedy},
					{"greedy with EOS", GenerateOptions{MaxTokens: 20, EOS: []int{eos}}},
					{"temperature", GenerateOptions{MaxTokens: 16, Sampling: SampleParams{Temperature: 0.9}}},
					{"top-k", GenerateOptions{MaxTokens: 12, Sampling: SampleParams{Temperature: 0.8, TopK: 5}}},
				}
				tol := 1e-4
				if bf16 {
					tol = 2e-2
				}
				for _, c := range cases {
					gen := run(decodeGeneric, c.opts)
					direct := run(decodeDirect, c.opts)
					replays := be.graphReplays
					graph := run(decodeGraph, c.opts)
					if be.graphErr != nil {
						t.Fatalf("%s: graph capture failed: %v", c.what, be.graphErr)
					}
					if be.graphReplays == replays {
						t.Errorf("%s: no graph was replayed", c.what)
					}
					var worst float64
					for i := range gen {
						if !equalInts(graph[i].IDs, direct[i].IDs) || !equalF32(graph[i].LogProbs, direct[i].LogProbs) ||
							!equalF32(graph[i].SampleLogProbs, direct[i].SampleLogProbs) || graph[i].Finish != direct[i].Finish {
							t.Errorf("%s row %d: graph replay differs from the direct step\n graph  %v %v\n direct %v %v",
								c.what, i, graph[i].IDs, graph[i].LogProbs, direct[i].IDs, direct[i].LogProbs)
						}
						if !equalInts(graph[i].IDs, gen[i].IDs) || graph[i].Finish != gen[i].Finish {
							t.Errorf("%s row %d: tokens differ from the op-by-op path\n graph   %v (%s)\n generic %v (%s)",
								c.what, i, graph[i].IDs, graph[i].Finish, gen[i].IDs, gen[i].Finish)
							continue
						}
						for j := range gen[i].LogProbs {
							worst = math.Max(worst, math.Abs(float64(graph[i].LogProbs[j]-gen[i].LogProbs[j])))
							worst = math.Max(worst, math.Abs(float64(graph[i].SampleLogProbs[j]-gen[i].SampleLogProbs[j])))
						}
					}
					t.Logf("%s: log-probs within %.3g of the op-by-op path", c.what, worst)
					if worst > tol {
						t.Errorf("%s: log-probs differ from the op-by-op path by %.3g > %.3g", c.what, worst, tol)
					}
				}
			})
		}
	}
}

func equalF32(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return false
		}
	}
	return true
}
