// Package model is the Qwen2-family decoder (Qwen2, Qwen2.5, Qwen3 dense) that
// MemPO trains: forward to logits and token log-probs over packed batches of
// sequences of different lengths, backward of a weighted sum of token
// log-probs to every parameter (optionally recomputing each layer's
// activations), and batched KV-cache generation with seeded sampling.
//
// The model is written once over the Backend interface (backend.go); CPU
// (cpu.go) is the OpenBLAS implementation. Parameters and gradients are
// exchanged by Hugging Face name as flat float32 slices, so the update stage
// can run AdamW per parameter and write a checkpoint with checkpoint.Save.
package model

import (
	"fmt"
	"math"
	"slices"

	"github.com/mempo/mempo/lib/checkpoint"
)

// arch is the shape of the network, taken from checkpoint.Config.
type arch struct {
	vocab, hidden, inter, layers, heads, kvHeads, headDim int
	theta                                                 float64
	eps                                                   float32
	tied, qkvBias, oBias, qkNorm                          bool
}

func (a *arch) validate() error {
	switch {
	case a.vocab <= 0 || a.hidden <= 0 || a.inter <= 0 || a.layers <= 0 || a.heads <= 0 || a.kvHeads <= 0 || a.headDim <= 0:
		return fmt.Errorf("model: non-positive size in config (vocab %d, hidden %d, intermediate %d, layers %d, heads %d, kv heads %d, head dim %d)",
			a.vocab, a.hidden, a.inter, a.layers, a.heads, a.kvHeads, a.headDim)
	case a.heads%a.kvHeads != 0:
		return fmt.Errorf("model: %d attention heads not a multiple of %d kv heads", a.heads, a.kvHeads)
	case a.headDim%2 != 0:
		return fmt.Errorf("model: odd head dim %d (RoPE needs pairs)", a.headDim)
	}
	return nil
}

// paramSpec lists every parameter with its Hugging Face name and its shape as
// a matrix (vectors are 1×n), in model order.
func (a *arch) paramSpecs() []paramSpec {
	H, I, V, hd := a.hidden, a.inter, a.vocab, a.headDim
	q, kv := a.heads*hd, a.kvHeads*hd
	out := []paramSpec{{"model.embed_tokens.weight", V, H}}
	for l := 0; l < a.layers; l++ {
		p := fmt.Sprintf("model.layers.%d.", l)
		add := func(name string, r, c int) { out = append(out, paramSpec{p + name, r, c}) }
		add("input_layernorm.weight", 1, H)
		add("self_attn.q_proj.weight", q, H)
		add("self_attn.k_proj.weight", kv, H)
		add("self_attn.v_proj.weight", kv, H)
		if a.qkvBias {
			add("self_attn.q_proj.bias", 1, q)
			add("self_attn.k_proj.bias", 1, kv)
			add("self_attn.v_proj.bias", 1, kv)
		}
		add("self_attn.o_proj.weight", H, q)
		if a.oBias {
			add("self_attn.o_proj.bias", 1, H)
		}
		if a.qkNorm {
			add("self_attn.q_norm.weight", 1, hd)
			add("self_attn.k_norm.weight", 1, hd)
		}
		add("post_attention_layernorm.weight", 1, H)
		add("mlp.gate_proj.weight", I, H)
		add("mlp.up_proj.weight", I, H)
		add("mlp.down_proj.weight", H, I)
	}
	out = append(out, paramSpec{"model.norm.weight", 1, H})
	if !a.tied {
		out = append(out, paramSpec{"lm_head.weight", V, H})
	}
	return out
}

type paramSpec struct {
	name       string
	rows, cols int
}

// layerW holds one layer's parameters (or their gradients): nil for absent
// biases and norms.
type layerW struct {
	inNorm, wq, wk, wv, bq, bk, bv, wo, bo, qNorm, kNorm, postNorm, wg, wu, wd Tensor
}

// weights is every parameter (or gradient) of the model.
type weights struct {
	embed, norm, head Tensor // head == embed when tied
	layers            []layerW
	byName            map[string]Tensor
}

func (a *arch) bind(byName map[string]Tensor) *weights {
	w := &weights{byName: byName, layers: make([]layerW, a.layers)}
	w.embed = byName["model.embed_tokens.weight"]
	w.norm = byName["model.norm.weight"]
	w.head = w.embed
	if !a.tied {
		w.head = byName["lm_head.weight"]
	}
	for l := range w.layers {
		p := fmt.Sprintf("model.layers.%d.", l)
		g := func(n string) Tensor { return byName[p+n] }
		w.layers[l] = layerW{
			inNorm: g("input_layernorm.weight"), postNorm: g("post_attention_layernorm.weight"),
			wq: g("self_attn.q_proj.weight"), wk: g("self_attn.k_proj.weight"), wv: g("self_attn.v_proj.weight"),
			bq: g("self_attn.q_proj.bias"), bk: g("self_attn.k_proj.bias"), bv: g("self_attn.v_proj.bias"),
			wo: g("self_attn.o_proj.weight"), bo: g("self_attn.o_proj.bias"),
			qNorm: g("self_attn.q_norm.weight"), kNorm: g("self_attn.k_norm.weight"),
			wg: g("mlp.gate_proj.weight"), wu: g("mlp.up_proj.weight"), wd: g("mlp.down_proj.weight"),
		}
	}
	return w
}

