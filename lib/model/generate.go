package model

import (
	"fmt"
	"math/rand/v2"
	"strings"
)

// kvCache holds every layer's keys and values (after RoPE) for one
// generation, its rows laid out as the caller places them (cacheLayout);
// maxKeys bounds the keys of any sequence (positions stay below it).
type kvCache struct {
	k, v    []Tensor
	maxKeys int
}

func (m *Model) newCache(rows, maxKeys int) *kvCache {
	c := &kvCache{maxKeys: maxKeys}
	kvd := m.a.kvHeads * m.a.headDim
	for l := 0; l < m.a.layers; l++ {
		c.k = append(c.k, m.be.Zeros(rows, kvd))
		c.v = append(c.v, m.be.Zeros(rows, kvd))
	}
	return c
}

// cacheLayout is where Generate keeps each request's prompt and each row's
// generated tokens in the KV cache, as attention sequences' placements
// (AttnSeq K, P, PN; Q, N and Past are the forward's).
//
// Shared (the default): a prompt is cached once. A request that decodes
// several samples, or that shares no beginning with another, holds its
// whole prompt (a "holder"); each of its rows has a run of MaxTokens rows
// after every prompt and reads the prompt as a shared prefix: a task's G
// samples cache their prompt once. A one-sample request whose prompt
// begins like another's (a trajectory's later turn: the task prompt; the
// prefill plan's source and prefix) reads that beginning where a holder
// keeps it and holds only the rest of its prompt, its new tokens right
// after; where the beginning is not in one holder's run (it continues a
// one-sample request beyond that one's own shared part) it is a holder,
// the beginning copied in. Copied (GenerateOptions.CopyPrompts): each row a
// slot of the longest prompt plus MaxTokens rows, every prompt whole, the
// beginnings and a request's other samples copied in after its prefill.
// The keys are the same numbers in every layout.
type cacheLayout struct {
	req     []AttnSeq   // request r's prompt: its prefill's placement
	copies  [][]rowCopy // rows copied into request r's before its prefill attends
	row     []AttnSeq   // row i's placement for its decoding steps
	rows    int         // the cache's rows
	maxKeys int
}

// CacheRows is the KV-cache rows Generate takes for reqs under opts (its
// MaxTokens, NoSharedPrefixes and CopyPrompts; cacheLayout): with prompts
// shared, at most every prompt once and MaxTokens rows a sample, less where
// a prompt's beginning is read from another's. KVCacheBytes turns it into
// bytes.
func CacheRows(reqs []Request, opts GenerateOptions) int {
	return layoutCache(reqs, prefillPlan(reqs, opts.NoSharedPrefixes), opts, opts.MaxTokens).rows
}

// StartCacheRows is the fewest KV-cache rows Generate can run reqs in when
// opts.CacheLimit makes rows take their new-token rows as they write them
// (kvslots.go): every prompt once as CacheRows counts them, a first slot
// of slotFirst new-token rows a sample, and room for the longest row to
// grow to MaxTokens beside the prompts; at most CacheRows. A call whose
// StartCacheRows is over its CacheLimit still runs, over the limit.
func StartCacheRows(reqs []Request, opts GenerateOptions) int {
	plan := prefillPlan(reqs, opts.NoSharedPrefixes)
	full := layoutCache(reqs, plan, opts, opts.MaxTokens).rows
	if opts.CopyPrompts {
		return full
	}
	return min(full, slotMinimum(reqs, plan, opts))
}

