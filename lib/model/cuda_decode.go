package model

import (
	"fmt"
	"strconv"
	"unsafe"

	"github.com/mempo/mempo/lib/cuda"
	"github.com/mempo/mempo/lib/envconfig"
)

// The CUDA backend's decoding step (stepper.go): one token per row through
// every layer, the LM head and the sampler, from buffers allocated once per
// Generate, so that the whole step is captured in a CUDA graph and replayed
// per token with one driver call. Rows are padded to a bucket (a power of
// two); each bucket gets its own graph, captured at its second step (the
// first runs the same launches directly, which also loads the kernels and
// warms cuBLAS). Per token the host writes one small input block (ids,
// positions, cache rows, the decode kernel's rows, temperatures, uniforms)
// to pinned memory, queues its copy, the replay and the copy back of the
// sampled ids and log-probs, and synchronizes once.
//
// The step computes what the model's op-by-op path (layerForward) computes.
// Per layer: residual add + RMSNorm, the q, k, v products, bias + RoPE +
// KV-cache write, attention, the output product, residual add + RMSNorm,
// the gate and up products, SwiGLU, the down product: 11 launches where
// cuBLAS takes the products (gate and up, k and v, each pair one batched
// call: gemmPair), 10 where skinny.cu takes q, k and v in one, 7 with the
// bf16 GEMVs of small steps, which also take the bias, RoPE and cache write
// into the q/k/v launch; instead of about 20 plus their host work. The
// fused elementwise kernels (kernels/decode.cu) keep the arithmetic of the
// kernels they replace. Some do not: attention with the keys split across
// blocks at every batch size (where rows × kv heads fill the chip twice
// attn_split_group, whose warps score 32 keys at once for every query head
// of a kv head; elsewhere attn_split_sub, whose blocks split their keys
// again among warps a query head, or attn_split_merged; the last split of a head merges
// the partials; the op-by-op decode kernel runs one block per row and kv
// head, 2 to 8 blocks for a batch-1 step, about 50–80 µs a layer on the
// H200), where a step has few rows the sampler split over blocks (sample_split_*), and,
// in bf16 mode, the products of steps of at most four rows (gemv_bf16:
// cuBLAS reads the weights at about two thirds of the copy bandwidth
// there). Their sums run in another order, so log-probs differ from the
// op-by-op path's in the last bits. (GEMVs that also took the RMSNorm, and
// for q/k/v the bias, RoPE and cache write, in — five launches a layer
// instead of seven — were measured 2–9% slower on the H200 than these
// separate kernels: every block normalized the rows again.) Steps of at
// most four rows of the larger models run all their layers in one
// persistent launch instead (cuda_persist.go, MEMPO_CUDA_PERSIST), with the
// same bits.
//
// On Hopper and later the step's own kernels (decode.cu, sample.cu) are
// launched overlapped (programmatic dependent launch, cuda.LaunchOverlap):
// each may start, and wait in PDL_WAIT, while the kernel before it drains
// (measured: 1–5% at batch 1, nothing at 32 and 256, where the chain of
// dependent kernels, not their launches, bounds the step). MEMPO_CUDA_PDL=0
// turns it off.
//
// MEMPO_CUDA_DECODE selects it: "graph" (default), "direct" (the same step
// without graphs), "generic" (the model's op-by-op path).

// Decode modes of the CUDA backend (CUDA.decode).
const (
	decodeGraph   = "graph"
	decodeDirect  = "direct"
	decodeGeneric = "generic"
)

// persistBlocksFromEnv is MEMPO_CUDA_PERSIST: blocks a multiprocessor of
// dec_persist, 0 for none, or persistAuto when unset (cuda_persist.go).
func persistBlocksFromEnv() int {
	n, err := strconv.Atoi(envconfig.CUDAPersist.Get())
	if err != nil || n < 0 {
		return persistAuto
	}
	return n
}

func decodeModeFromEnv() string {
	switch v := envconfig.CUDADecode.Get(); v {
	case decodeDirect, decodeGeneric:
		return v
	}
	return decodeGraph
}

// stepBucket is the padded row count of a step with n rows.
func stepBucket(n int) int {
	b := 1
	for b < n {
		b *= 2
	}
	return b
}

// gemvMaxRows is the most rows gemv_bf16 takes (GEMV_MAXM in decode.cu).
const gemvMaxRows = 4

// splitMinChunk is the fewest keys per block of attn_split.
const splitMinChunk = 16

// useSplit says whether the step takes attn_split (always, but in tests
// that ask for attndecode.cu's per-row kernel, CUDA.perRowAttn). Measured on
// the H200 (2026-12-02, steps alone, graph): split keys beat the per-row
// kernel at every batch, by 5% (0.5B), 23% (1.5B) and 13% (7B) at batch
// 256, where a row and kv head get one split; before its loads were issued
// 8 keys at a time and its chunks followed the row's keys, the per-row
// kernel won there (185 against 76 µs a layer at 0.5B).
func (b *CUDA) useSplit() bool { return !b.perRowAttn }