// Model is a Qwen2-family decoder on one backend. It is not safe for
// concurrent use: one forward, backward or generation at a time.
type Model struct {
	a      arch
	cfg    *checkpoint.Config
	be     Backend
	specs  []paramSpec
	params *weights
	grads  *weights // nil until the first backward

	// Recompute makes the training forward keep only each layer's input
	// and recompute the layer's activations during the backward: memory
	// of one layer instead of all, for about a third more compute.
	Recompute bool

	headRows int // rows per LM-head chunk; 0: by vocabulary size (tests set it)

	lora   *loraState // the attached adapter (lora.go), or nil
	frozen bool       // no gradients into the base weights (FreezeBase)

	// DropoutSeed seeds the adapter's dropout masks of the next Backward
	// (lora.go): the update sets it per micro-batch.
	DropoutSeed uint64
}

// frozenStore is a backend that can keep a weight that is never written
// again, and read only by MatMul, in a compact form (CUDA in bf16 mode: the
// bf16 rounding alone).
type frozenStore interface {
	FromHostFrozen(data []float32, rows, cols int) Tensor
}

func newModel(a arch, be Backend, tensors map[string][]float32, frozen bool) (*Model, error) {
	if err := a.validate(); err != nil {
		return nil, err
	}
	m := &Model{a: a, be: be, specs: a.paramSpecs(), frozen: frozen}
	fs, compact := be.(frozenStore)
	byName := map[string]Tensor{}
	for _, s := range m.specs {
		data, ok := tensors[s.name]
		if !ok {
			return nil, fmt.Errorf("model: missing parameter %s", s.name)
		}
		if len(data) != s.rows*s.cols {
			return nil, fmt.Errorf("model: parameter %s has %d values, want %d×%d", s.name, len(data), s.rows, s.cols)
		}
		// The embedding table is gathered from, not multiplied: it keeps
		// its fp32 values.
		if frozen && compact && s.rows > 1 && s.cols > 1 && s.name != "model.embed_tokens.weight" {
			byName[s.name] = fs.FromHostFrozen(data, s.rows, s.cols)
			continue
		}
		byName[s.name] = be.FromHost(data, s.rows, s.cols)
	}
	for name := range tensors {
		if _, ok := byName[name]; !ok {
			if name == "lm_head.weight" && a.tied {
				continue // some tied checkpoints store the copy anyway
			}
			return nil, fmt.Errorf("model: unexpected parameter %s", name)
		}
	}
	m.params = a.bind(byName)
	if wm, ok := be.(interface{ MarkWeight(Tensor) }); ok {
		for _, s := range m.specs {
			if s.rows > 1 && s.cols > 1 { // matrices: the GEMM operands
				wm.MarkWeight(byName[s.name])
			}
		}
	}
	return m, nil
}

// Backend is the backend the model's tensors live on.
func (m *Model) Backend() Backend { return m.be }

// VocabSize is the number of token ids the model scores.
func (m *Model) VocabSize() int { return m.a.vocab }

// ParamNames lists the parameters by Hugging Face name, in model order (tied
// models have no lm_head.weight: the embedding serves both).
func (m *Model) ParamNames() []string {
	out := make([]string, len(m.specs))
	for i, s := range m.specs {
		out[i] = s.name
	}
	return out
}

// ParamShape is the Hugging Face shape of a parameter ([n] for vectors).
func (m *Model) ParamShape(name string) []int {
	if m.lora != nil {
		if s, ok := m.lora.shapes[name]; ok {
			return []int{s[0], s[1]}
		}
	}
	for _, s := range m.specs {
		if s.name == name {
			if s.rows == 1 {
				return []int{s.cols}
			}
			return []int{s.rows, s.cols}
		}
	}
	return nil
}

// Param copies a parameter to host memory.
func (m *Model) Param(name string) []float32 {
	t := m.ParamTensor(name)
	if t == nil {
		return nil
	}
	return m.be.ToHost(t, nil)
}

// SetParam replaces a parameter's values (after an optimizer step).
func (m *Model) SetParam(name string, data []float32) error {
	t := m.ParamTensor(name)
	if t == nil {
		return fmt.Errorf("model: no parameter %s", name)
	}
	if len(data) != t.Rows()*t.Cols() {
		return fmt.Errorf("model: parameter %s has %d values, got %d", name, t.Rows()*t.Cols(), len(data))
	}
	src := m.be.FromHost(data, t.Rows(), t.Cols())
	m.be.Copy(t, src)
	m.be.Free(src)
	return nil
}

// Params copies every parameter to host memory, by Hugging Face name: the
// map checkpoint.Save takes.
func (m *Model) Params() map[string][]float32 {
	out := map[string][]float32{}
	for _, s := range m.specs {
		out[s.name] = m.Param(s.name)
	}
	return out
}

// Grads copies the accumulated gradients to host memory by Hugging Face name
// (zeros before any backward). For tied models the embedding's gradient holds
// both its uses.
func (m *Model) Grads() map[string][]float32 {
	m.ensureGrads()
	out := map[string][]float32{}
	for _, name := range m.TrainableNames() {
		out[name] = m.be.ToHost(m.GradTensor(name), nil)
	}
	return out
}

// ParamTensor is the backend tensor of a parameter (nil if there is none),
// for optimizers that run on the backend's device.
func (m *Model) ParamTensor(name string) Tensor {
	if t := m.loraTensor(name, false); t != nil {
		return t
	}
	return m.params.byName[name]
}

// GradTensor is the backend tensor that accumulates a parameter's gradient.
func (m *Model) GradTensor(name string) Tensor {
	if t := m.loraTensor(name, true); t != nil {
		return t
	}
	m.ensureGrads()
	return m.grads.byName[name]
}