// layoutCache places reqs' prompts and rows (request-major, as Generate's
// rows: a request's N samples, then the next request's) in the cache, given
// the prefill's sharing plan, newRows new-token rows after each row's own
// ids (opts.MaxTokens, or a first slot that grows, kvslots.go; the copied
// layout always takes MaxTokens).
func layoutCache(reqs []Request, plan sharePlan, opts GenerateOptions, newRows int) cacheLayout {
	nrows, longest := 0, 0
	for _, q := range reqs {
		nrows += max(q.N, 1)
		longest = max(longest, len(q.Prompt))
	}
	L := cacheLayout{req: make([]AttnSeq, len(reqs)), copies: make([][]rowCopy, len(reqs)), row: make([]AttnSeq, nrows)}
	L.maxKeys = longest + opts.MaxTokens
	if opts.CopyPrompts {
		i := 0 // row i's slot: rows [i·maxKeys, (i+1)·maxKeys)
		for r, q := range reqs {
			L.req[r] = AttnSeq{K: i * L.maxKeys} // its first row's slot
			i += max(q.N, 1)
		}
		i = 0
		for r, q := range reqs {
			// The beginning it shares first: the samples' copies take it too.
			if c := plan.source[r]; c >= 0 {
				L.copies[r] = append(L.copies[r], rowCopy{dst: L.req[r].K, src: L.req[c].K, n: plan.prefix[r]})
			}
			for s := range max(q.N, 1) {
				L.row[i] = AttnSeq{K: i * L.maxKeys}
				if s > 0 {
					L.copies[r] = append(L.copies[r], rowCopy{dst: L.row[i].K, src: L.req[r].K, n: len(q.Prompt)})
				}
				i++
			}
		}
		L.rows = nrows * L.maxKeys
		return L
	}
	// holder[r]: the holder that keeps request r's shared beginning in one
	// run (r itself when r is a holder); decided in the plan's order, each
	// source before what continues it.
	holder := make([]int, len(reqs))
	for _, r := range plan.order {
		holder[r] = r
		c, pre := plan.source[r], plan.prefix[r]
		if c < 0 || pre == 0 || max(reqs[r].N, 1) > 1 {
			continue
		}
		// c's first pre ids are in one run where c keeps them: in c, a
		// holder; or, within c's own shared beginning, in c's holder.
		if h := holder[c]; h == c || pre <= plan.prefix[c] {
			holder[r] = h
		}
	}
	// Holders' prompts first, then the other requests' own ids and new
	// tokens (their K is below their first own row by their shared part:
	// at least a holder's prompt lies below it), then the holders' rows.
	for r, q := range reqs {
		if holder[r] == r {
			L.req[r] = AttnSeq{K: L.rows}
			L.rows += len(q.Prompt)
		}
	}
	for r, q := range reqs {
		if h := holder[r]; h != r {
			pre := plan.prefix[r]
			L.req[r] = AttnSeq{K: L.rows - pre, P: L.req[h].K, PN: pre}
			L.rows += len(q.Prompt) - pre + newRows
		}
	}
	i := 0
	for r, q := range reqs {
		for range max(q.N, 1) {
			if holder[r] != r {
				L.row[i] = L.req[r] // its new tokens follow its own ids
			} else {
				L.row[i] = AttnSeq{K: L.rows - len(q.Prompt), P: L.req[r].K, PN: len(q.Prompt)}
				L.rows += newRows
			}
			i++
		}
	}
	// A holder that continues another copies that beginning in, from where
	// its ids lie (two runs when the source reads part of it from its own
	// holder).
	for r := range reqs {
		if c := plan.source[r]; c >= 0 && holder[r] == r {
			L.copies[r] = keyRuns(AttnSeq{K: L.req[c].K, P: L.req[c].P, PN: min(L.req[c].PN, plan.prefix[r]), Past: plan.prefix[r]}, L.req[r].K)
		}
	}
	return L
}

// decodeSeq is row's attention sequence (Q left to the caller) for the step
// that feeds its token at position pos.
func (L *cacheLayout) decodeSeq(row, pos int) AttnSeq {
	s := L.row[row]
	s.N, s.Past = 1, pos
	return s
}

func (c *kvCache) free(be Backend) {
	for l := range c.k {
		be.Free(c.k[l])
		be.Free(c.v[l])
	}
}

// Request is one prompt to continue N times (N ≤ 0 means 1). Sample i of a
// request draws its randomness from a generator seeded by (Seed, i) alone, so
// its tokens do not depend on which other rows share the batch.
type Request struct {
	Prompt []int
	N      int
	Seed   uint64
}

// GenerateOptions controls decoding. Temperature 0 (the zero value) is greedy.
type GenerateOptions struct {
	MaxTokens int
	Sampling  SampleParams
	// EOS ids end a row (the EOS token is kept in the output, with its
	// log-prob) unless IgnoreEOS.
	EOS       []int
	IgnoreEOS bool
	// StopIDs end a row when its output ends with one of these id sequences.
	StopIDs [][]int
	// StopStrings end a row when Decode(output) contains one of them; the
	// token that completed the string is kept (no text is cut: the ids stay
	// the exact record of what was sampled).
	StopStrings []string
	Decode      func(ids []int) string
	// OnTokens, when set, is called after every sampling step with the
	// number of tokens just sampled (progress reporting).
	OnTokens func(n int)
	// NoSharedPrefixes prefills every request's prompt from its first id,
	// even where it begins like another's (see Generate).
	NoSharedPrefixes bool
	// CopyPrompts gives every row a KV-cache slot with its own copy of its
	// request's prompt, instead of one copy its samples share
	// (cacheLayout): more memory, the same tokens and log-probs. For
	// comparisons.
	CopyPrompts bool
	// PrefillIDs bounds the ids of one prefill forward (0: the model's
	// ForwardBudget); more prompts take several forwards.
	PrefillIDs int
	// CacheLimit, when > 0 and below the KV-cache rows the call would
	// reserve (CacheRows; not with CopyPrompts, which keeps its slots),
	// bounds the cache at that many rows: rows take their new-token rows
	// as they write them, in slots that grow, and a row that finds none
	// free is preempted and goes on later, what it wrote run again in a
	// prefill (kvslots.go). The limit is raised to StartCacheRows, the
	// least the call runs in, where that is more. What differs from the
	// call without a limit is float rounding only (a resumed row's keys
	// come from a prefill, not from its decoding steps).
	CacheLimit int
	// Report, when set, receives the call's KV-cache figures.
	Report *GenerateReport
	// firstSlot sets the new-token rows of a first slot (0: slotFirst), for
	// tests that need slots to grow within a few tokens.
	firstSlot int
	// OnPrefill, when set, is called once the prompts are prefilled and
	// every row's first token sampled (a point the device has reached), with
	// the ids the prefill ran and the ids of the distinct requests' prompts.
	OnPrefill func(ran, ids int)
}