// splitPlan is attn_split's number of splits for rows decode rows over up
// to maxKeys keys: enough for about two blocks per multiprocessor, and no
// more than chunks of splitMinChunk keys need. The plan depends on the
// shapes only, so a captured graph keeps it; the kernel shares each row's
// keys among the splits (split_chunk in decode.cu: an even share, at least
// splitMinChunk), so a row shorter than the cache leaves splits idle only
// when it has fewer than splitMinChunk keys a split.
func (b *CUDA) splitPlan(rows, kvHeads, maxKeys, minChunk int) int {
	want := max(1, (2*b.dev.SMs+rows*kvHeads-1)/(rows*kvHeads))
	return max(1, min(want, (maxKeys+minChunk-1)/minChunk))
}

// attnSubWays is the attn_split_sub kernel for a step of rows rows, head
// dim hd and g query heads a kv head: S warps a query head in each block
// (decode.cu's attn_split_sub4/2/1: 4 up to head dim 64, 2 up to 128, 1 up to
// 256), the fewest keys a split then takes (a multiple of what the S warps
// load in one round), and ok false where attn_split_merged runs instead:
// where the block would pass the kernel's launch bound (g·S warps against
// 32, 16, 8), in tests that ask for it (CUDA.attnNoSub), and for head dims
// over 64 once rows × kv heads pass 8. Measured on the H200 (2026-12-02,
// steps alone against attn_split_merged): at head dim 64 (0.5B) equal at
// batch 1 and 32 and 5.6% faster at 256; at head dim 128 faster at batch 1
// (3.4% at 1.5B, 0.7% at 7B) but 4.5–16% slower at 32 and 256, the
// 512-thread blocks of 120 registers holding one block a multiprocessor.
//
// Steps of at most gemvMaxRows rows take 2 ways at head dim 64 too: the
// layers of those steps run in one persistent launch (dec_persist, with the
// attention of attn_split_sub2), whose registers would spill under
// attn_split_sub4's bound, and the separate launches keep the same sums.
func (b *CUDA) attnSubWays(rows, kvHeads, g, hd int) (kernel string, ways, minChunk int, ok bool) {
	ways, keys, maxWarps := 4, 8, 32
	switch {
	case hd > 256:
		return "", 0, 0, false
	case hd > 128:
		ways, keys, maxWarps = 1, 4, 8
	case hd > 64 || rows <= gemvMaxRows:
		ways, maxWarps = 2, 16
	}
	ok = g*ways <= maxWarps && !b.attnNoSub && (hd <= 64 || rows*kvHeads <= 8)
	return fmt.Sprintf("attn_split_sub%d", ways), ways, max(splitMinChunk, ways*keys), ok
}

// attnGroup is attn_split_group's warps a block for a step of rows rows,
// kvHeads kv heads of g query heads each and head dim hd, and ok false where
// attn_split_sub or attn_split_merged runs instead: steps of at most
// gemvMaxRows rows (their separate launches keep dec_persist's sums), steps
// whose rows × kv heads do not fill the chip twice (the keys would then be
// split across blocks; CUDA.groupFrom moves that line for tests), head dims
// over 128 or not a multiple of 4, groups of more than GRP_G (8) query
// heads, and CUDA.attnNoGroup. Measured on an H100 (2026-12-07,
// docs/BENCHMARKS.md): 1.06–1.17× faster steps at batch 256 (7B to 0.5B)
// and the rollout benchmark's decoding attention 1.85× faster (batch 1,024,
// about 600 keys), but 1.03–1.29× slower steps at batch 8 to 64, where each
// block's few keys leave its fixed costs (q staged, the merge over warps)
// and its two dependent passes (keys, then values) uncovered.
func (b *CUDA) attnGroup(rows, kvHeads, g, hd int) (warps int, ok bool) {
	warps = attnGroupWarps
	if b.groupWarps > 0 {
		warps = b.groupWarps
	}
	from := 2 * b.dev.SMs
	if b.groupFrom > 0 {
		from = b.groupFrom
	}
	return warps, rows > gemvMaxRows && rows*kvHeads >= from && hd <= 128 && hd%4 == 0 && g <= 8 && !b.attnNoGroup
}

const (
	attnGroupWarps    = 4  // warps a block, each taking every 4th tile of 32 keys (at most 8: the kernel's launch bound)
	attnGroupMinChunk = 32 // the fewest keys a split takes: one tile
)

// attnGroupShared is attn_split_group's dynamic shared memory: q of the g
// heads, each warp's weights of a tile and its partials for the merge.
func attnGroupShared(g, hd, warps int) int { return 4 * (g*hd + warps*g*32 + warps*g*(hd+2)) }

// stepLayerW is one layer's operands: GEMM weights as the products read them
// (bf16 roundings in bf16 mode), norms and biases in fp32 (0: absent).
type stepLayerW struct {
	wq, wk, wv, wo, wg, wu, wd   cuda.Ptr
	inNorm, postNorm             cuda.Ptr
	bq, bk, bv, bo, qNorm, kNorm cuda.Ptr
	kc, vc                       cuda.Ptr // the KV cache of the layer
}

