package model

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestRowSpans: first fit, runs merged on release, a run given back twice
// refused.
func TestRowSpans(t *testing.T) {
	a := rowSpans{free: []span{{10, 100}}}
	x, _ := a.alloc(30)
	y, _ := a.alloc(30)
	z, _ := a.alloc(40)
	if x != 10 || y != 40 || z != 70 || len(a.free) != 0 || a.used != 100 {
		t.Fatalf("allocs at %d %d %d, free %v, used %d", x, y, z, a.free, a.used)
	}
	if _, ok := a.alloc(1); ok {
		t.Fatal("an alloc from a full cache succeeded")
	}
	a.release(x, 30)
	a.release(z, 40)
	if at, ok := a.alloc(31); !ok || at != 70 {
		t.Fatalf("31 rows from free runs of 30 and 40: at %d, %v; want the second, at 70", at, ok)
	}
	a.release(70, 31)
	a.release(y, 30) // joins both neighbours
	if !slices.Equal(a.free, []span{{10, 100}}) || a.used != 0 {
		t.Fatalf("free %v, used %d: want one run [10, 110)", a.free, a.used)
	}
	defer func() {
		if recover() == nil {
			t.Fatal("rows given back twice: no panic")
		}
	}()
	a.release(50, 5)
}

// TestRowSpansRandom: random allocs and releases against a map of the rows
// in use: no row handed out twice, the free runs sorted, disjoint and
// merged, and every row either free or in use.
func TestRowSpansRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const lo, hi = 5, 500
	a := rowSpans{free: []span{{lo, hi - lo}}}
	owner := map[int]int{} // row → the alloc holding it
	var held []span
	for it := range 5000 {
		if len(held) > 0 && rng.IntN(2) == 0 {
			k := rng.IntN(len(held))
			s := held[k]
			a.release(s.at, s.n)
			for r := s.at; r < s.at+s.n; r++ {
				delete(owner, r)
			}
			held = slices.Delete(held, k, k+1)
		} else if at, ok := a.alloc(1 + rng.IntN(40)); ok {
			n := a.used - len(owner)
			for r := at; r < at+n; r++ {
				if _, dup := owner[r]; dup || r < lo || r >= hi {
					t.Fatalf("step %d: row %d handed out twice or outside [%d, %d)", it, r, lo, hi)
				}
				owner[r] = it
			}
			held = append(held, span{at, n})
		}
		free := 0
		for i, f := range a.free {
			if f.n <= 0 || i > 0 && a.free[i-1].at+a.free[i-1].n >= f.at {
				t.Fatalf("step %d: free runs %v not sorted, disjoint and merged", it, a.free)
			}
			free += f.n
		}
		if free+len(owner) != hi-lo || a.used != len(owner) {
			t.Fatalf("step %d: %d free + %d in use (used %d) of %d", it, free, len(owner), a.used, hi-lo)
		}
	}
}

// checkCacheLimit generates sharedPromptCase (samples of held prompts and
// one-sample requests that read a holder's beginning) past the first slot
// under cache limits below what the call reserves without one: the same
// tokens and log-probs as without a limit (within tol), the cache at the
// limit (or at StartCacheRows, the least the call may take, where more). Every row running to
// MaxTokens needs the whole reservation at the end, so rows are preempted;
// rows that end early (a hundredth of the vocabulary ends a row) leave room.
func checkCacheLimit(t *testing.T, m *Model, first int, tol float64) {
	t.Helper()
	reqs := sharedPromptCase(rand.New(rand.NewPCG(7, 8)), m.VocabSize())
	var eos []int
	for id := 0; id < m.VocabSize(); id += 97 {
		eos = append(eos, id)
	}
	for _, c := range []struct {
		temp float64
		eos  bool
	}{{0, false}, {1, false}, {1, true}} {
		opts := GenerateOptions{MaxTokens: 2*first + first/3, Sampling: SampleParams{Temperature: c.temp, TopP: 1}, IgnoreEOS: !c.eos, EOS: eos, firstSlot: first}
		var free GenerateReport
		opts.Report = &free
		want, err := m.Generate(reqs, opts)
		if err != nil {
			t.Fatal(err)
		}
		full, start := CacheRows(reqs, opts), StartCacheRows(reqs, opts)
		if free.CacheRows != full || free.PeakRows != full || free.Preempted != 0 || start >= full {
			t.Fatalf("no limit: report %+v, CacheRows %d, StartCacheRows %d", free, full, start)
		}
		tokens := 0
		for _, g := range want {
			tokens += len(g.IDs)
		}
		for _, limit := range []int{(full + start) / 2, start} {
			var rep GenerateReport
			opts.CacheLimit, opts.Report = limit, &rep
			got, err := m.Generate(reqs, opts)
			if err != nil {
				t.Fatal(err)
			}
			what := fmt.Sprintf("temperature %g, rows ending early %v, limit %d of %d rows (%d to start)", c.temp, c.eos, limit, full, start)
			for i := range want {
				sameGenerationWithin(t, fmt.Sprintf("%s, row %d", what, i), got[i], want[i], tol)
			}
			if rep.PeakRows > rep.CacheRows || rep.CacheRows != max(limit, start) || rep.CacheRows >= full {
				t.Fatalf("%s: report %+v", what, rep)
			}
			if !c.eos && rep.Preempted == 0 {
				t.Fatalf("%s: every row runs to the end, and no row was preempted", what)
			}
			t.Logf("%s: report %+v, %d tokens", what, rep, tokens)
		}
	}
}