// GenerateReport is what a Generate call's KV cache took: CacheRows its
// rows, PeakRows the most rows in use at once (CacheRows without a
// CacheLimit that binds) and Preempted the times a row gave back its slot
// to go on later (GenerateOptions.CacheLimit).
type GenerateReport struct {
	CacheRows, PeakRows, Preempted int
}

// Generation is one continuation. LogProbs[i] is log p(IDs[i] | prompt,
// IDs[:i]) under the model at temperature 1 with no filters, the policy the
// RL ratio needs; SampleLogProbs[i] is the log-probability under the
// distribution the token was drawn from (temperature, top-k, top-p applied;
// 0 when greedy). Finish is "eos", "stop" or "length".
type Generation struct {
	Request, Sample int
	IDs             []int
	LogProbs        []float32
	SampleLogProbs  []float32
	Finish          string
}

type genRow struct {
	req, sample, slot, promptLen int
	prompt                       []int
	rng                          *rand.Rand
	gen                          *Generation
	done                         bool
	text                         int // bytes of decoded text already checked for stop strings
}

// Generate continues every request N times, all rows decoded together in one
// batch with a KV cache. Each request's prompt is prefilled once (the prompts
// packed into forwards of at most opts.PrefillIDs ids) and cached once, its
// samples reading it as a shared prefix. A prompt that begins like a longer
// one (a task's trajectories after their first turn share the task's
// prompt; every task shares the system prompt) runs only its own ids and
// continues that prompt's keys and values (planSharing, as LogProbsShared),
// read where they are kept or, where they are not in one run, copied in
// each layer (cacheLayout; CacheRows is the cache's size), unless
// opts.NoSharedPrefixes; what differs is float rounding only. The result has
// one Generation per row, request-major.
func (m *Model) Generate(reqs []Request, opts GenerateOptions) ([]*Generation, error) {
	if opts.MaxTokens < 0 {
		return nil, fmt.Errorf("model: negative max tokens")
	}
	if len(opts.StopStrings) > 0 && opts.Decode == nil {
		return nil, fmt.Errorf("model: stop strings need a Decode function")
	}
	be := m.be
	var rows []*genRow
	for r, q := range reqs {
		if len(q.Prompt) == 0 {
			return nil, fmt.Errorf("model: request %d has an empty prompt", r)
		}
		for t, id := range q.Prompt {
			if id < 0 || id >= m.a.vocab {
				return nil, fmt.Errorf("model: request %d position %d: token id %d outside the vocabulary [0, %d)", r, t, id, m.a.vocab)
			}
		}
		n := max(q.N, 1)
		for s := 0; s < n; s++ {
			rows = append(rows, &genRow{req: r, sample: s, slot: len(rows), promptLen: len(q.Prompt), prompt: q.Prompt,
				rng: rand.New(rand.NewPCG(q.Seed, uint64(s))),
				gen: &Generation{Request: r, Sample: s}})
		}
	}
	out := make([]*Generation, len(rows))
	for i, r := range rows {
		out[i] = r.gen
	}
	if len(rows) == 0 || opts.MaxTokens == 0 {
		for _, r := range rows {
			r.gen.Finish = "length"
		}
		return out, nil
	}
	m.setPhase("prefill")
	plan := prefillPlan(reqs, opts.NoSharedPrefixes)
	lay := layoutCache(reqs, plan, opts, opts.MaxTokens)
	var slots *slotCache // growing slots (kvslots.go), when the reservation is over the limit
	if opts.CacheLimit > 0 && !opts.CopyPrompts && lay.rows > opts.CacheLimit {
		// Unless the least the slots need is the whole reservation anyway.
		grow := layoutCache(reqs, plan, opts, firstSlot(opts))
		if sc := newSlotCache(&grow, reqs, opts); sc.limit < lay.rows {
			lay, slots = grow, sc
		}
	}
	cacheRows := lay.rows
	if slots != nil {
		cacheRows = slots.limit
	}
	cache := m.newCache(cacheRows, lay.maxKeys)
	defer cache.free(be)
	if opts.Report != nil {
		*opts.Report = GenerateReport{CacheRows: cacheRows, PeakRows: lay.rows}
		if slots != nil {
			defer func() { opts.Report.PeakRows, opts.Report.Preempted = slots.peak, slots.preempts }()
		}
	}

	// Prefill: packed forwards of at most budget ids over the distinct
	// prompts, each written to its request's rows; a prompt that continues
	// another (in the same forward or an earlier one) reads that one's first
	// ids where they are kept, or has them copied into its rows, in each
	// layer (cacheLayout).
	budget := m.prefillBudget(opts)
	reqLogits := be.Empty(len(reqs), m.a.vocab)
	ran, promptIDs := 0, 0
	b := &batch{cache: cache}
	var lastRows, chunkReqs []int
	keys := 0 // the key rows the chunk's attention reads (its copied prefixes too)
	flush := func() {
		if len(b.seqs) == 0 {
			return
		}
		lg := m.lastLogits(b, lastRows)
		be.ScatterRows(reqLogits, lg, chunkReqs)
		m.free(lg)
		ran += len(b.ids)
		b, lastRows, chunkReqs, keys = &batch{cache: cache}, nil, nil, 0
	}
	for _, r := range plan.order {
		p, pre := reqs[r].Prompt, plan.prefix[r]
		// A chunk holds at most budget ids run and keyRowsPerID·budget key rows.
		if len(b.ids) > 0 && (len(b.ids)+len(p)-pre > budget || keys+len(p) > keyRowsPerID*budget) {
			flush()
		}
		keys += len(p)
		b.copies = append(b.copies, lay.copies[r]...)
		q := lay.req[r]
		q.Q, q.N, q.Past = len(b.ids), len(p)-pre, pre
		b.seqs = append(b.seqs, q)
		for t := pre; t < len(p); t++ {
			b.ids = append(b.ids, p[t])
			b.pos = append(b.pos, t)
		}
		lastRows = append(lastRows, len(b.ids)-1)
		chunkReqs = append(chunkReqs, r)
		promptIDs += len(p)
	}
	flush()
	// Every row samples its first token from its request's prefill logits.
	rowLogits := be.Zeros(len(rows), m.a.vocab)
	src := make([]int, len(rows))
	for i, r := range rows {
		src[i] = r.req
	}
	be.GatherRows(rowLogits, reqLogits, src)
	m.free(reqLogits)
	m.sampleInto(rows, rowLogits, opts)
	m.free(rowLogits)
	if opts.OnPrefill != nil {
		opts.OnPrefill(ran, promptIDs)
	}
	m.setPhase("decode")
	if opts.OnTokens != nil {
		opts.OnTokens(len(rows))
	}

	var st stepper // the backend's own decoding step, if it has one
	for {
		if slots != nil {
			m.beforeStep(slots, &lay, cache, rows, opts)
		}
		var active []*genRow
		for _, r := range rows {
			if !r.done && (slots == nil || !slots.slot[r.slot].waiting) {
				active = append(active, r)
			}
		}
		if len(active) == 0 {
			break
		}
		// One decoding step: each active row feeds its last token.
		ids, seqs := make([]int, len(active)), make([]AttnSeq, len(active))
		for i, r := range active {
			n := len(r.gen.IDs)
			ids[i], seqs[i] = r.gen.IDs[n-1], lay.decodeSeq(r.slot, r.promptLen+n-1)
			seqs[i].Q = i
		}
		if st == nil {
			// The first step's rows are the most at once: rows that are
			// preempted go on later, rows that end do not come back.
			if st = m.newStepper(cache, len(active)); st != nil {
				defer st.free() // before the cache's free
			}
		}
		if st != nil {
			params, u := drawParams(active, opts)
			m.record(active, st.step(ids, seqs, params, u), opts)
		} else {
			logits := m.stepLogits(cache, ids, seqs)
			m.sampleInto(active, logits, opts)
			m.free(logits)
		}
		if opts.OnTokens != nil {
			opts.OnTokens(len(active))
		}
	}
	return out, nil
}