// ZeroGrads resets the accumulated gradients.
func (m *Model) ZeroGrads() {
	if m.grads == nil {
		return
	}
	for _, t := range m.grads.byName {
		m.be.Fill(t, 0)
	}
	if m.lora != nil {
		for _, t := range m.lora.gradBy {
			m.be.Fill(t, 0)
		}
	}
}

// ensureGrads allocates the gradients: of every parameter, or with a frozen
// base of the vectors only (the backward's norm and bias gradients land
// there unread; the matrices, nil, get no weight-gradient products), and of
// the adapter's factors.
func (m *Model) ensureGrads() {
	if m.grads == nil {
		byName := map[string]Tensor{}
		for _, s := range m.specs {
			if m.frozen && s.rows > 1 && s.cols > 1 {
				continue
			}
			byName[s.name] = m.be.Zeros(s.rows, s.cols)
		}
		m.grads = m.a.bind(byName)
	}
	m.ensureLoRAGrads()
}

// wgrad accumulates a weight gradient dW += dyᵀ·x unless the weight is
// frozen (dW nil).
func (m *Model) wgrad(dW, dy, x Tensor) {
	if dW != nil {
		m.be.MatMul(dW, dy, x, true, false, 1, 1)
	}
}

func (m *Model) attnShape() AttnShape {
	return AttnShape{Heads: m.a.heads, KVHeads: m.a.kvHeads, HeadDim: m.a.headDim,
		Scale: float32(1 / math.Sqrt(float64(m.a.headDim)))}
}

// batch is one forward's input: tokens packed back to back, their positions,
// and where each sequence's queries and keys are.
type batch struct {
	ids, pos []int
	seqs     []AttnSeq
	cache    *kvCache  // nil: attend within the packed k, v (training)
	copies   []rowCopy // cache rows each layer copies before attending (shared prefixes, shared.go)
	train    bool      // the training forward of Backward (adapter dropout on)

	cacheRowsDone bool
	cacheRowsMap  []int
	runs          []rowCopy // b.copies resolved (copyRuns)
}

// copyRuns is b.copies resolved (resolveCopies), computed once per batch.
func (b *batch) copyRuns() []rowCopy {
	if b.runs == nil {
		b.runs = resolveCopies(b.copies)
	}
	return b.runs
}

// resolveCopies turns a forward's copies, which run in order (a copy may
// read rows an earlier copy wrote, never rows a later one writes; no row is
// written twice), into runs of rows whose sources no copy writes: the runs
// can then move in any order, all in one launch. Each copy's source is
// split where it crosses an earlier copy's destination and read through
// that copy's own runs.
func resolveCopies(copies []rowCopy) []rowCopy {
	copies = slices.DeleteFunc(slices.Clone(copies), func(c rowCopy) bool { return c.n <= 0 })
	byDst := make([]int, len(copies))
	for i := range byDst {
		byDst[i] = i
	}
	slices.SortFunc(byDst, func(a, b int) int { return copies[a].dst - copies[b].dst })
	for k := 1; k < len(byDst); k++ {
		if p, c := copies[byDst[k-1]], copies[byDst[k]]; p.dst+p.n > c.dst {
			panic(fmt.Sprintf("model: KV-cache rows [%d, %d) are copied to twice", c.dst, min(c.dst+c.n, p.dst+p.n)))
		}
	}
	pieces := make([][]rowCopy, len(copies))
	var out []rowCopy
	emit := func(r rowCopy, i int) {
		if r.n <= 0 {
			return
		}
		pieces[i] = append(pieces[i], r)
		if l := len(out) - 1; l >= 0 && out[l].dst+out[l].n == r.dst && out[l].src+out[l].n == r.src {
			out[l].n += r.n
			return
		}
		out = append(out, r)
	}
	for i, c := range copies {
		at, end := c.src, c.src+c.n
		for at < end {
			// The first destination that ends after at.
			k, _ := slices.BinarySearchFunc(byDst, at, func(j, row int) int {
				if copies[j].dst+copies[j].n <= row {
					return -1
				}
				return 1
			})
			if k == len(byDst) || copies[byDst[k]].dst >= end {
				emit(rowCopy{dst: c.dst + at - c.src, src: at, n: end - at}, i)
				break
			}
			j := byDst[k]
			d := copies[j]
			if d.dst > at {
				emit(rowCopy{dst: c.dst + at - c.src, src: at, n: d.dst - at}, i)
				at = d.dst
			}
			if j >= i {
				panic(fmt.Sprintf("model: a KV-cache copy reads rows [%d, %d) that copy %d writes after it", at, min(end, d.dst+d.n), j))
			}
			stop := min(end, d.dst+d.n)
			for _, p := range pieces[j] {
				if lo, hi := max(at, p.dst), min(stop, p.dst+p.n); lo < hi {
					emit(rowCopy{dst: c.dst + lo - c.src, src: p.src + lo - p.dst, n: hi - lo}, i)
				}
			}
			at = stop
		}
	}
	return out
}

// runCopier is a backend that moves runs of rows within a tensor in one
// launch (CUDA); the others copy run by run.
type runCopier interface {
	CopyRuns(t Tensor, runs []rowCopy)
}

// copyRuns moves resolved runs of rows within t.
func copyRuns(be Backend, t Tensor, runs []rowCopy) {
	if rc, ok := be.(runCopier); ok {
		rc.CopyRuns(t, runs)
		return
	}
	for _, r := range runs {
		be.Copy(be.View(t, r.dst, r.n), be.View(t, r.src, r.n))
	}
}