type cudaStepper struct {
	b       *CUDA
	a       *arch
	maxKeys int // the most keys of a row (kvCache.maxKeys)
	maxB    int
	bf16    bool

	layers             []stepLayerW
	embed, normW, head cuda.Ptr
	rope               *cudaRope
	scale              float32

	held                               []heldBuf
	x, xn, q, k, v, att, att16, lse, o cuda.Ptr
	cnt                                cuda.Ptr // attn_split_merged's counters
	spart                              cuda.Ptr // the split sampler's chunk records
	gate, up, act, logits, res, rstd   cuda.Ptr
	part                               cuda.Ptr // attn_split's partials
	skPart, skCnt                      cuda.Ptr // skinny.cu's partial products and column-tile counters
	in                                 cuda.Ptr // input block (layout in stepInput)
	tab                                cuda.Ptr // dec_persist's per-layer operands (DecLayer, 15 pointers a layer)
	bar                                cuda.Ptr // dec_persist's grid barrier: a 64-bit count, the timed-out flag (in res, at barOffset)
	persisted                          bool     // the step just queued ran dec_persist
	host, out                          *cuda.Pinned
	graphs                             map[int]*cuda.Graph
	seen                               map[int]int
	useGraphs                          bool
}

type heldBuf struct {
	p    cuda.Ptr
	size int
}

// Input block layout, in bytes from its start, for maxB rows: int32 ids,
// positions, cache rows (−1: padding), decode-kernel rows (decodeRowInts
// each); float64 inverse temperatures and uniforms.
func (s *cudaStepper) offIDs() int   { return 0 }
func (s *cudaStepper) offPos() int   { return 4 * s.maxB }
func (s *cudaStepper) offCRow() int  { return 8 * s.maxB }
func (s *cudaStepper) offAttn() int  { return 12 * s.maxB }
func (s *cudaStepper) offInvT() int  { return (12 + 4*decodeRowInts) * s.maxB }
func (s *cudaStepper) offU() int     { return s.offInvT() + 8*s.maxB }
func (s *cudaStepper) inBytes() int  { return s.offU() + 8*s.maxB }
func (s *cudaStepper) resBytes() int { return 12 * s.maxB }

// outBytes is what the host reads back after a step: the results and
// dec_persist's barrier words.
func (s *cudaStepper) outBytes() int { return s.barOffset() + 16 }

// barOffset is where dec_persist's barrier words start in res (8-byte
// aligned: a 64-bit count, then the timed-out flag).
func (s *cudaStepper) barOffset() int { return (s.resBytes() + 15) / 16 * 16 }

// newStepper returns the decoding step for up to rows rows over cache c, or
// nil where the op-by-op path must run (MEMPO_CUDA_DECODE=generic, forced
// attention kernels, a head layout the decode kernel does not take).
func (b *CUDA) newStepper(m *Model, c *kvCache, rows int) stepper {
	A := &m.a
	if b.decode == decodeGeneric || b.attnKernelsOnly || A.heads/A.kvHeads > 16 || A.headDim > 256 || rows == 0 {
		return nil
	}
	s := &cudaStepper{b: b, a: A, maxKeys: c.maxKeys, maxB: stepBucket(rows), bf16: b.bf16,
		scale: m.attnShape().Scale, graphs: map[int]*cuda.Graph{}, seen: map[int]int{},
		useGraphs: b.decode == decodeGraph && b.dev.GraphsAvailable()}
	op := func(t Tensor) cuda.Ptr {
		if t == nil {
			return 0
		}
		g := gtAny(t) // a frozen base's matrices are bf16 only (FromHostFrozen)
		if s.bf16 && g.r > 1 && g.c > 1 {
			return b.bf16Operand(g)
		}
		return gt(t).ptr()
	}
	for l := range m.params.layers {
		W := &m.params.layers[l]
		s.layers = append(s.layers, stepLayerW{
			wq: op(W.wq), wk: op(W.wk), wv: op(W.wv), wo: op(W.wo), wg: op(W.wg), wu: op(W.wu), wd: op(W.wd),
			inNorm: op(W.inNorm), postNorm: op(W.postNorm),
			bq: op(W.bq), bk: op(W.bk), bv: op(W.bv), bo: op(W.bo), qNorm: op(W.qNorm), kNorm: op(W.kNorm),
			kc: gt(c.k[l]).ptr(), vc: gt(c.v[l]).ptr(),
		})
	}
	s.embed, s.normW, s.head = gt(m.params.embed).ptr(), op(m.params.norm), op(m.params.head)
	s.rope = b.ropeTable(A.headDim, A.theta, c.maxKeys)

	B, H, qd, kvd := s.maxB, A.hidden, A.heads*A.headDim, A.kvHeads*A.headDim
	get := func(bytes int) cuda.Ptr {
		p, size := b.rawAlloc(max(bytes, 16))
		s.held = append(s.held, heldBuf{p, size})
		return p
	}
	act := 4
	if s.bf16 {
		act = 2 // GEMM operands: xn, act (bf16 only)
	}
	s.x, s.xn = get(4*B*H), get(act*B*H)
	// k and v, gate and up: each pair one region, its products one after
	// the other (gemmPair).
	s.q, s.k = get(4*B*qd), get(8*B*kvd)
	s.v = s.k + cuda.Ptr(4*B*kvd)
	s.att, s.lse = get(4*B*qd), get(4*B*A.heads)
	if s.bf16 {
		s.att16 = get(2 * B * qd)
	}
	s.o = get(4 * B * H)
	s.gate, s.act = get(8*B*A.inter), get(act*B*A.inter)
	s.up = s.gate + cuda.Ptr(4*B*A.inter)
	s.logits = get(4 * B * A.vocab)
	s.res = get(s.outBytes())
	s.bar = s.res + cuda.Ptr(s.barOffset())
	must(b.dev.Memset32(s.bar, 0, 4))
	if s.bf16 && persistBlocksFor(b.persistBlocks, H) > 0 {
		s.tab = s.persistTable(get) // only where dec_persist may run
	}
	s.rstd = get(4 * B * A.heads)
	// attn_split's partials: rows × splits of the bucket that needs most
	// (small buckets split more; at most about 2·SMs/kv heads + B).
	parts := 0
	for bk := 1; bk <= stepBucket(B); bk *= 2 {
		parts = max(parts, bk*b.splitPlan(bk, A.kvHeads, c.maxKeys, splitMinChunk))
	}
	s.part = get(4 * parts * A.heads * (A.headDim + 2))
	s.in = get(s.inBytes())
	s.cnt = get(4 * B * A.heads)
	if _, nc := s.sampleSplit(B); nc > 1 {
		s.spart = get(8 * 4 * B * nc)
	}
	must(b.dev.Memset32(s.cnt, 0, B*A.heads)) // attn_split_merged leaves them at zero
	if parts, tiles := s.skinnyScratch(); tiles > 0 {
		s.skPart, s.skCnt = get(4*parts), get(4*tiles)
		must(b.dev.Memset32(s.skCnt, 0, tiles)) // skinny.cu leaves them at zero
	}
	var err error
	if s.host, err = b.dev.PinnedAlloc(s.inBytes()); err == nil {
		s.out, err = b.dev.PinnedAlloc(s.outBytes())
	}
	must(err)
	return s
}

