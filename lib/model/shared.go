package model

import (
	"fmt"
	"slices"
)

// Scoring many sequences that begin alike. The memory reward scores, for
// every step t of a trajectory, the gold answer after the whole history up
// to t: the sequences of one trajectory are prefixes of its longest one plus
// a few ids each, and all the trajectories of a task begin with the same
// prompt, so scoring each sequence from its first id costs the square of a
// trajectory's length where once would do. LogProbsShared runs each shared
// beginning once: a sequence that shares at least minSharedPrefix ids with a
// longer one (its source) continues the source's keys and values, copied in
// the KV cache, in the same forward. Sources may themselves continue longer
// sequences, so the sequences form trees.

// minSharedPrefix is the shortest shared beginning worth a copy: below it,
// running the ids again costs about what copying their keys and values does.
const minSharedPrefix = 32

// keyRowsPerID bounds the KV-cache rows of a forward that continues shared
// beginnings (LogProbsShared, Generate's prefill) at this many times the ids
// it runs: bf16 attention packs every key row a sequence reads, copied
// prefixes included.
const keyRowsPerID = 8

// prefixGrain is the granularity of the prefix index: sources are found by
// hashes of their first prefixGrain·k ids.
const prefixGrain = 32

// rowCopy copies n KV-cache rows from src to dst in every layer, after the
// layer has written the batch's own keys and values and before attention.
// The copies of a batch run in order, so a row copied in can be copied on.
type rowCopy struct{ dst, src, n int }

// sharePlan says how each sequence of a LogProbsShared call is run.
type sharePlan struct {
	source []int // index of the sequence whose beginning it continues, or -1: run whole
	prefix []int // how many of its first ids are the source's
	order  []int // the sequences, each after its source (longest first)
}

// planSharing picks the sources: sequences are taken longest first, and
// each one continues the earlier sequence with which it shares the most
// leading ids (found through hashes of prefixes at prefixGrain granularity,
// then compared exactly), if that is at least minSharedPrefix, and at most
// up to its first scored position less one (the row that predicts it must
// be run).
func planSharing(seqs [][]int, from []int) sharePlan {
	n := len(seqs)
	p := sharePlan{source: make([]int, n), prefix: make([]int, n), order: make([]int, n)}
	for i := range p.order {
		p.order[i] = i
	}
	slices.SortStableFunc(p.order, func(a, b int) int { return len(seqs[b]) - len(seqs[a]) })
	index := map[uint64]int{} // hash of some sequence's first prefixGrain·k ids → the first such sequence
	for _, i := range p.order {
		s := seqs[i]
		p.source[i] = -1
		limit := min(len(s), from[i]-1)
		// The deepest prefix of s that some earlier sequence has.
		best := -1
		var h uint64
		for k := 1; k*prefixGrain <= limit; k++ {
			h = extendHash(h, s[(k-1)*prefixGrain:k*prefixGrain])
			c, ok := index[h]
			if !ok {
				break
			}
			best = c
		}
		if best >= 0 {
			c, l := seqs[best], 0
			for l < limit && l < len(c) && c[l] == s[l] {
				l++
			}
			if l >= minSharedPrefix {
				p.source[i], p.prefix[i] = best, l
			}
		}
		h = 0
		for k := 1; k*prefixGrain <= len(s); k++ {
			h = extendHash(h, s[(k-1)*prefixGrain:k*prefixGrain])
			if _, ok := index[h]; !ok {
				index[h] = i
			}
		}
	}
	return p
}

// extendHash is the prefix index's hash of a prefix h followed by ids.
func extendHash(h uint64, ids []int) uint64 {
	for _, id := range ids {
		h = h*0x9e3779b97f4a7c15 + uint64(id) + 1
	}
	return h
}

// sharedEntry is one sequence in a forward: continuing the entry at index
// source of the same forward (-1: run whole) after prefix ids; score says
// its log-probs are wanted (an entry run again only as a later one's source
// has none).
type sharedEntry struct {
	seq, source, prefix int
	score               bool
}