// cacheRows maps each of the batch's R rows to its KV-cache row (one
// ScatterRows per layer instead of a copy per sequence), computed once per
// batch; nil when the sequences do not cover every row exactly once.
func (b *batch) cacheRows(R int) []int {
	if b.cacheRowsDone {
		return b.cacheRowsMap
	}
	b.cacheRowsDone = true
	rows := make([]int, R)
	for i := range rows {
		rows[i] = -1
	}
	for _, s := range b.seqs {
		for j := 0; j < s.N; j++ {
			if rows[s.Q+j] != -1 {
				return nil
			}
			rows[s.Q+j] = s.K + s.Past + j
		}
	}
	for _, r := range rows {
		if r < 0 {
			return nil
		}
	}
	b.cacheRowsMap = rows
	return rows
}

// productOnly tells a backend that can use it (CUDA in bf16 mode) that t is
// about to be written and will then only be read by MatMul, SwiGLU and
// SwiGLUBackward (the CUDA backend's ProductOnly).
func (m *Model) productOnly(t Tensor) {
	if p, ok := m.be.(interface{ ProductOnly(Tensor) }); ok {
		p.ProductOnly(t)
	}
}

// acts are one layer's activations, kept for the backward.
type acts struct {
	x, xn1, rstd1       Tensor
	qPre, kPre          Tensor // q, k before the per-head norm (QKNorm only)
	rstdQ, rstdK        Tensor
	q, k, v, att, lse   Tensor
	h, xn2, rstd2       Tensor
	gate, up, act, outp Tensor
	lora                [nTargets]loraActs // the adapter's, by target (lora.go)
}

func (m *Model) free(ts ...Tensor) {
	for _, t := range ts {
		if t != nil {
			m.be.Free(t)
		}
	}
}

func (a *acts) release(m *Model, keepInput bool) {
	m.free(a.xn1, a.rstd1, a.qPre, a.kPre, a.rstdQ, a.rstdK, a.q, a.k, a.v, a.att, a.lse, a.h, a.xn2, a.rstd2, a.gate, a.up, a.act)
	for t := range a.lora {
		a.lora[t].release(m)
	}
	if !keepInput {
		m.free(a.x)
	}
}

// layerForward runs layer l on x (rows of the batch) and returns its
// activations. With res (the layer before's a.h), x still lacks that
// residual: the layer's first norm adds it into x. a.outp + a.h is the
// layer's output; the caller adds a.h (trunk: the next layer's norm does).
func (m *Model) layerForward(l int, x, res Tensor, b *batch) *acts {
	be, A, W := m.be, &m.a, &m.params.layers[l]
	R, H := x.Rows(), A.hidden
	qd, kvd := A.heads*A.headDim, A.kvHeads*A.headDim
	a := &acts{x: x}
	a.xn1, a.rstd1 = be.Empty(R, H), be.Empty(R, 1)
	// The normed inputs of the projections are read by products only (the
	// norms' backward reads x and rstd), unless an adapter's dropout reads
	// them.
	if !m.needsF32Input(tQ) && !m.needsF32Input(tK) && !m.needsF32Input(tV) {
		m.productOnly(a.xn1)
	}
	m.addNorm(a.xn1, a.rstd1, x, res, W.inNorm)
	// q's and k's biases go in with RoPE (biasRoPE) where nothing reads q
	// and k between the two: no adapter on them, no per-head norm.
	qBias, kBias := W.bq, W.bk
	if A.qkNorm || m.loraOn(l, tQ) != nil {
		qBias = nil
	}
	if A.qkNorm || m.loraOn(l, tK) != nil {
		kBias = nil
	}
	proj := func(w, bias, ropeBias Tensor, cols, target int) Tensor {
		t := be.Empty(R, cols)
		be.MatMul(t, a.xn1, w, false, true, 1, 0)
		if bias != nil && ropeBias == nil {
			be.AddBias(t, bias)
		}
		m.loraForward(l, target, a.xn1, t, a, b)
		return t
	}
	a.q, a.k, a.v = proj(W.wq, W.bq, qBias, qd, tQ), proj(W.wk, W.bk, kBias, kvd, tK), proj(W.wv, W.bv, nil, kvd, tV)
	if A.qkNorm {
		// Qwen3 normalizes each head's q and k over head_dim before RoPE.
		a.qPre, a.kPre = a.q, a.k
		a.q, a.k = be.Empty(R, qd), be.Empty(R, kvd)
		a.rstdQ, a.rstdK = be.Empty(R*A.heads, 1), be.Empty(R*A.kvHeads, 1)
		be.RMSNorm(a.q, a.rstdQ, a.qPre, W.qNorm, A.eps)
		be.RMSNorm(a.k, a.rstdK, a.kPre, W.kNorm, A.eps)
	}
	m.biasRoPE(a.q, qBias, b.pos)
	m.biasRoPE(a.k, kBias, b.pos)
	keys, vals := a.k, a.v
	if b.cache != nil {
		// Append this batch's keys and values to each sequence's cache
		// slot, then attend over the slot.
		if rows := b.cacheRows(R); rows != nil {
			be.ScatterRows(b.cache.k[l], a.k, rows)
			be.ScatterRows(b.cache.v[l], a.v, rows)
		} else {
			for _, s := range b.seqs {
				be.Copy(be.View(b.cache.k[l], s.K+s.Past, s.N), be.View(a.k, s.Q, s.N))
				be.Copy(be.View(b.cache.v[l], s.K+s.Past, s.N), be.View(a.v, s.Q, s.N))
			}
		}
		if len(b.copies) > 0 {
			runs := b.copyRuns()
			copyRuns(be, b.cache.k[l], runs)
			copyRuns(be, b.cache.v[l], runs)
		}
		keys, vals = b.cache.k[l], b.cache.v[l]
	}
	a.att, a.lse = be.Zeros(R, qd), be.Zeros(R, A.heads)
	be.Attention(a.att, a.lse, a.q, keys, vals, b.seqs, m.attnShape())
	a.h = be.Empty(R, H)
	be.MatMul(a.h, a.att, W.wo, false, true, 1, 0)
	if W.bo != nil {
		be.AddBias(a.h, W.bo)
	}
	m.loraForward(l, tO, a.att, a.h, a, b)
	a.xn2, a.rstd2 = be.Empty(R, H), be.Empty(R, 1)
	if !m.needsF32Input(tGate) && !m.needsF32Input(tUp) {
		m.productOnly(a.xn2)
	}
	m.addNorm(a.xn2, a.rstd2, a.h, x, W.postNorm) // h = attention's output + x
	a.gate, a.up, a.act = be.Empty(R, A.inter), be.Empty(R, A.inter), be.Empty(R, A.inter)
	// In a pass that trains, gate and up are written by products (an
	// adapter's too) and read by SwiGLU and its backward only: bf16 is
	// enough for the gradient. Passes that score keep them in fp32, as the
	// decoding step does, so that generation, scoring and the loss's
	// log-probs agree as before (bf16 there flips near-tied tokens between
	// the two decoding paths).
	if b.train {
		m.productOnly(a.gate)
		m.productOnly(a.up)
	}
	be.MatMul(a.gate, a.xn2, W.wg, false, true, 1, 0)
	m.loraForward(l, tGate, a.xn2, a.gate, a, b)
	be.MatMul(a.up, a.xn2, W.wu, false, true, 1, 0)
	m.loraForward(l, tUp, a.xn2, a.up, a, b)
	if !m.needsF32Input(tDown) {
		m.productOnly(a.act) // read by the down projection and its weight gradient only
	}
	be.SwiGLU(a.act, a.gate, a.up)
	a.outp = be.Empty(R, H)
	be.MatMul(a.outp, a.act, W.wd, false, true, 1, 0)
	m.loraForward(l, tDown, a.act, a.outp, a, b)
	return a
}