func (s *cudaStepper) free() {
	must(s.b.dev.Sync()) // nothing queued may still use the graphs or buffers
	for _, g := range s.graphs {
		g.Destroy()
	}
	s.graphs = nil
	for _, h := range s.held {
		s.b.rawFree(h.p, h.size, false)
	}
	s.held = nil
	s.host.Free()
	s.out.Free()
}

// step implements stepper.
func (s *cudaStepper) step(ids []int, seqs []AttnSeq, params []SampleParams, u []float64) []Sampled {
	n := len(ids)
	if n > s.maxB {
		panic(fmt.Sprintf("model: decoding step of %d rows on a stepper of %d", n, s.maxB))
	}
	bk := min(stepBucket(n), s.maxB)
	hb := s.host.Bytes()
	i32 := unsafe.Slice((*int32)(unsafe.Pointer(&hb[0])), s.offInvT()/4)
	f64 := unsafe.Slice((*float64)(unsafe.Pointer(&hb[s.offInvT()])), 2*s.maxB)
	P, C, R := s.maxB, 2*s.maxB, 3*s.maxB
	filtered := false
	for i := 0; i < bk; i++ {
		if i < n {
			q := seqs[i]
			q.checkPrefix()
			i32[i], i32[P+i], i32[C+i] = int32(ids[i]), int32(q.Past), int32(q.K+q.Past)
			ar := i32[R+decodeRowInts*i:]
			ar[0], ar[1], ar[2], ar[3], ar[4] = int32(i), int32(q.K), int32(q.Past+1), int32(q.P), int32(q.PN)
			p := params[i]
			f64[i], f64[s.maxB+i] = 0, u[i]
			if p.Temperature > 0 {
				f64[i] = 1 / p.Temperature
				if (p.TopK > 0 && p.TopK < s.a.vocab) || (p.TopP > 0 && p.TopP < 1) {
					filtered = true
				}
			}
			continue
		}
		// Padding: token 0 at position 0 of slot 0, no cache write, greedy.
		i32[i], i32[P+i], i32[C+i] = 0, 0, -1
		ar := i32[R+decodeRowInts*i:]
		ar[0], ar[1], ar[2], ar[3], ar[4] = int32(i), 0, 1, 0, 0
		f64[i], f64[s.maxB+i] = 0, 0
	}
	dev := s.b.dev
	must(dev.CopyIn(s.in, s.host, s.inBytes()))
	s.run(bk)
	if !filtered || s.persisted {
		must(dev.CopyOut(s.out, s.res, s.outBytes()))
		must(dev.Sync())
	}
	ob := s.out.Bytes()
	if s.persisted && *(*uint32)(unsafe.Pointer(&ob[s.barOffset()+8])) != 0 {
		s.persistTimedOut(bk)
		return s.step(ids, seqs, params, u)
	}
	if filtered {
		// Top-k / top-p rows: the backend's sampler over the step's logits.
		z := &cudaTensor{buf: &devBuf{p: s.logits, bytes: 4 * n * s.a.vocab, be: s.b}, r: n, c: s.a.vocab}
		return s.b.Sample(z, params, u)
	}
	rid := unsafe.Slice((*int32)(unsafe.Pointer(&ob[0])), s.maxB)
	rf := unsafe.Slice((*float32)(unsafe.Pointer(&ob[0])), 3*s.maxB)
	got := make([]Sampled, n)
	for i := range got {
		got[i] = Sampled{ID: int(rid[i]), LogProb: rf[s.maxB+i], SampleLogProb: rf[2*s.maxB+i]}
	}
	return got
}

