package model

import (
	"fmt"
	"slices"
)

// Growing KV-cache slots. By default Generate reserves MaxTokens new-token
// rows for every row before it decodes (cacheLayout), though a step mostly
// writes far fewer: most of a rollout call's cache is reservation. With
// GenerateOptions.CacheLimit below what that reservation takes, a row
// starts with a slot of slotFirst new-token rows after its own ids and
// moves to a slot with twice the new-token rows (its rows copied, one
// launch a layer for every row that moves in a step) when the next token
// would not fit, so a row holds at most twice the tokens it has written.
// When no free run of rows is large enough, the row last in the order
// among those holding a slot (preemption by priority) gives its slot back
// and waits, its tokens kept; once rows that finish have freed enough it
// goes on, its own prompt ids and the tokens it wrote run again in a
// prefill (preemption by recompute: one forward, not a step a token). The
// first row in the order is never preempted while others hold rows, and
// alone it always fits (slotCache's limit), so every call ends.
//
// The decode kernels read a row's keys as before (one run from K+PN): a
// slot is a contiguous run, and only its place changes. The prompts held
// once (cacheLayout's holders) stay where the prefill wrote them.

// slotFirst is the new-token rows of a row's first slot.
const slotFirst = 64

// firstSlot is the new-token rows of a row's first slot under opts:
// slotFirst (GenerateOptions.firstSlot in tests), at most MaxTokens.
func firstSlot(opts GenerateOptions) int {
	n := slotFirst
	if opts.firstSlot > 0 {
		n = opts.firstSlot
	}
	return min(n, opts.MaxTokens)
}

// SlotRows is the new-token rows of a growing slot (CacheLimit) that holds
// tokens new tokens: the first slot's, doubled until they hold them, at
// most MaxTokens. A row's own prompt ids come before them and are not
// doubled.
func SlotRows(tokens int, opts GenerateOptions) int {
	n := max(firstSlot(opts), 1)
	for n < tokens {
		n *= 2
	}
	return min(n, opts.MaxTokens)
}

// span is a run of KV-cache rows [at, at+n).
type span struct{ at, n int }

// rowSpans hands out runs of KV-cache rows, first fit, from free runs kept
// sorted and merged.
type rowSpans struct {
	free []span
	used int // rows handed out and not given back
}

// alloc takes n rows from the first free run that has them.
func (a *rowSpans) alloc(n int) (int, bool) {
	for i, f := range a.free {
		if f.n >= n {
			a.free[i] = span{f.at + n, f.n - n}
			if a.free[i].n == 0 {
				a.free = slices.Delete(a.free, i, i+1)
			}
			a.used += n
			return f.at, true
		}
	}
	return 0, false
}

// release gives back rows [at, at+n), merging them with free neighbours.
func (a *rowSpans) release(at, n int) {
	if n <= 0 {
		return
	}
	i, _ := slices.BinarySearchFunc(a.free, at, func(f span, at int) int { return f.at - at })
	if (i > 0 && a.free[i-1].at+a.free[i-1].n > at) || (i < len(a.free) && at+n > a.free[i].at) {
		panic(fmt.Sprintf("model: KV-cache rows [%d, %d) given back twice", at, at+n))
	}
	a.free = slices.Insert(a.free, i, span{at, n})
	if i+1 < len(a.free) && a.free[i].at+a.free[i].n == a.free[i+1].at {
		a.free[i].n += a.free[i+1].n
		a.free = slices.Delete(a.free, i+1, i+2)
	}
	if i > 0 && a.free[i-1].at+a.free[i-1].n == a.free[i].at {
		a.free[i-1].n += a.free[i].n
		a.free = slices.Delete(a.free, i, i+1)
	}
	a.used -= n
}

// rowSlot is a row's run of own rows: its own prompt ids (a one-sample
// request's ids after the beginning it reads from a holder) and then its
// new tokens, from cache row at; held false while the row waits.
type rowSlot struct {
	at, n   int
	own     int // its own prompt ids
	held    bool
	waiting bool // preempted: goes on once a slot is free
}

// slotCache is the state of Generate's growing slots.
type slotCache struct {
	spans    rowSpans
	slot     []rowSlot // by row
	fixed    int       // rows [0, fixed): the held prompts
	limit    int       // the cache's rows
	peak     int       // the most rows in use
	preempts int
}

// newSlotCache lays the rows' first slots as lay (laid out with first
// slots, request-major rows) placed them, packed from the held prompts up,
// and returns the slots, the cache's rows being opts.CacheLimit or
// slotMinimum where that is more.
func newSlotCache(lay *cacheLayout, reqs []Request, opts GenerateOptions) *slotCache {
	sc := &slotCache{}
	sc.fixed = lay.rows
	i := 0
	for _, q := range reqs {
		for range max(q.N, 1) {
			s := lay.row[i]
			own := len(q.Prompt) - s.PN
			first := s.K + s.PN
			sc.fixed = min(sc.fixed, first)
			sc.slot = append(sc.slot, rowSlot{at: first, n: own + firstSlot(opts), own: own, held: true})
			i++
		}
	}
	need := 0 // the most a row's old and new slots hold at once: twice its whole own run
	for _, s := range sc.slot {
		need = max(need, 2*(s.own+opts.MaxTokens))
	}
	sc.limit = max(opts.CacheLimit, lay.rows, sc.fixed+need)
	sc.spans.used = lay.rows - sc.fixed
	sc.spans.free = []span{{lay.rows, sc.limit - lay.rows}}
	if lay.rows == sc.limit {
		sc.spans.free = nil
	}
	sc.peak = lay.rows
	return sc
}