// LogProbsShared is LogProbsFrom for sequences many of which begin with the
// same long run of ids (see planSharing): lp[i][t] = log p(seqs[i][t] |
// seqs[i][:t]) for t ≥ from[i], 0 before. The sequences are run in forwards
// of about budget ids each; what differs from LogProbsFrom is float rounding
// only. ran is how many ids went through the layers (the sequences hold
// Σ len(seqs[i])).
func (m *Model) LogProbsShared(seqs [][]int, from []int, budget int) (lps [][]float32, ran int, err error) {
	m.setPhase("score")
	if len(from) != len(seqs) {
		return nil, 0, fmt.Errorf("model: %d start positions for %d sequences", len(from), len(seqs))
	}
	for i, s := range seqs {
		if len(s) == 0 {
			return nil, 0, fmt.Errorf("model: sequence %d is empty", i)
		}
		for t, id := range s {
			if id < 0 || id >= m.a.vocab {
				return nil, 0, fmt.Errorf("model: sequence %d position %d: token id %d outside the vocabulary [0, %d)", i, t, id, m.a.vocab)
			}
		}
	}
	budget = max(budget, 1)
	plan := planSharing(seqs, from)
	// Depth first over the trees, so that a forward holds whole subtrees
	// as far as the budget allows.
	children := make([][]int, len(seqs))
	var roots []int
	for _, i := range plan.order {
		if c := plan.source[i]; c >= 0 {
			children[c] = append(children[c], i)
		} else {
			roots = append(roots, i)
		}
	}
	var dfs []int
	var walk func(i int)
	walk = func(i int) {
		dfs = append(dfs, i)
		for _, c := range children[i] {
			walk(c)
		}
	}
	for _, r := range roots {
		walk(r)
	}
	// A forward holds about budget ids run and its KV cache at most maxRows
	// rows (every entry's whole sequence: its prefix copied in, the rest
	// run): keyRowsPerID times the budget, or a quarter of the free memory
	// if less.
	// A sequence whose source went into an earlier forward has its chain of
	// sources run again first, unscored.
	maxRows := keyRowsPerID * budget
	// At 7B a cache row is 112 KiB: keep one forward's cache within a
	// quarter of what the backend has free.
	if avail, _, ok := m.AvailableMemory(); ok {
		if perRow := m.KVCacheBytes(1); perRow > 0 {
			maxRows = min(maxRows, max(budget, int(float64(avail)/4/perRow)))
		}
	}
	out := make([][]float32, len(seqs))
	var call []sharedEntry
	in := map[int]int{} // sequence → its entry in call
	ids, rows := 0, 0
	flush := func() error {
		if len(call) == 0 {
			return nil
		}
		n, err := m.sharedCall(seqs, from, call, out)
		ran += n
		call, ids, rows = call[:0], 0, 0
		clear(in)
		return err
	}
	cost := func(i int) int { return len(seqs[i]) - plan.prefix[i] }
	for _, i := range dfs {
		// i's sources, nearest first, and those of them the forward lacks.
		var chain []int
		for c := plan.source[i]; c >= 0; c = plan.source[c] {
			chain = append(chain, c)
		}
		missing := chain
		for k, c := range chain {
			if _, ok := in[c]; ok {
				missing = chain[:k]
				break
			}
		}
		need, needRows, rerun := cost(i), len(seqs[i]), 0
		for _, c := range missing {
			need, needRows = need+cost(c), needRows+len(seqs[c])
		}
		for _, c := range chain {
			rerun += cost(c)
		}
		// Starting a new forward means running i's whole chain of sources
		// again: the budget stretches to 4 times that, so the re-runs cost
		// at most a quarter of what the forwards run.
		if len(call) > 0 && (ids+need > max(budget, 4*rerun) || rows+needRows > maxRows) {
			if err := flush(); err != nil {
				return nil, 0, err
			}
			missing = chain
		}
		for k := len(missing) - 1; k >= 0; k-- {
			c := missing[k]
			call = append(call, addEntry(plan, in, c, false))
			ids, rows = ids+cost(c), rows+len(seqs[c])
		}
		call = append(call, addEntry(plan, in, i, true))
		ids, rows = ids+cost(i), rows+len(seqs[i])
	}
	if err := flush(); err != nil {
		return nil, 0, err
	}
	return out, ran, nil
}

// addEntry makes sequence i the next entry of a forward whose entries are
// in, after its source (which must be there when it has one).
func addEntry(plan sharePlan, in map[int]int, i int, score bool) sharedEntry {
	e := sharedEntry{seq: i, source: -1, score: score}
	if c := plan.source[i]; c >= 0 {
		e.source, e.prefix = in[c], plan.prefix[i]
	}
	in[i] = len(in)
	return e
}

// sharedCall runs one forward over the entries, fills out for the ones it
// scores and returns the ids it ran.
func (m *Model) sharedCall(seqs [][]int, from []int, entries []sharedEntry, out [][]float32) (int, error) {
	b := &batch{}
	krow := 0 // an entry's cache rows hold its whole sequence: the prefix copied in, then its own
	for _, e := range entries {
		s := seqs[e.seq]
		if e.source >= 0 {
			b.copies = append(b.copies, rowCopy{dst: krow, src: b.seqs[e.source].K, n: e.prefix})
		}
		b.seqs = append(b.seqs, AttnSeq{Q: len(b.ids), N: len(s) - e.prefix, K: krow, Past: e.prefix})
		for t := e.prefix; t < len(s); t++ {
			b.ids = append(b.ids, s[t])
			b.pos = append(b.pos, t)
		}
		krow += len(s)
	}
	b.cache = m.newCache(krow, krow)
	defer b.cache.free(m.be)
	x, _ := m.trunk(b, false)
	xn, rstd := m.finalNorm(x)
	m.free(x, rstd)
	defer m.free(xn)
	// Row Q + (t − 1 − prefix) of an entry predicts its position t.
	var idx []int
	for j, e := range entries {
		if e.score {
			for t := max(from[e.seq], 1, e.prefix+1); t < len(seqs[e.seq]); t++ {
				idx = append(idx, b.seqs[j].Q+t-1-e.prefix)
			}
		}
	}
	lps := m.rowLogProbs(xn, targets(b), idx, nil, nil)
	for j, e := range entries {
		if !e.score {
			continue
		}
		o := make([]float32, len(seqs[e.seq]))
		for t := max(from[e.seq], 1, e.prefix+1); t < len(o); t++ {
			o[t] = lps[b.seqs[j].Q+t-1-e.prefix]
		}
		out[e.seq] = o
	}
	return len(b.ids), nil
}