// run queues the step for bucket bk: replays its graph, captures it (the
// bucket's second step), or launches directly (the first step, profiling,
// graphs off or failed).
func (s *cudaStepper) run(bk int) {
	s.seen[bk]++
	if !s.useGraphs || s.b.prof != nil || s.seen[bk] == 1 {
		s.launchStep(bk)
		return
	}
	g := s.graphs[bk]
	if g == nil {
		var err error
		if g, err = s.capture(bk); err != nil {
			s.useGraphs = false
			s.b.graphErr = err
			s.launchStep(bk)
			return
		}
		s.graphs[bk] = g
	}
	must(g.Launch())
	s.b.graphReplays++
}

// capture records the step of bucket bk in a graph.
func (s *cudaStepper) capture(bk int) (g *cuda.Graph, err error) {
	dev := s.b.dev
	if err := dev.BeginCapture(); err != nil {
		return nil, err
	}
	defer func() {
		if r := recover(); r != nil {
			if dev.Capturing() {
				dev.EndCapture()
			}
			g, err = nil, fmt.Errorf("model: capturing the decoding step: %v", r)
		}
	}()
	s.launchStep(bk)
	return dev.EndCapture()
}

func (s *cudaStepper) launch(module, name string, grid cuda.Dim3, block, shmem int, args ...any) {
	b := s.b
	f := b.fn(module, name)
	if shmem > 48<<10 {
		must(b.dev.SetMaxDynamicShared(f, shmem))
	}
	if !b.dev.Capturing() {
		defer b.timed(name)()
	}
	if b.overlap && (module == "decode" || module == "sample" || module == "skinny") {
		// The step's own kernels begin with PDL_WAIT (kernels/pdl.cuh).
		must(b.dev.LaunchOverlap(f, grid, cuda.Dim3{X: block}, shmem, args...))
		return
	}
	must(b.dev.Launch(f, grid, cuda.Dim3{X: block}, shmem, args...))
}

// gemm is c[m×n] = a[m×k]·wᵀ (w [n×k]), fp32 out, as MatMul(c, a, w, false,
// true, 1, 0): decode.cu's gemv_bf16 for the few rows of a small bf16 step,
// cuBLAS otherwise.
func (s *cudaStepper) gemm(c, a, w cuda.Ptr, m, n, k int) {
	b := s.b
	if s.gemv(m, k) {
		// Blocks of 4 warps (a warp per column): the 0.5B shape's 896
		// columns then cover every multiprocessor.
		s.launch("decode", "gemv_bf16", cuda.Dim3{X: (n + 3) / 4}, 128, 0, c, a, w, m, n, k)
		return
	}
	if s.skinny(m, k) && s.b.skinnyAll {
		s.skinnyGemm(a, m, k, []cuda.Ptr{c}, []cuda.Ptr{w}, []int{n})
		return
	}
	dt, name := cuda.F32, "gemm"
	if s.bf16 {
		dt, name = cuda.BF16, "gemm_bf16"
	}
	if !b.dev.Capturing() {
		defer b.timed(name)()
	}
	must(b.dev.Gemm(false, true, m, n, k, 1, a, dt, k, w, dt, k, 0, c, cuda.F32, n))
}

// gemmPair queues two products of one shape over the same rows, c0 =
// a·w0ᵀ and c1 = a·w1ᵀ (m rows, n columns, k), as one strided-batched
// cuBLAS call: gate and up, k and v. One launch instead of two, and twice the
// tiles to spread over the multiprocessors (at 7B and 32 rows PyTorch's
// merged gate/up weight took 74 µs against our two calls' 80; the weights
// here stay where they are, the batch's stride being the distance between
// them). out holds two products of maxB rows, one after the other; it
// returns where c0 and c1 landed (the batch runs from the lower weight
// address up, so that no stride is negative). Products that take the gemv
// or skinny.cu kernels, and MEMPO_CUDA_PAIR=0, run one call each.
func (s *cudaStepper) gemmPair(out, a, w0, w1 cuda.Ptr, m, n, k int) (c0, c1 cuda.Ptr) {
	c0, c1 = out, out+cuda.Ptr(4*s.maxB*n)
	if s.b.pairOff || s.gemv(m, k) || (s.skinny(m, k) && s.b.skinnyAll) {
		s.gemm(c0, a, w0, m, n, k)
		s.gemm(c1, a, w1, m, n, k)
		return c0, c1
	}
	dt, size, name := cuda.F32, cuda.Ptr(4), "gemm_pair"
	if s.bf16 {
		dt, size, name = cuda.BF16, 2, "gemm_pair_bf16"
	}
	lo, hi := w0, w1
	if w1 < w0 {
		lo, hi, c0, c1 = w1, w0, c1, c0
	}
	if !s.b.dev.Capturing() {
		defer s.b.timed(name)()
	}
	must(s.b.dev.GemmStridedBatched(false, true, m, n, k, 1, a, dt, k, 0, lo, dt, k, int64((hi-lo)/size),
		0, out, cuda.F32, n, int64(s.maxB*n), 2))
	return c0, c1
}

// gemv says whether products of m rows over k take decode.cu's gemv kernels.
func (s *cudaStepper) gemv(m, k int) bool { return s.bf16 && m <= gemvMaxRows && k%8 == 0 }

