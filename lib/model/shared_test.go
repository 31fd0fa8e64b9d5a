package model

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestLogProbsShared scores sequences built like the memory reward's (a
// trajectory's histories are prefixes of its longest plus a few ids; its
// memory sequences share only the prompt; other tasks share nothing) and
// checks them against LogProbs of each whole sequence, at budgets that keep
// every group in one forward and that split groups across forwards.
func TestLogProbsShared(t *testing.T) {
	for _, qwen3 := range []bool{false, true} {
		cfg := tinyConfig(qwen3)
		cfg.MaxPositions = 512
		m := randomModel(t, cfg, 11)
		seqs, from := sharedPrefixCase(rand.New(rand.NewPCG(3, 4)), cfg.VocabSize)

		plan := planSharing(seqs, from)
		shared := 0
		for i, c := range plan.source {
			if c >= 0 {
				shared++
				if plan.prefix[i] < minSharedPrefix || plan.prefix[i] > from[i]-1 {
					t.Fatalf("sequence %d shares %d ids (from %d)", i, plan.prefix[i], from[i])
				}
				for p := 0; p < plan.prefix[i]; p++ {
					if seqs[c][p] != seqs[i][p] {
						t.Fatalf("sequence %d's prefix differs from its source %d at %d", i, c, p)
					}
				}
			}
		}
		if shared < len(seqs)/2 {
			t.Fatalf("only %d of %d sequences continue another", shared, len(seqs))
		}
		want, err := m.LogProbs(seqs)
		if err != nil {
			t.Fatal(err)
		}
		for _, budget := range []int{1 << 20, 200, 1} {
			got, ran, err := m.LogProbsShared(seqs, from, budget)
			if err != nil {
				t.Fatal(err)
			}
			worst := 0.0
			for i := range seqs {
				if len(got[i]) != len(seqs[i]) {
					t.Fatalf("budget %d: sequence %d: %d log-probs for %d ids", budget, i, len(got[i]), len(seqs[i]))
				}
				for p := range seqs[i] {
					w := want[i][p]
					if p < from[i] {
						w = 0
					}
					d := math.Abs(float64(got[i][p] - w))
					worst = max(worst, d)
					if d > 2e-5 {
						t.Fatalf("qwen3 %v budget %d: sequence %d position %d: %g, want %g", qwen3, budget, i, p, got[i][p], w)
					}
				}
			}
			total := 0
			for _, s := range seqs {
				total += len(s)
			}
			if budget > 100 && 2*ran > total {
				t.Errorf("budget %d: ran %d of the %d ids", budget, ran, total)
			}
			t.Logf("qwen3 %v budget %d: %d of %d sequences shared a prefix; ran %d of %d ids; max |Δ| %.2g", qwen3, budget, shared, len(seqs), ran, total, worst)
		}
	}
	m := randomModel(t, tinyConfig(false), 1)
	if _, _, err := m.LogProbsShared([][]int{{1, 2}}, nil, 10); err == nil {
		t.Error("no start positions: accepted")
	}
	if _, _, err := m.LogProbsShared([][]int{{1, 99}}, []int{1}, 10); err == nil {
		t.Error("an id outside the vocabulary: accepted")
	}
}

// sharedPrefixCase builds sequences as the memory reward does: for each of
// 3 tasks × 2 trajectories × 4 steps, the history so far ⊕ a gold (scored
// from the gold on) and the prompt ⊕ a memory ⊕ the gold; then two short
// unshared sequences.
func sharedPrefixCase(r *rand.Rand, vocab int) (seqs [][]int, from []int) {
	randIDs := func(n int) []int {
		s := make([]int, n)
		for i := range s {
			s[i] = r.IntN(vocab)
		}
		return s
	}
	cat := func(parts ...[]int) []int {
		var s []int
		for _, p := range parts {
			s = append(s, p...)
		}
		return s
	}
	for task := 0; task < 3; task++ {
		prompt := randIDs(40 + 10*task)
		for traj := 0; traj < 2; traj++ {
			hist := prompt
			for step := 0; step < 4; step++ {
				gold := randIDs(3 + step)
				seqs = append(seqs, cat(hist, gold))
				from = append(from, len(hist))
				mem := cat(prompt, randIDs(6), gold)
				seqs = append(seqs, mem)
				from = append(from, len(mem)-len(gold))
				hist = cat(hist, randIDs(25+r.IntN(20)))
			}
		}
	}
	seqs = append(seqs, randIDs(20), randIDs(5))
	from = append(from, 1, 0)
	return seqs, from
}