// fusedOps are the launches a backend may offer for pairs of ops the
// forward and backward run back to back (the CUDA backend does), each with
// the same bits as the two ops; the model takes the two ops where it lacks
// them.
type fusedOps interface {
	// AddRMSNorm is Add(x, d) then RMSNorm(out, rstd, x, w, eps).
	AddRMSNorm(out, rstd, x, d, w Tensor, eps float32)
	// BiasRoPE is AddBias(x, bias) then RoPE(x, pos, headDim, theta, false).
	BiasRoPE(x, bias Tensor, pos []int, headDim int, theta float64)
	// RMSNormBackwardAdd is RMSNormBackward(dx, dw, dy, x, w, rstd) then
	// Add(dx, res).
	RMSNormBackwardAdd(dx, dw, dy, x, w, rstd, res Tensor)
	// AttentionBackwardRoPE is AttentionBackward, then RoPE(dq, pos,
	// headDim, theta, true) and the same on dk.
	AttentionBackwardRoPE(dq, dk, dv, dout, q, k, v, out, lse Tensor, seqs []AttnSeq, sh AttnShape, pos []int, theta float64)
}

// attentionBackwardRoPE is AttentionBackward, then RoPE's backward (the
// rotation by the opposite angle) on dq and dk.
func (m *Model) attentionBackwardRoPE(dq, dk, dv, dout Tensor, a *acts, b *batch) {
	if f, ok := m.be.(fusedOps); ok {
		f.AttentionBackwardRoPE(dq, dk, dv, dout, a.q, a.k, a.v, a.att, a.lse, b.seqs, m.attnShape(), b.pos, m.a.theta)
		return
	}
	m.be.AttentionBackward(dq, dk, dv, dout, a.q, a.k, a.v, a.att, a.lse, b.seqs, m.attnShape())
	m.be.RoPE(dq, b.pos, m.a.headDim, m.a.theta, true)
	m.be.RoPE(dk, b.pos, m.a.headDim, m.a.theta, true)
}

// biasRoPE is AddBias(x, bias) (when bias ≠ nil) then RoPE(x).
func (m *Model) biasRoPE(x, bias Tensor, pos []int) {
	if bias != nil {
		if f, ok := m.be.(fusedOps); ok {
			f.BiasRoPE(x, bias, pos, m.a.headDim, m.a.theta)
			return
		}
		m.be.AddBias(x, bias)
	}
	m.be.RoPE(x, pos, m.a.headDim, m.a.theta, false)
}

// normBackwardAdd is RMSNormBackward(dx, dw, dy, x, w, rstd) then
// Add(dx, res).
func (m *Model) normBackwardAdd(dx, dw, dy, x, w, rstd, res Tensor) {
	if f, ok := m.be.(fusedOps); ok {
		f.RMSNormBackwardAdd(dx, dw, dy, x, w, rstd, res)
		return
	}
	m.be.RMSNormBackward(dx, dw, dy, x, w, rstd)
	m.be.Add(dx, res)
}

// addNorm is x += d (when d ≠ nil), then out = RMSNorm(x)·w with rstd.
func (m *Model) addNorm(out, rstd, x, d, w Tensor) {
	if d != nil {
		if f, ok := m.be.(fusedOps); ok {
			f.AddRMSNorm(out, rstd, x, d, w, m.a.eps)
			return
		}
		m.be.Add(x, d)
	}
	m.be.RMSNorm(out, rstd, x, w, m.a.eps)
}