// skinny.cu's kernels, by 16-row tiles, and the shape of their blocks
// (SK_COLS, SK_LD there).
var skinnyKernels = [...]string{"skinny_bf16_m16", "skinny_bf16_m32"}

const (
	skinnyMaxRows = 16 * len(skinnyKernels)
	skinnyCols    = 64       // columns a tile (SK_COLS)
	skinnyKC      = 128      // k a chunk (SK_KC)
	skinnyLD      = skinnyKC // halves a staged row (SK_LD)
	skinnyStages  = 4        // chunks staged at once (SK_STAGES)
	skinnyThreads = 256      // SK_THREADS
)

// skinnyShared is the dynamic shared memory of skinny.cu's kernel of mt
// 16-row tiles: its stages of 64 weight rows and mt·16 rows of A, and the
// sums one half of its warps hands the other.
func skinnyShared(mt int) int { return skinnyStages*(skinnyCols+16*mt)*skinnyLD*2 + mt*4096 }

// skinny says whether products of m rows over k may take skinny.cu (bf16
// steps of gemvMaxRows+1 to 32 rows; MEMPO_CUDA_SKINNY=0 or the cublas
// benchmark variant keep cuBLAS). The step takes it for q, k and v, in one
// launch where cuBLAS took three; the other products stay on cuBLAS unless
// skinnyAll (the skinnyall benchmark variant): in the step's graph at 32
// rows skinny.cu was slower than cuBLAS on the large products (7B gate and
// up, down and the LM head: 55–63% of the copy bandwidth against cuBLAS's
// 80–96%; docs/BENCHMARKS.md).
func (s *cudaStepper) skinny(m, k int) bool {
	return s.bf16 && !s.b.skinnyOff && m > gemvMaxRows && m <= skinnyMaxRows && k%32 == 0
}

// skinnyGrid is the blocks of a skinny.cu launch over tiles column tiles
// and k: two a multiprocessor (what fits of its kernels' shared memory),
// fewer where there are fewer than two iterations (tiles × chunks of 128 k)
// a block (each split of a tile costs a merge). The blocks share the
// iterations evenly (stream-K), so no wave is left partly
// idle whatever the shape; where a tile's iterations span blocks, their
// partial sums are added in block order. The grid depends on the product's
// shape only, not on its rows, so a row's sums are the same in every batch
// that takes the kernel.
func skinnyGrid(tiles, k, sms int) int {
	return max(1, min(2*sms, tiles*((k+skinnyKC-1)/skinnyKC)/2))
}

// skinnyGemm queues c_p = a·w_pᵀ (m rows, k, n_p columns, fp32 out) for up
// to three products sharing a, in one skinny.cu launch.
func (s *cudaStepper) skinnyGemm(a cuda.Ptr, m, k int, cs, ws []cuda.Ptr, ns []int) {
	var c, w [3]cuda.Ptr
	var n [3]int
	tiles := 0
	for i := range cs {
		c[i], w[i], n[i] = cs[i], ws[i], ns[i]
		tiles += (ns[i] + skinnyCols - 1) / skinnyCols
	}
	mt := (m + 15) / 16
	s.launch("skinny", skinnyKernels[mt-1], cuda.Dim3{X: skinnyGrid(tiles, k, s.b.dev.SMs)}, skinnyThreads, skinnyShared(mt),
		c[0], c[1], c[2], w[0], w[1], w[2], n[0], n[1], n[2], s.skPart, s.skCnt, a, m, k)
}

// skinnyScratch is the floats of partial sums and the column-tile counters
// the step's skinny products need at most (0, 0 where none runs): two
// slots of m × 64 a block.
func (s *cudaStepper) skinnyScratch() (parts, tiles int) {
	A := s.a
	m := min(s.maxB, skinnyMaxRows)
	if !s.bf16 || s.b.skinnyOff || m <= gemvMaxRows {
		return 0, 0
	}
	t := func(n int) int { return (n + skinnyCols - 1) / skinnyCols }
	qd, kvd := A.heads*A.headDim, A.kvHeads*A.headDim
	tiles = max(t(qd)+2*t(kvd), t(A.hidden), 2*t(A.inter), t(A.vocab))
	return skinnyParts(s.b.dev.SMs, m), tiles
}

// skinnyParts is the floats of partial sums a skinny.cu launch of m rows
// may write: two slots of m × 64 for each of skinnyGrid's blocks at most.
func skinnyParts(sms, m int) int { return 2 * 2 * sms * m * skinnyCols }

// norm is dec_add_rmsnorm: x += d (when d ≠ 0), xn = RMSNorm(x)·w, written
// in the products' precision.
func (s *cudaStepper) norm(bk int, d, w cuda.Ptr) {
	var o32, o16 cuda.Ptr = s.xn, 0
	if s.bf16 {
		o32, o16 = 0, s.xn
	}
	H := s.a.hidden
	s.launch("decode", "dec_add_rmsnorm", cuda.Dim3{X: min(bk, 65535*4)}, normBlock(H), 0, s.x, d, o32, o16, w, bk, H, s.a.eps)
}