// slotMinimum is the fewest KV-cache rows growing slots can run reqs in:
// every row started (the held prompts, the one-sample requests' own ids, a
// first slot a row), and the row that needs most able to grow to
// MaxTokens beside the held prompts, its old slot and its new one at once
// (so the first row in the order, alone, always fits).
func slotMinimum(reqs []Request, plan sharePlan, opts GenerateOptions) int {
	lay := layoutCache(reqs, plan, opts, firstSlot(opts))
	return newSlotCache(&lay, reqs, GenerateOptions{MaxTokens: opts.MaxTokens, firstSlot: opts.firstSlot}).limit
}

// inUse is the cache rows held now.
func (sc *slotCache) inUse() int { return sc.fixed + sc.spans.used }

// preempt gives back row i's slot; the row waits, its tokens kept, until
// a slot is free for it again.
func (sc *slotCache) preempt(i int) {
	s := &sc.slot[i]
	sc.spans.release(s.at, s.n)
	s.held, s.waiting = false, true
	sc.preempts++
}

// beforeStep readies the slots for the next decoding step: rows that are
// done give theirs back; each running row whose next token falls past its
// slot moves to one with twice the new-token rows (rows copied),
// preempting rows later in the order when no run is free; then waiting
// rows go on, in order, while slots for what they hold are free, their own
// ids and the tokens they wrote prefilled again. lay's row placements
// follow the slots.
func (m *Model) beforeStep(sc *slotCache, lay *cacheLayout, c *kvCache, rows []*genRow, opts GenerateOptions) {
	for i, r := range rows {
		if s := &sc.slot[i]; r.done && s.held {
			sc.spans.release(s.at, s.n)
			s.held = false
		}
	}
	var moves []rowCopy
	var old []span // given back once the copies are made
	last := len(rows) - 1
	for i, r := range rows {
		s := &sc.slot[i]
		if !s.held {
			continue
		}
		need := s.own + len(r.gen.IDs) // the own rows once the step writes its token
		if need <= s.n {
			continue
		}
		n := s.own + SlotRows(need-s.own, opts)
		at, ok := sc.spans.alloc(n)
		for !ok {
			// Preempt the last row in the order that holds a slot; i itself
			// when it is that row.
			for last > i && !sc.slot[last].held {
				last--
			}
			if last == i {
				break
			}
			sc.preempt(last)
			at, ok = sc.spans.alloc(n)
		}
		if !ok {
			sc.preempt(i)
			continue
		}
		moves = append(moves, rowCopy{dst: at, src: s.at, n: need - 1})
		old = append(old, span{s.at, s.n})
		s.at, s.n = at, n
		lay.row[i].K = at - lay.row[i].PN
	}
	sc.peak = max(sc.peak, sc.inUse())
	if len(moves) > 0 {
		for l := range c.k {
			copyRuns(m.be, c.k[l], moves)
			copyRuns(m.be, c.v[l], moves)
		}
	}
	for _, o := range old {
		sc.spans.release(o.at, o.n)
	}
	// Waiting rows go on, first in the order first, while slots for what
	// they hold are free: their own prompt ids and the tokens they wrote
	// are run again in a prefill.
	var again []int
	for i, r := range rows {
		s := &sc.slot[i]
		if !s.waiting {
			continue
		}
		n := s.own + SlotRows(len(r.gen.IDs), opts)
		at, ok := sc.spans.alloc(n)
		if !ok {
			break
		}
		s.at, s.n, s.held, s.waiting = at, n, true, false
		lay.row[i].K = at - lay.row[i].PN
		if s.own+len(r.gen.IDs)-1 > 0 {
			again = append(again, i)
		}
	}
	sc.peak = max(sc.peak, sc.inUse())
	if len(again) > 0 {
		m.prefillOwn(c, lay, rows, again, opts)
	}
}

// prefillOwn writes the keys and values of the given rows' own ids (their
// own prompt ids, then every token they wrote but the last, which the next
// step feeds) into their slots, continuing the beginnings they read from
// the held prompts, in forwards of at most PrefillIDs ids.
func (m *Model) prefillOwn(c *kvCache, lay *cacheLayout, rows []*genRow, which []int, opts GenerateOptions) {
	budget := m.prefillBudget(opts)
	b := &batch{cache: c}
	flush := func() {
		if len(b.ids) > 0 {
			x, _ := m.trunk(b, false)
			m.free(x)
		}
		b = &batch{cache: c}
	}
	for _, i := range which {
		r := rows[i]
		s, written := lay.row[i], r.gen.IDs[:len(r.gen.IDs)-1]
		ids := append(slices.Clone(r.prompt[s.PN:]), written...)
		if len(b.ids) > 0 && len(b.ids)+len(ids) > budget {
			flush()
		}
		s.Q, s.N, s.Past = len(b.ids), len(ids), s.PN
		b.seqs = append(b.seqs, s)
		for t, id := range ids {
			b.ids = append(b.ids, id)
			b.pos = append(b.pos, s.PN+t)
		}
	}
	flush()
}
