package model

import (
	"fmt"
	"slices"
)

// Scoring many sequences that begin alike. The memory reward scores, for
// every step t of a trajectory, the gold answer after the whole history up
// to t: the sequences of one trajectory are prefixes of its longest one plus
// a few ids each, so scoring each from its first id costs the square of the
// trajectory's length where once would do. LogProbsShared runs each shared
// beginning once: a sequence that shares at least minSharedPrefix ids with a
// longer one (its carrier) is run as a continuation of the carrier's keys and
// values, copied in the KV cache, in the same forward.

// minSharedPrefix is the shortest shared beginning worth a copy: below it,
// running the ids again costs about what copying their keys and values does.
const minSharedPrefix = 32

// prefixGrain is the granularity of the prefix index: carriers are found by
// hashes of their first prefixGrain·k ids.
const prefixGrain = 32

// rowCopy copies n KV-cache rows from src to dst in every layer, after the
// layer has written the batch's own keys and values and before attention.
type rowCopy struct{ dst, src, n int }

// sharedPart is a carrier and some of the sequences that continue it, run
// in one forward.
type sharedPart struct {
	carrier int
	deps    []int
	score   bool // the carrier's own log-probs are taken from this part
}

// sharePlan says how each sequence of a LogProbsShared call is run.
type sharePlan struct {
	carrier []int // index of the sequence whose beginning it continues, or -1: run whole
	prefix  []int // how many of its first ids are the carrier's
}

// planSharing picks the carriers: sequences are taken longest first, and
// each one continues the carrier with which it shares the most leading ids
// (found through hashes of carriers' prefixes at prefixGrain granularity,
// then compared exactly), if that is at least minSharedPrefix and before its
// first scored position (from − 1: the row that predicts it must be run);
// otherwise it becomes a carrier itself.
func planSharing(seqs [][]int, from []int) sharePlan {
	n := len(seqs)
	p := sharePlan{carrier: make([]int, n), prefix: make([]int, n)}
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return len(seqs[b]) - len(seqs[a]) })
	index := map[uint64]int{} // hash of a carrier's first prefixGrain·k ids → the carrier
	const mul = 0x9e3779b97f4a7c15
	for _, i := range order {
		s := seqs[i]
		p.carrier[i] = -1
		limit := min(len(s), from[i]-1)
		// Walk s's prefix hashes while some carrier has the same prefix.
		best, bestLen := -1, 0
		var h uint64
		for k := 1; k*prefixGrain <= limit; k++ {
			for _, id := range s[(k-1)*prefixGrain : k*prefixGrain] {
				h = h*mul + uint64(id) + 1
			}
			c, ok := index[h]
			if !ok {
				break
			}
			best = c
		}
		if best >= 0 {
			c := seqs[best]
			for bestLen < limit && bestLen < len(c) && c[bestLen] == s[bestLen] {
				bestLen++
			}
		}
		if best >= 0 && bestLen >= minSharedPrefix {
			p.carrier[i], p.prefix[i] = best, bestLen
			continue
		}
		h = 0
		for k := 1; k*prefixGrain <= len(s); k++ {
			for _, id := range s[(k-1)*prefixGrain : k*prefixGrain] {
				h = h*mul + uint64(id) + 1
			}
			if _, ok := index[h]; !ok {
				index[h] = i
			}
		}
	}
	return p
}