// layerBackward takes dy = dL/d(layer output), accumulates the layer's
// weight gradients and returns dL/d(layer input).
func (m *Model) layerBackward(l int, dy Tensor, a *acts, b *batch) Tensor {
	be, A, W, G := m.be, &m.a, &m.params.layers[l], &m.grads.layers[l]
	R, H := dy.Rows(), A.hidden
	qd, kvd := A.heads*A.headDim, A.kvHeads*A.headDim

	// MLP: out = h + down(silu(gate)·up), gate/up = xn2·Wᵀ.
	dact := be.Empty(R, A.inter)
	if !m.needsF32Input(tDown) {
		m.productOnly(dact) // written by products, read by SwiGLUBackward (the dropout's backward adds into it with Add)
	}
	be.MatMul(dact, dy, W.wd, false, false, 1, 0)
	m.wgrad(G.wd, dy, a.act)
	m.loraBackward(l, tDown, dy, a.act, dact, a)
	dgate, dup := be.Empty(R, A.inter), be.Empty(R, A.inter)
	m.productOnly(dgate)
	m.productOnly(dup)
	be.SwiGLUBackward(dgate, dup, dact, a.gate, a.up)
	m.free(dact)
	dxn2 := be.Empty(R, H)
	be.MatMul(dxn2, dgate, W.wg, false, false, 1, 0)
	be.MatMul(dxn2, dup, W.wu, false, false, 1, 1)
	m.wgrad(G.wg, dgate, a.xn2)
	m.wgrad(G.wu, dup, a.xn2)
	m.loraBackward(l, tGate, dgate, a.xn2, dxn2, a)
	m.loraBackward(l, tUp, dup, a.xn2, dxn2, a)
	m.free(dgate, dup)
	dh := be.Empty(R, H)
	m.normBackwardAdd(dh, G.postNorm, dxn2, a.h, W.postNorm, a.rstd2, dy) // + dy: the residual path
	m.free(dxn2)

	// Attention: h = x + o_proj(attn(rope(q), rope(k), v)).
	if G.bo != nil {
		be.SumRows(G.bo, dh)
	}
	datt := be.Empty(R, qd)
	be.MatMul(datt, dh, W.wo, false, false, 1, 0)
	m.wgrad(G.wo, dh, a.att)
	m.loraBackward(l, tO, dh, a.att, datt, a)
	dq, dk, dv := be.Zeros(R, qd), be.Zeros(R, kvd), be.Zeros(R, kvd)
	// RoPE is a rotation: its backward is the rotation by the opposite angle.
	m.attentionBackwardRoPE(dq, dk, dv, datt, a, b)
	m.free(datt)
	if A.qkNorm {
		be.RMSNormBackward(dq, G.qNorm, dq, a.qPre, W.qNorm, a.rstdQ)
		be.RMSNormBackward(dk, G.kNorm, dk, a.kPre, W.kNorm, a.rstdK)
	}
	if G.bq != nil {
		be.SumRows(G.bq, dq)
		be.SumRows(G.bk, dk)
		be.SumRows(G.bv, dv)
	}
	dxn1 := be.Empty(R, H)
	be.MatMul(dxn1, dq, W.wq, false, false, 1, 0)
	be.MatMul(dxn1, dk, W.wk, false, false, 1, 1)
	be.MatMul(dxn1, dv, W.wv, false, false, 1, 1)
	m.wgrad(G.wq, dq, a.xn1)
	m.wgrad(G.wk, dk, a.xn1)
	m.wgrad(G.wv, dv, a.xn1)
	m.loraBackward(l, tQ, dq, a.xn1, dxn1, a)
	m.loraBackward(l, tK, dk, a.xn1, dxn1, a)
	m.loraBackward(l, tV, dv, a.xn1, dxn1, a)
	m.free(dq, dk, dv)
	dx := be.Empty(R, H)
	m.normBackwardAdd(dx, G.inNorm, dxn1, a.x, W.inNorm, a.rstd1, dh)
	m.free(dxn1, dh)
	return dx
}

// packed builds a training batch from whole sequences.
func (m *Model) packed(seqs [][]int) (*batch, error) {
	b := &batch{}
	for i, s := range seqs {
		if len(s) == 0 {
			return nil, fmt.Errorf("model: sequence %d is empty", i)
		}
		b.seqs = append(b.seqs, AttnSeq{Q: len(b.ids), N: len(s), K: len(b.ids)})
		for t, id := range s {
			if id < 0 || id >= m.a.vocab {
				return nil, fmt.Errorf("model: sequence %d position %d: token id %d outside the vocabulary [0, %d)", i, t, id, m.a.vocab)
			}
			b.ids = append(b.ids, id)
			b.pos = append(b.pos, t)
		}
	}
	return b, nil
}

// trunk embeds b.ids and runs every layer. With keep, it returns each
// layer's activations (only the inputs when Recompute is set); the result is
// the last layer's output.
func (m *Model) trunk(b *batch, keep bool) (Tensor, []*acts) {
	be := m.be
	x := be.Zeros(len(b.ids), m.a.hidden)
	be.Embedding(x, m.params.embed, b.ids)
	var saved []*acts
	// A layer's output is a.outp + a.h: the next layer's first norm makes
	// the sum (the last layer's, an Add below), so h outlives the rest of
	// its layer's activations by one launch, and only h.
	var res Tensor
	keepAll := keep && !m.Recompute // the backward reads every activation, h included
	for l := 0; l < m.a.layers; l++ {
		a := m.layerForward(l, x, res, b)
		if res != nil && !keepAll {
			m.free(res)
		}
		res = a.h
		switch {
		case keepAll:
			saved = append(saved, a)
		case keep:
			saved = append(saved, &acts{x: x})
			a.h = nil
			a.release(m, true)
		default:
			a.h = nil
			a.release(m, false)
		}
		x = a.outp
	}
	if res != nil {
		be.Add(x, res)
		if !keepAll {
			m.free(res)
		}
	}
	return x, saved
}