// launchStep queues every launch of one step for bk rows.
func (s *cudaStepper) launchStep(bk int) {
	A := s.a
	H, I, hd := A.hidden, A.inter, A.headDim
	qd, kvd, g := A.heads*hd, A.kvHeads*hd, A.heads/A.kvHeads
	in := s.in
	ids, pos, crow, rows := in+cuda.Ptr(s.offIDs()), in+cuda.Ptr(s.offPos()), in+cuda.Ptr(s.offCRow()), in+cuda.Ptr(s.offAttn())
	gridFor := func(n int) cuda.Dim3 { return cuda.Dim3{X: s.b.gridFor(int64(n), 256)} }

	s.launch("model", "gather_rows_f32", cuda.Dim3{X: min(bk, 65535)}, 256, 0, s.x, s.embed, ids, bk, H)
	s.persisted = s.persist(bk, pos, crow, rows)
	if s.persisted {
		s.norm(bk, 0, s.normW) // dec_persist added the last MLP output
		s.headAndSample(bk)
		return
	}
	attOp := s.att
	if s.bf16 {
		attOp = s.att16
	}
	for l := range s.layers {
		W := &s.layers[l]
		var d cuda.Ptr
		if l > 0 {
			d = s.o // the previous layer's MLP output
		}
		s.norm(bk, d, W.inNorm)
		if s.gemv(bk, H) && !A.qkNorm && !s.b.ropeApart {
			// q, k, v, their biases, RoPE and the cache write in one launch:
			// a warp a rotation pair of q or k, or a v column.
			tasks := (A.heads+A.kvHeads)*hd/2 + kvd
			s.launch("decode", "gemv_qkv_rope_bf16", cuda.Dim3{X: (tasks + 7) / 8}, 256, 0, s.q, W.kc, W.vc, W.wq, W.wk, W.wv,
				W.bq, W.bk, W.bv, s.xn, bk, H, pos, crow, s.rope.cos, s.rope.sin, A.heads, A.kvHeads, hd)
		} else {
			s.qkvApart(bk, W, pos, crow)
		}
		if warps, ok := s.b.attnGroup(bk, A.kvHeads, g, hd); s.b.useSplit() && ok {
			// Every query head of a kv head at once, a lane a key.
			nsp := s.b.splitPlan(bk, A.kvHeads, s.maxKeys, attnGroupMinChunk)
			s.launch("decode", "attn_split_group", cuda.Dim3{X: bk, Y: A.kvHeads, Z: nsp}, 32*warps, attnGroupShared(g, hd, warps),
				s.att, s.att16, s.lse, s.part, s.q, W.kc, W.vc, rows, A.heads, A.kvHeads, hd, s.scale, attnGroupMinChunk, s.cnt)
		} else if kernel, S, minChunk, ok := s.b.attnSubWays(bk, A.kvHeads, g, hd); s.b.useSplit() && ok {
			// Each split's keys split again among S warps a head, merged
			// in shared memory; the last split merges the splits.
			nsp := s.b.splitPlan(bk, A.kvHeads, s.maxKeys, minChunk)
			s.launch("decode", kernel, cuda.Dim3{X: bk, Y: A.kvHeads, Z: nsp}, 32*g*S, 4*S*g*(hd+2),
				s.att, s.att16, s.lse, s.part, s.q, W.kc, W.vc, rows, A.heads, A.kvHeads, hd, s.scale, minChunk, s.cnt)
		} else if s.b.useSplit() {
			nsp := s.b.splitPlan(bk, A.kvHeads, s.maxKeys, splitMinChunk)
			// The last split of each head merges the partials (no
			// attn_split_combine launch).
			s.launch("decode", "attn_split_merged", cuda.Dim3{X: bk, Y: A.kvHeads, Z: nsp}, 32*g, 0,
				s.att, s.att16, s.lse, s.part, s.q, W.kc, W.vc, rows, A.heads, A.kvHeads, hd, s.scale, splitMinChunk, s.cnt)
		} else {
			shmem := 4 * (32*(hd+1) + 32*hd + g*hd)
			s.launch("attndecode", "attn_decode", cuda.Dim3{X: bk, Y: A.kvHeads}, 32*g, shmem,
				s.att, s.lse, s.q, W.kc, W.vc, rows, A.heads, A.kvHeads, hd, s.scale)
			if s.bf16 {
				s.launch("model", "cast_bf16", gridFor(bk*qd), 256, 0, s.att16, s.att, int64(bk*qd))
			}
		}
		s.gemm(s.o, attOp, W.wo, bk, H, qd)
		if W.bo != 0 {
			s.launch("model", "add_bias_f32", gridFor(bk*H), 256, 0, s.o, W.bo, int64(bk*H), H, cuda.Ptr(0))
		}
		s.norm(bk, s.o, W.postNorm)
		if s.gemv(bk, H) {
			s.launch("decode", "gemv_swiglu_bf16", cuda.Dim3{X: (I + 7) / 8}, 256, 0, s.act, s.xn, W.wg, W.wu, bk, I, H)
		} else {
			gate, up := s.gate, s.up
			if s.skinny(bk, H) && s.b.skinnyAll {
				s.skinnyGemm(s.xn, bk, H, []cuda.Ptr{s.gate, s.up}, []cuda.Ptr{W.wg, W.wu}, []int{I, I})
			} else {
				gate, up = s.gemmPair(s.gate, s.xn, W.wg, W.wu, bk, I, H)
			}
			var a32, a16 cuda.Ptr = s.act, 0
			if s.bf16 {
				a32, a16 = 0, s.act
			}
			name, items, args := swigluLaunch(a32, gate, up, int64(bk*I), a16, 0, 0)
			s.launch("model", name, gridFor(int(items)), 256, 0, args...)
		}
		s.gemm(s.o, s.act, W.wd, bk, H, I)
	}
	s.norm(bk, s.o, s.normW)
	s.headAndSample(bk)
}