// prefillBudget is the most ids of one prefill forward: opts.PrefillIDs, or
// the model's ForwardBudget (what the memory free now holds).
func (m *Model) prefillBudget(opts GenerateOptions) int {
	if opts.PrefillIDs > 0 {
		return opts.PrefillIDs
	}
	return m.ForwardBudget()
}

// stepLogits runs one decoding step op by op: row i feeds ids[i] at
// position seqs[i].Past over the cache as seqs[i] places it; the logits of
// every row.
func (m *Model) stepLogits(c *kvCache, ids []int, seqs []AttnSeq) Tensor {
	b := &batch{cache: c, ids: ids, seqs: seqs}
	all := make([]int, len(ids))
	for i, s := range seqs {
		b.pos = append(b.pos, s.Past)
		all[i] = i
	}
	return m.lastLogits(b, all)
}

// prefillPlan is how Generate prefills the requests' prompts: planSharing
// with every prompt's last id run (its logits give the first token), or every
// prompt whole.
func prefillPlan(reqs []Request, unshared bool) sharePlan {
	prompts, from := make([][]int, len(reqs)), make([]int, len(reqs))
	for r, q := range reqs {
		prompts[r], from[r] = q.Prompt, len(q.Prompt)
	}
	if !unshared {
		return planSharing(prompts, from)
	}
	p := sharePlan{source: make([]int, len(reqs)), prefix: make([]int, len(reqs)), order: make([]int, len(reqs))}
	for r := range reqs {
		p.source[r], p.order[r] = -1, r
	}
	return p
}