func TestGenerateCacheLimit(t *testing.T) {
	checkCacheLimit(t, loadFixture(t, "qwen2-untied-gqa4"), slotFirst, 1e-4)
}

// TestEmuGenerateCacheLimit: the same on the CUDA backend's op-by-op path
// over the kernel emulation (the slots' moves in one copy launch a layer,
// the own prompts prefilled again between steps).
func TestEmuGenerateCacheLimit(t *testing.T) {
	checkCacheLimit(t, loadFixtureOn(t, "qwen2-untied-gqa4", emuCUDA(t)), 4, 1e-4)
}

// TestCUDAGenerateCacheLimit: on the GPU, in fp32 and bf16 mode, the
// decoding step's graphs included (their rows' cache places change as
// slots move).
func TestCUDAGenerateCacheLimit(t *testing.T) {
	eachCUDAMode(t, []string{"qwen2-untied-gqa4"}, func(t *testing.T, m *Model, tol float64) { checkCacheLimit(t, m, slotFirst, tol) })
}

// TestGenerateCacheLimitRandom: random turns (chains and branches of
// prompts, one to four samples a request, as randomTurn makes them) under
// random limits between the least a call runs in and its reservation, with
// first slots of 4 rows so that slots grow and rows are preempted within a
// few tokens, and rows that end at different lengths: the same greedy
// generations as without a limit. Greedy, because a resumed row's keys come
// from a prefill, equal to its decoding steps' to float rounding: a sampled
// token falling within that rounding of a boundary of the sampler's
// cumulative sums flips (seen once in 150 sampled turns), an argmax needs a
// tie that close (none in 600 greedy turns, 6,267 preemptions).
func TestGenerateCacheLimitRandom(t *testing.T) {
	const turns = 12
	m := loadFixture(t, "qwen2-untied-gqa4")
	rng := rand.New(rand.NewPCG(9, 10))
	var eos []int
	for id := 3; id < m.VocabSize(); id += 41 {
		eos = append(eos, id)
	}
	preempted := 0
	for k := range turns {
		reqs := randomTurn(rng)
		for i := range reqs {
			reqs[i].Seed = uint64(100*k + i)
		}
		opts := GenerateOptions{MaxTokens: 9 + rng.IntN(12), EOS: eos, firstSlot: 4}
		want, err := m.Generate(reqs, opts)
		if err != nil {
			t.Fatal(err)
		}
		full, least := CacheRows(reqs, opts), StartCacheRows(reqs, opts)
		var rep GenerateReport
		opts.CacheLimit, opts.Report = least+rng.IntN(max(1, full-least)), &rep
		got, err := m.Generate(reqs, opts)
		if err != nil {
			t.Fatal(err)
		}
		for i := range want {
			sameGenerationWithin(t, fmt.Sprintf("case %d (limit %d, least %d, reserved %d), row %d", k, opts.CacheLimit, least, full, i), got[i], want[i], 1e-4)
		}
		if rep.PeakRows > rep.CacheRows || rep.CacheRows > max(opts.CacheLimit, least) {
			t.Fatalf("case %d: report %+v, limit %d, least %d", k, rep, opts.CacheLimit, least)
		}
		preempted += rep.Preempted
	}
	if preempted == 0 {
		t.Fatal("no row was preempted in any case")
	}
	t.Logf("%d preemptions over %d random turns", preempted, turns)
}