// headAndSample queues the LM head over the final norm's rows and the
// sampler.
func (s *cudaStepper) headAndSample(bk int) {
	V, H, in := s.a.vocab, s.a.hidden, s.in
	s.gemm(s.logits, s.xn, s.head, bk, V, H)
	res := s.res
	invT, u := in+cuda.Ptr(s.offInvT()), in+cuda.Ptr(s.offU())
	if ch, nc := s.sampleSplit(bk); nc > 1 {
		s.launch("sample", "sample_split_max", cuda.Dim3{X: nc, Y: bk}, 256, 0, s.spart, s.logits, int64(V), ch)
		s.launch("sample", "sample_split_sum", cuda.Dim3{X: nc, Y: bk}, 256, 0, s.spart, s.logits, int64(V), ch, invT)
		s.launch("sample", "sample_split_pick", cuda.Dim3{X: bk}, 1024, 0, res, res+cuda.Ptr(4*s.maxB), res+cuda.Ptr(8*s.maxB),
			s.spart, s.logits, int64(V), ch, nc, invT, u)
		return
	}
	s.launch("sample", "sample_f32", cuda.Dim3{X: bk}, 1024, 0, res, res+cuda.Ptr(4*s.maxB), res+cuda.Ptr(8*s.maxB),
		s.logits, int64(V), invT, u)
}

// qkvApart is the q, k, v products, then their biases, Qwen3's per-head
// norms, and RoPE with the cache write, as separate launches (large steps,
// q/k-norm models, CUDA.ropeApart).
func (s *cudaStepper) qkvApart(bk int, W *stepLayerW, pos, crow cuda.Ptr) {
	A := s.a
	H, hd := A.hidden, A.headDim
	qd, kvd := A.heads*hd, A.kvHeads*hd
	gridFor := func(n int) cuda.Dim3 { return cuda.Dim3{X: s.b.gridFor(int64(n), 256)} }
	k, v := s.k, s.v
	if s.gemv(bk, H) {
		s.launch("decode", "gemv3_bf16", cuda.Dim3{X: (qd + 2*kvd + 7) / 8}, 256, 0,
			s.q, W.wq, qd, s.k, W.wk, kvd, s.v, W.wv, kvd, s.xn, bk, H)
	} else if s.skinny(bk, H) {
		s.skinnyGemm(s.xn, bk, H, []cuda.Ptr{s.q, s.k, s.v}, []cuda.Ptr{W.wq, W.wk, W.wv}, []int{qd, kvd, kvd})
	} else {
		s.gemm(s.q, s.xn, W.wq, bk, qd, H)
		k, v = s.gemmPair(s.k, s.xn, W.wk, W.wv, bk, kvd, H)
	}
	bq, bkk := W.bq, W.bk
	if A.qkNorm {
		// Qwen3: bias, then each head's norm, then RoPE (as layerForward).
		if bq != 0 {
			s.launch("model", "add_bias_f32", gridFor(bk*qd), 256, 0, s.q, bq, int64(bk*qd), qd, cuda.Ptr(0))
			s.launch("model", "add_bias_f32", gridFor(bk*kvd), 256, 0, k, bkk, int64(bk*kvd), kvd, cuda.Ptr(0))
		}
		bq, bkk = 0, 0
		s.launch("model", "rmsnorm_f32", cuda.Dim3{X: min(bk*A.heads, 65535*4)}, normBlock(hd), 0, s.q, s.rstd, s.q, W.qNorm, bk*A.heads, hd, A.eps, cuda.Ptr(0))
		s.launch("model", "rmsnorm_f32", cuda.Dim3{X: min(bk*A.kvHeads, 65535*4)}, normBlock(hd), 0, k, s.rstd, k, W.kNorm, bk*A.kvHeads, hd, A.eps, cuda.Ptr(0))
	}
	s.launch("decode", "dec_rope_kv", cuda.Dim3{X: bk}, 128, 0, s.q, k, v, bq, bkk, W.bv, W.kc, W.vc, pos, crow,
		s.rope.cos, s.rope.sin, A.heads, A.kvHeads, hd)
}

// sampleSplit is the split sampler's chunk of ids and chunks per row for a
// step of rows rows (sample.cu's sample_split_*): about two blocks per
// multiprocessor in all, chunks of at least 1,024 ids; nc = 1 (sample_f32,
// one block a row) once the rows alone fill the chip.
func (s *cudaStepper) sampleSplit(rows int) (ch, nc int) {
	V := s.a.vocab
	want := min((2*s.b.dev.SMs+rows-1)/rows, (V+1023)/1024)
	if rows >= s.b.dev.SMs || want <= 1 {
		return V, 1
	}
	ch = (V + want - 1) / want
	return ch, (V + ch - 1) / ch
}