// lastLogits runs the layers over b and returns the logits of the given rows.
func (m *Model) lastLogits(b *batch, rows []int) Tensor {
	x, _ := m.trunk(b, false)
	if len(rows) != x.Rows() {
		sel := m.be.Zeros(len(rows), m.a.hidden)
		m.be.GatherRows(sel, x, rows)
		m.free(x)
		x = sel
	}
	logits, xn, rstd := m.head(x)
	m.free(x, xn, rstd)
	return logits
}

// sampleInto draws the next token of each row from its row of logits and
// marks rows that are finished.
func (m *Model) sampleInto(rows []*genRow, logits Tensor, opts GenerateOptions) {
	params, u := drawParams(rows, opts)
	m.record(rows, m.be.Sample(logits, params, u), opts)
}

// drawParams is each row's sampling parameters and its next uniform number.
func drawParams(rows []*genRow, opts GenerateOptions) ([]SampleParams, []float64) {
	params := make([]SampleParams, len(rows))
	u := make([]float64, len(rows))
	for i, r := range rows {
		params[i] = opts.Sampling
		u[i] = r.rng.Float64() // drawn even when greedy, so the stream is the same either way
	}
	return params, u
}

// record appends each row's drawn token and marks rows that are finished.
func (m *Model) record(rows []*genRow, got []Sampled, opts GenerateOptions) {
	for i, r := range rows {
		g := r.gen
		g.IDs = append(g.IDs, got[i].ID)
		g.LogProbs = append(g.LogProbs, got[i].LogProb)
		g.SampleLogProbs = append(g.SampleLogProbs, got[i].SampleLogProb)
		switch {
		case !opts.IgnoreEOS && containsInt(opts.EOS, got[i].ID):
			g.Finish = "eos"
		case endsWithAny(g.IDs, opts.StopIDs):
			g.Finish = "stop"
		case len(opts.StopStrings) > 0 && r.stopText(opts):
			g.Finish = "stop"
		case len(g.IDs) >= opts.MaxTokens:
			g.Finish = "length"
		default:
			continue
		}
		r.done = true
	}
}

// stopText decodes the output and looks for a stop string in the part that
// could contain a new occurrence.
func (r *genRow) stopText(opts GenerateOptions) bool {
	text := opts.Decode(r.gen.IDs)
	longest := 0
	for _, s := range opts.StopStrings {
		longest = max(longest, len(s))
	}
	from := max(0, min(r.text, len(text))-longest)
	r.text = len(text)
	for _, s := range opts.StopStrings {
		if s != "" && strings.Contains(text[from:], s) {
			return true
		}
	}
	return false
}

func containsInt(xs []int, x int) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

func endsWithAny(ids []int, stops [][]int) bool {
	for _, s := range stops {
		if len(s) == 0 || len(s) > len(ids) {
			continue
		}
		tail := ids[len(ids)-len(s):]
		match := true
		for i := range s {
			if tail[i] != s[i] {
				match = false
				break
			}
		}
		if match {
			return true
		}
	}
	return false
}