// head applies the final norm and the LM head: logits of every row of x.
func (m *Model) head(x Tensor) (logits, xn, rstd Tensor) {
	xn, rstd = m.finalNorm(x)
	logits = m.be.Zeros(x.Rows(), m.a.vocab)
	m.be.MatMul(logits, xn, m.params.head, false, true, 1, 0)
	return logits, xn, rstd
}

// Logits returns the logits of every position of each sequence, [T_b·V] row
// major: row t scores the token after ids[:t+1]. Sequences are packed into one
// batch and never attend to each other.
func (m *Model) Logits(seqs [][]int) ([][]float32, error) {
	b, err := m.packed(seqs)
	if err != nil {
		return nil, err
	}
	x, _ := m.trunk(b, false)
	logits, xn, rstd := m.head(x)
	m.free(x, xn, rstd)
	host := m.be.ToHost(logits, nil)
	m.free(logits)
	out := make([][]float32, len(seqs))
	for i, s := range b.seqs {
		out[i] = host[s.Q*m.a.vocab : (s.Q+s.N)*m.a.vocab]
	}
	return out, nil
}

// targets are the next-token targets of a packed batch: row t of a sequence
// predicts its token t+1; the last row of each sequence has none (−1).
func targets(b *batch) []int {
	t := make([]int, len(b.ids))
	for _, s := range b.seqs {
		for i := 0; i < s.N; i++ {
			t[s.Q+i] = -1
			if i+1 < s.N {
				t[s.Q+i] = b.ids[s.Q+i+1]
			}
		}
	}
	return t
}

// logProbsOut unpacks per-row log-probs into per-sequence slices aligned with
// the input: lp[b][t] = log p(ids[t] | ids[:t]) and lp[b][0] = 0.
func logProbsOut(b *batch, rows []float32) [][]float32 {
	out := make([][]float32, len(b.seqs))
	for i, s := range b.seqs {
		o := make([]float32, s.N)
		for t := 1; t < s.N; t++ {
			o[t] = rows[s.Q+t-1]
		}
		out[i] = o
	}
	return out
}

// headChunk is how many rows of logits are made at once: the vocabulary is
// large (152k for Qwen), so the LM head, the log-softmax and their backward
// run over row chunks of about 128 MiB of logits instead of the whole batch.
func (m *Model) headChunk() int {
	if m.headRows > 0 {
		return m.headRows
	}
	return max(1, (32<<20)/m.a.vocab)
}

// norm applies the final RMSNorm.
func (m *Model) finalNorm(x Tensor) (xn, rstd Tensor) {
	R := x.Rows()
	xn, rstd = m.be.Zeros(R, m.a.hidden), m.be.Zeros(R, 1)
	m.be.RMSNorm(xn, rstd, x, m.params.norm, m.a.eps)
	return xn, rstd
}

// tokenLogProbs runs the LM head and log-softmax chunk by chunk over the
// normalized rows xn. With dlp (dL/dlp per row) it also backpropagates:
// dxn (overwritten) and the head's gradient (accumulated).
func (m *Model) tokenLogProbs(xn Tensor, tg []int, dlp []float32, dxn Tensor) []float32 {
	be := m.be
	R := xn.Rows()
	rows := make([]float32, 0, R)
	step := m.headChunk()
	for r0 := 0; r0 < R; r0 += step {
		n := min(step, R-r0)
		xc := be.View(xn, r0, n)
		logits := be.Zeros(n, m.a.vocab)
		be.MatMul(logits, xc, m.params.head, false, true, 1, 0)
		lp, lse := be.Zeros(n, 1), be.Zeros(n, 1)
		be.TokenLogProbs(lp, lse, logits, tg[r0:r0+n])
		rows = append(rows, be.ToHost(lp, nil)...)
		if dlp != nil {
			// dL/dlogits overwrites the logits; only the two products read it.
			m.productOnly(logits)
			be.TokenLogProbsBackward(logits, logits, lse, tg[r0:r0+n], dlp[r0:r0+n])
			be.MatMul(be.View(dxn, r0, n), logits, m.params.head, false, false, 1, 0)
			m.wgrad(m.grads.head, logits, xc)
		}
		m.free(logits, lp, lse)
	}
	return rows
}

// normedTrunk packs the sequences and runs the trunk and the final norm
// without keeping activations: the input of the LM head, for the passes
// that only score.
func (m *Model) normedTrunk(seqs [][]int) (*batch, Tensor, error) {
	b, err := m.packed(seqs)
	if err != nil {
		return nil, nil, err
	}
	x, _ := m.trunk(b, false)
	xn, rstd := m.finalNorm(x)
	m.free(x, rstd)
	return b, xn, nil
}

// LogProbs returns, for each sequence, log p(ids[t] | ids[:t]) for t ≥ 1 and
// 0 at t = 0 (no context), under the model at temperature 1.
func (m *Model) LogProbs(seqs [][]int) ([][]float32, error) {
	m.setPhase("score")
	b, xn, err := m.normedTrunk(seqs)
	if err != nil {
		return nil, err
	}
	rows := m.tokenLogProbs(xn, targets(b), nil, nil)
	m.free(xn)
	return logProbsOut(b, rows), nil
}