// TestCUDALogProbsShared: on the GPU, in fp32 and bf16 mode, the shared
// scoring (continuations attend to copied cache rows, Past > 0 with several
// query rows) against LogProbs of each sequence, on the fixture models.
func TestCUDALogProbsShared(t *testing.T) {
	cudaOrSkip(t)
	for _, name := range fixtureCases {
		for _, bf16 := range []bool{false, true} {
			be := cudaOrSkip(t)
			be.SetBF16(bf16)
			m := loadFixtureOn(t, name, be)
			seqs, from := sharedPrefixCase(rand.New(rand.NewPCG(5, 6)), m.VocabSize())
			want, err := m.LogProbs(seqs)
			if err != nil {
				t.Fatal(err)
			}
			got, ran, err := m.LogProbsShared(seqs, from, 300)
			if err != nil {
				t.Fatal(err)
			}
			// bf16 products round their operands to 8 bits of mantissa, and
			// the continuations read keys and values from the cache (as
			// decoding does) where LogProbs reads them from the projection:
			// their log-probs agree to about 1% of their size.
			tol, rel := 1e-4, 0.0
			if bf16 {
				tol, rel = 5e-2, 1e-2
			}
			worst := 0.0
			for i := range seqs {
				for p := from[i]; p < len(seqs[i]); p++ {
					d := math.Abs(float64(got[i][p] - want[i][p]))
					worst = max(worst, d)
					if d > tol+rel*math.Abs(float64(want[i][p])) {
						t.Fatalf("%s bf16 %v: sequence %d position %d: %g, want %g", name, bf16, i, p, got[i][p], want[i][p])
					}
				}
			}
			t.Logf("%s bf16 %v: ran %d ids; max |Δ| %.2g", name, bf16, ran, worst)
			m.Release()
		}
	}
}

// resolveCopies on hand-made plans: a chain (C continues B, which continues
// A) whose second copy splits where B's own copied rows end, merged runs,
// and the plans it refuses.
func TestResolveCopies(t *testing.T) {
	// Slots of 100 rows: A at 0 (run whole), B at 100 continues A for 40
	// rows, C at 200 continues B for 60 rows (40 of them B's copy of A),
	// D at 300 gets A's first 10 rows and then 10 more (two copies that
	// merge into one run).
	copies := []rowCopy{{dst: 100, src: 0, n: 40}, {dst: 200, src: 100, n: 60}, {dst: 300, src: 0, n: 10}, {dst: 310, src: 10, n: 10}}
	want := []rowCopy{{dst: 100, src: 0, n: 40}, {dst: 200, src: 0, n: 40}, {dst: 240, src: 140, n: 20}, {dst: 300, src: 0, n: 20}}
	if got := resolveCopies(copies); !slices.Equal(got, want) {
		t.Fatalf("resolveCopies = %v, want %v", got, want)
	}
	// Run in order row by row, the copies give what the runs give at once.
	rows := make([]int, 400)
	for i := range rows {
		rows[i] = i
	}
	seq := slices.Clone(rows)
	for _, c := range copies {
		copy(seq[c.dst:c.dst+c.n], seq[c.src:c.src+c.n])
	}
	at := slices.Clone(rows)
	for _, r := range want {
		copy(at[r.dst:r.dst+r.n], rows[r.src:r.src+r.n])
	}
	if !slices.Equal(seq, at) {
		t.Fatal("the resolved runs differ from the copies run in order")
	}
	for _, bad := range [][]rowCopy{
		{{dst: 100, src: 0, n: 40}, {dst: 120, src: 0, n: 5}},    // rows written twice
		{{dst: 200, src: 100, n: 10}, {dst: 100, src: 0, n: 40}}, // reads rows a later copy writes
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("resolveCopies(%v) did not refuse", bad)
				}
			}()
			resolveCopies(bad)
		}()
	}
}