// LogProbsShared is LogProbsFrom for sequences many of which begin with the
// same long run of ids (see planSharing): lp[i][t] = log p(seqs[i][t] |
// seqs[i][:t]) for t ≥ from[i], 0 before. The sequences are run in forwards
// of about budget ids each (a carrier and the sequences continuing it go
// together); what differs from LogProbsFrom is float rounding only. ran is
// how many ids went through the layers (the sequences hold Σ len(seqs[i])).
func (m *Model) LogProbsShared(seqs [][]int, from []int, budget int) (lps [][]float32, ran int, err error) {
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
	// Groups: a carrier (or a sequence run whole) and the sequences that
	// continue it, in the carriers' order.
	deps := map[int][]int{}
	var heads []int
	for i := range seqs {
		if c := plan.carrier[i]; c >= 0 {
			deps[c] = append(deps[c], i)
		} else {
			heads = append(heads, i)
		}
	}
	out := make([][]float32, len(seqs))
	// A call holds whole groups while their ids run stay within budget, and
	// splits a group whose continuations alone exceed it (the carrier is
	// then run again in each part, its log-probs taken once). Its KV cache
	// holds the carriers' rows and each continuation's copy of its prefix,
	// about maxRows rows at most.
	maxRows := 8 * budget
	var call []sharedPart
	ids, rows := 0, 0
	flush := func() error {
		if len(call) == 0 {
			return nil
		}
		n, err := m.sharedCall(seqs, from, plan, call, out)
		ran += n
		call, ids, rows = call[:0], 0, 0
		return err
	}
	for _, c := range heads {
		cur := sharedPart{carrier: c, score: true}
		cost, crow := len(seqs[c]), len(seqs[c])
		if ids > 0 && ids+cost > budget {
			if err := flush(); err != nil {
				return nil, 0, err
			}
		}
		ids, rows = ids+cost, rows+crow
		for _, d := range deps[c] {
			dc, dr := len(seqs[d])-plan.prefix[d], len(seqs[d])
			// A part holds at least twice its carrier's ids in
			// continuations before it splits, so a carrier run again
			// costs at most half of what sharing saves.
			if len(cur.deps) > 0 && (ids+dc > max(budget, 3*cost) || rows+dr > max(maxRows, 3*crow+dr)) {
				call = append(call, cur)
				if err := flush(); err != nil {
					return nil, 0, err
				}
				cur = sharedPart{carrier: c}
				ids, rows = cost, crow
			}
			cur.deps = append(cur.deps, d)
			ids, rows = ids+dc, rows+dr
		}
		call = append(call, cur)
	}
	if err := flush(); err != nil {
		return nil, 0, err
	}
	return out, ran, nil
}

// sharedCall runs one forward over the parts' carriers and continuations,
// fills out for the sequences it scores and returns the ids it ran.
func (m *Model) sharedCall(seqs [][]int, from []int, plan sharePlan, parts []sharedPart, out [][]float32) (int, error) {
	type placed struct{ seq, q, first int } // sequence, its first batch row, the position of that row
	b := &batch{}
	var where []placed
	krow := 0
	add := func(seq, first, past, kAt int) {
		s := seqs[seq]
		b.seqs = append(b.seqs, AttnSeq{Q: len(b.ids), N: len(s) - first, K: kAt, Past: past})
		where = append(where, placed{seq: seq, q: len(b.ids), first: first})
		for t := first; t < len(s); t++ {
			b.ids = append(b.ids, s[t])
			b.pos = append(b.pos, t)
		}
	}
	var scored []bool
	for _, p := range parts {
		ck := krow
		add(p.carrier, 0, 0, ck)
		scored = append(scored, p.score)
		krow += len(seqs[p.carrier])
		for _, d := range p.deps {
			L := plan.prefix[d]
			b.copies = append(b.copies, rowCopy{dst: krow, src: ck, n: L})
			add(d, L, L, krow)
			scored = append(scored, true)
			krow += len(seqs[d])
		}
	}
	b.cache = m.newCache(1, krow)
	defer b.cache.free(m.be)
	x, _ := m.trunk(b, false)
	xn, rstd := m.finalNorm(x)
	m.free(x, rstd)
	defer m.free(xn)
	var idx []int
	for j, w := range where {
		if !scored[j] {
			continue
		}
		n := len(seqs[w.seq])
		for t := max(from[w.seq], 1, w.first+1); t < n; t++ {
			idx = append(idx, w.q+t-1-w.first)
		}
	}
	lps := m.rowLogProbs(xn, targets(b), idx, nil, nil)
	for j, w := range where {
		if !scored[j] {
			continue
		}
		n := len(seqs[w.seq])
		o := make([]float32, n)
		for t := max(from[w.seq], 1, w.first+1); t < n; t++ {
			o[t] = lps[w.q+t-1-w.first]
		}
		out[w.seq] = o
	}
	return len(b.ids), nil
}