// weightedLogProbs is tokenLogProbs with its backward for the rows whose
// dL/dlp is not zero only; the others get log-prob 0 and a zero dxn row.
// Training weights only the tokens a policy wrote (SFT: the expert's
// outputs; RL: the sampled steps), a small share of the rows in a
// search agent's contexts, and for a small model the LM head and its
// softmax are a large share of the compute.
func (m *Model) weightedLogProbs(xn Tensor, tg []int, dlp []float32, dxn Tensor) []float32 {
	var idx []int
	for r, g := range dlp {
		if g != 0 {
			idx = append(idx, r)
		}
	}
	return m.rowLogProbs(xn, tg, idx, dlp, dxn)
}

// rowLogProbs runs tokenLogProbs (and, with dlp, its backward) on the rows
// idx of xn only, gathered: the other rows get log-prob 0 and, with dlp, a
// zero dxn row.
func (m *Model) rowLogProbs(xn Tensor, tg []int, idx []int, dlp []float32, dxn Tensor) []float32 {
	rows := make([]float32, len(tg))
	if len(idx) == 0 {
		return rows
	}
	be := m.be
	n := len(idx)
	xs := be.Empty(n, m.a.hidden)
	be.GatherRows(xs, xn, idx)
	tgs := make([]int, n)
	var dls []float32
	var dxs Tensor
	if dlp != nil {
		dls, dxs = make([]float32, n), be.Zeros(n, m.a.hidden)
	}
	for i, r := range idx {
		tgs[i] = tg[r]
		if dlp != nil {
			dls[i] = dlp[r]
		}
	}
	for i, lp := range m.tokenLogProbs(xs, tgs, dls, dxs) {
		rows[idx[i]] = lp
	}
	if dlp != nil {
		be.ScatterRows(dxn, dxs, idx)
		m.free(dxs)
	}
	m.free(xs)
	return rows
}

// LogProbsFrom is LogProbs for the positions t ≥ from[i] of sequence i only,
// 0 before them: the LM head runs on those rows alone. The update recomputes
// the log-probs of a step's output after its context, and the memory reward
// those of a gold answer at the end of a long teacher-forced sequence.
func (m *Model) LogProbsFrom(seqs [][]int, from []int) ([][]float32, error) {
	m.setPhase("score")
	if len(from) != len(seqs) {
		return nil, fmt.Errorf("model: %d start positions for %d sequences", len(from), len(seqs))
	}
	b, xn, err := m.normedTrunk(seqs)
	if err != nil {
		return nil, err
	}
	var idx []int
	for i, s := range b.seqs {
		for t := max(from[i], 1); t < s.N; t++ {
			idx = append(idx, s.Q+t-1)
		}
	}
	rows := m.rowLogProbs(xn, targets(b), idx, nil, nil)
	m.free(xn)
	return logProbsOut(b, rows), nil
}

// Backward computes L = −Σ_b Σ_{t≥1} weights[b][t]·log p(ids[t] | ids[:t])
// over the sequences (weights[b][0] is ignored; len(weights[b]) = len(seqs[b]))
// and adds dL/dθ into the gradients (see Grads, ZeroGrads). It returns L and
// the token log-probs in LogProbs' layout, for the tokens with a weight (0
// where the weight is 0: those are not computed).
func (m *Model) Backward(seqs [][]int, weights [][]float32) (float64, [][]float32, error) {
	if len(weights) != len(seqs) {
		return 0, nil, fmt.Errorf("model: %d weight rows for %d sequences", len(weights), len(seqs))
	}
	for i := range seqs {
		if len(weights[i]) != len(seqs[i]) {
			return 0, nil, fmt.Errorf("model: sequence %d has %d tokens and %d weights", i, len(seqs[i]), len(weights[i]))
		}
	}
	b, err := m.packed(seqs)
	if err != nil {
		return 0, nil, err
	}
	m.ensureGrads()
	b.train = true
	be := m.be
	x, saved := m.trunk(b, true)
	xn, rstd := m.finalNorm(x)
	R := len(b.ids)
	// L = −Σ w·lp, so dL/dlp = −w on the row that predicts token t.
	dlp := make([]float32, R)
	for i, s := range b.seqs {
		for t := 1; t < s.N; t++ {
			dlp[s.Q+t-1] = -weights[i][t]
		}
	}
	dxn := be.Zeros(R, m.a.hidden)
	rows := m.weightedLogProbs(xn, targets(b), dlp, dxn)
	var loss float64
	for r, g := range dlp {
		loss += float64(g) * float64(rows[r])
	}
	dx := be.Zeros(R, m.a.hidden)
	be.RMSNormBackward(dx, m.grads.norm, dxn, x, m.params.norm, rstd)
	m.free(dxn, xn, rstd, x)
	for l := m.a.layers - 1; l >= 0; l-- {
		a := saved[l]
		if m.Recompute {
			a = m.layerForward(l, a.x, nil, b) // a.x is whole: the next layer's norm added its residual
			m.free(a.outp)
		}
		ndx := m.layerBackward(l, dx, a, b)
		m.free(dx)
		a.release(m, false)
		dx = ndx
	}
	if m.grads.embed != nil {
		be.EmbeddingBackward(m.grads.embed, dx, b.ids)
	}
	m.free(dx)
	return loss, logProbsOut(b, rows), nil
}
