package model

import (
	"fmt"
	"slices"

	"github.com/mempo/mempo/lib/cuda"
)

// Tensor-core attention for long sequences in bf16 mode
// (lib/cuda/kernels/attngemm.cu explains the layout). Per sequence and chunk
// of query rows, the forward is
//
//	S = scale·Q·Kᵀ   (bf16 GEMM, fp32 out)  → P = softmax(S) in bf16, lse
//	O = P·V          (bf16 GEMM, fp32 out)
//
// and the backward recomputes S and P from lse, then
//
//	dV += Pᵀ·dO, dP = dO·Vᵀ, dS = scale·P∘(dP − D), dQ = dS·K, dK += dSᵀ·Q.
//
// Each product is one strided-batched GEMM over the kv heads: the g query
// heads that share a kv head are packed into one matrix of n·g rows. Rows
// in a chunk see keys up to the chunk's end, so causal masking wastes at
// most a chunk's worth of columns.

// attnGemmMinRows is the shortest sequence (query rows) that takes the GEMM
// path in bf16 mode; shorter ones (and decoding steps) stay with the
// flash-style kernels, whose single launch covers many sequences.
const attnGemmMinRows = 128

// attnGemmChunkBytes bounds a chunk's score buffers (S, dP in fp32, P in
// bf16) so that long contexts take more chunks instead of more memory.
const attnGemmChunkBytes = 1 << 30

// useAttnGemm says whether s takes the GEMM path.
func (b *CUDA) useAttnGemm(s AttnSeq) bool {
	return b.bf16 && !b.attnKernelsOnly && s.N >= b.attnGemmMin()
}

func (b *CUDA) attnGemmMin() int {
	if b.attnGemmRows > 0 {
		return b.attnGemmRows
	}
	return attnGemmMinRows
}

// attnDecodeMaxRows is the most query rows of a sequence that the decode
// kernel (attndecode.cu) takes in the forward: decoding steps, not prompts.
const attnDecodeMaxRows = 4

// decodeRowInts is the ints of one query row in the rows array that
// attndecode.cu's and decode.cu's attention kernels read: (query row, key
// row K, keys, prefix row P, prefix keys PN), key j at row P+j below PN and
// K+j from it (AttnSeq.keyRow; decode.cu's dec_row).
const decodeRowInts = 5

// attnSplit is where the sequences of one attention call go.
type attnSplit struct {
	mma  []AttnSeq // tensor-core flash kernels (attnmma.cu)
	gemm []AttnSeq // cuBLAS products (this file)
	dec  []AttnSeq // the decode kernel (attndecode.cu), forward only
	kern []AttnSeq // the fp32 flash-style kernels (attention2.cu)
	// Sequences that read a shared prefix (AttnSeq.PN) where neither the
	// decode kernel nor attnmma.cu (whose packed bf16 keys gather it)
	// takes them: their keys copied into one run first (attentionPacked).
	packed []AttnSeq
}

// useAttnMMA says whether bf16 mode's flash kernels on the tensor cores
// take this head shape (MEMPO_CUDA_ATTN=gemm turns them off).
func (b *CUDA) useAttnMMA(sh AttnShape) bool {
	return b.bf16 && !b.attnKernelsOnly && !b.attnNoMMA && (sh.HeadDim == 64 || sh.HeadDim == 128)
}

// splitAttn sorts the sequences of a call by kernel; decode is true in the
// forward, where decoding steps take the decode kernel.
func (b *CUDA) splitAttn(seqs []AttnSeq, sh AttnShape, decode bool) attnSplit {
	var sp attnSplit
	canDecode := decode && !b.attnKernelsOnly && sh.Heads/sh.KVHeads <= 16 && sh.HeadDim <= 256
	mma := b.useAttnMMA(sh)
	for _, s := range seqs {
		switch {
		case s.N == 0:
		case canDecode && s.N <= attnDecodeMaxRows:
			sp.dec = append(sp.dec, s)
		case mma:
			sp.mma = append(sp.mma, s)
		case s.PN > 0:
			sp.packed = append(sp.packed, s)
		case b.useAttnGemm(s):
			sp.gemm = append(sp.gemm, s)
		default:
			sp.kern = append(sp.kern, s)
		}
	}
	return sp
}

// The tiles of attnmma.cu: mmaTile keys a key tile (and query rows a tile
// of dQ, keys a tile of dK/dV), mmaFwdRows query rows a tile of the
// forward.
const (
	mmaTile    = 64
	mmaFwdRows = 128
)

// mmaKVQueries is the queries of a query tile of attnmma.cu's dK/dV at head
// dim hd (the kernels' QT: 64 at head dim 128 measured 7% slower, at 254
// registers).
func mmaKVQueries(hd int) int {
	if hd == 128 {
		return 32
	}
	return 64
}

// bf16Copy is a temporary bf16 rounding of some rows of a tensor.
type bf16Copy struct {
	p    cuda.Ptr
	size int
}

// castAll rounds the whole of t to bf16 (the caller frees the copy), or
// returns the rounding its buffer keeps (keptBF16; size 0: not freed).
func (b *CUDA) castAll(t *cudaTensor) bf16Copy {
	if p := t.keptBF16(); p != 0 {
		return bf16Copy{p: p}
	}
	p, size := b.castBF16(t)
	return bf16Copy{p, size}
}

// castRuns rounds runs of rows of t to bf16 into a packed copy (run i's
// rows at its dst), the row lists uploaded under key.
func (b *CUDA) castRuns(t *cudaTensor, runs []rowCopy, key string) bf16Copy {
	rp, sp, total := b.runLists(key, runs)
	p, size := b.rawAlloc(2*total*t.c + 16)
	if total > 0 {
		b.launch("model", "cast_runs_bf16", b.runGrid(total), 256, 0, p, t.ptr(), rp, sp, len(runs), int64(total), t.c)
	}
	return bf16Copy{p, size}
}

// queryRows is the number of query rows of seqs.
func queryRows(seqs []AttnSeq) int {
	n := 0
	for _, s := range seqs {
		n += s.N
	}
	return n
}

func (b *CUDA) freeCopies(cs ...bf16Copy) {
	for _, c := range cs {
		if c.size > 0 {
			b.rawFree(c.p, c.size, false)
		}
	}
}

// attentionPacked is Attention for sequences that read a shared prefix, on
// kernels that do not take one: each sequence's keys and values are copied
// into one run of fresh tensors (keyRuns) and attended there.
func (b *CUDA) attentionPacked(O, LSE, Q, K, V *cudaTensor, seqs []AttnSeq, sh AttnShape) {
	packed, runs, rows := packKeys(seqs)
	k2, v2 := b.Empty(rows, K.c), b.Empty(rows, V.c)
	defer b.Free(k2)
	defer b.Free(v2)
	for _, r := range runs {
		b.Copy(b.View(k2, r.dst, r.n), b.View(K, r.src, r.n))
		b.Copy(b.View(v2, r.dst, r.n), b.View(V, r.src, r.n))
	}
	b.Attention(O, LSE, Q, k2, v2, packed, sh)
}

// packKeys lays seqs' keys out back to back in rows of their own: the
// sequences as they read them there (no prefix), the runs that copy them
// there (keyRuns), and the rows in all.
func packKeys(seqs []AttnSeq) (packed []AttnSeq, runs []rowCopy, rows int) {
	packed = make([]AttnSeq, len(seqs))
	for i, s := range seqs {
		packed[i] = AttnSeq{Q: s.Q, N: s.N, K: rows, Past: s.Past}
		runs = append(runs, keyRuns(s, rows)...)
		rows += s.Past + s.N
	}
	return packed, runs, rows
}

// attentionMMA is the forward of attnmma.cu for seqs. The keys and values a
// sequence reads (rows [K, K+Past+N), a slice of a KV cache when decoding;
// with a shared prefix, keyRuns) are rounded into a packed copy, and the
// sequence table points into it.
func (b *CUDA) attentionMMA(O, LSE, Q, K, V *cudaTensor, seqs []AttnSeq, sh AttnShape) {
	packed, runs, _ := packKeys(seqs)
	q16 := b.castAll(Q)
	k16, v16 := b.castRuns(K, runs, "mma-kv"), b.castRuns(V, runs, "mma-kv")
	defer b.freeCopies(q16, k16, v16)
	hd := sh.HeadDim
	tiles, st, n := b.attnWork(packed, mmaFwdRows, "mma-fwd")
	shmem := 2 * (mmaFwdRows + 4*mmaTile) * (hd + 8)
	// The output's bf16 rounding (for the o_proj product) is only complete
	// when these sequences write every row of O.
	var o16 cuda.Ptr
	if queryRows(seqs) == O.r {
		o16 = b.dual(O)
	}
	b.launch2("attnmma", fmt.Sprintf("attn_mma_fwd_%d", hd), cuda.Dim3{X: n, Y: sh.Heads}, 128, shmem,
		O.ptr(), o16, LSE.ptr(), q16.p, k16.p, v16.p, tiles, st, sh.Heads, sh.KVHeads, sh.Scale)
	b.dualDone(O, o16)
}

// attentionMMABackward is the backward of attnmma.cu for seqs (Past 0): dQ
// by query tiles; dK and dV by key tiles, the heaviest first, each block
// summing every head of its group (dkvHeadsPerBlock), or with the heads of a
// group split over blocks that add up with atomics, the rows zeroed first.
//
// With rope, the dQ kernel stores dQ rotated back by its rows' RoPE angles
// (RoPE's backward) and, when these sequences cover every row of DQ, its
// bf16 rounding.
func (b *CUDA) attentionMMABackward(DQ, DK, DV, DO, Q, K, V, LSE, D *cudaTensor, seqs []AttnSeq, sh AttnShape, rope *ropeArgs) {
	kvd := sh.KVHeads * sh.HeadDim
	ktv, rows := dkvTiles(seqs)
	ktn := len(rows)
	g := sh.Heads / sh.KVHeads
	hper := dkvHeadsPerBlock(rows, sh.KVHeads, g, b.sms)
	if hper < g {
		for _, s := range seqs {
			must(b.ops.Memset32(DK.ptr()+cuda.Ptr(4*s.K*kvd), 0, s.N*kvd))
			must(b.ops.Memset32(DV.ptr()+cuda.Ptr(4*s.K*kvd), 0, s.N*kvd))
		}
	}
	q16, do16, k16, v16 := b.castAll(Q), b.castAll(DO), b.castAll(K), b.castAll(V)
	defer b.freeCopies(q16, do16, k16, v16)
	tiles, st, n := b.attnWork(seqs, mmaTile, "mma")
	hd := sh.HeadDim
	lq := hd + 8
	var pos, cs, sn, dq16 cuda.Ptr
	if rope != nil {
		pos, cs, sn = rope.pos, rope.tab.cos, rope.tab.sin
		if queryRows(seqs) == DQ.r {
			dq16 = b.dual(DQ)
		}
	}
	b.launch2("attnmma", fmt.Sprintf("attn_mma_bwd_dq_%d", hd), cuda.Dim3{X: n, Y: sh.Heads}, 128, 2*6*mmaTile*lq,
		DQ.ptr(), do16.p, q16.p, k16.p, v16.p, LSE.ptr(), D.ptr(), tiles, st, sh.Heads, sh.KVHeads, sh.Scale, pos, cs, sn, dq16)
	b.dualDone(DQ, dq16)
	qt := mmaKVQueries(hd)
	shk := 2*(2*mmaTile*lq+4*qt*lq) + 16*qt
	kt := b.uploadIntsMemo("mma-dkv-tiles", ktv)
	b.launch2("attnmma", fmt.Sprintf("attn_mma_bwd_dkv_%d", hd), cuda.Dim3{X: ktn, Y: sh.KVHeads, Z: g / hper}, 128, shk,
		DK.ptr(), DV.ptr(), do16.p, q16.p, k16.p, v16.p, LSE.ptr(), D.ptr(), kt, st, sh.Heads, sh.KVHeads, sh.Scale, hper)
}

// dkvTiles is the dK/dV kernel's tile list: attnLists' key tiles (sequence,
// first key) ordered by the query rows each has to visit (rows, in the same
// order), most first, so that the longest blocks start first and the short
// ones fill the tail.
func dkvTiles(seqs []AttnSeq) (tiles, rows []int) {
	tv, _ := attnLists(seqs, mmaTile)
	n := len(tv) / 2
	idx := make([]int, n)
	for i := range idx {
		idx[i] = i
	}
	rest := func(i int) int { return seqs[tv[2*i]].N - tv[2*i+1] }
	slices.SortStableFunc(idx, func(a, b int) int { return rest(b) - rest(a) })
	tiles, rows = make([]int, 0, len(tv)), make([]int, 0, n)
	for _, i := range idx {
		tiles = append(tiles, tv[2*i], tv[2*i+1])
		rows = append(rows, rest(i))
	}
	return tiles, rows
}

// dkvHeadsPerBlock is how many query heads of a group one dK/dV block takes:
// the whole group g (the block sums them in registers: no atomics, no
// zeroing) when the longest block, rows·g, is not over a tenth above the
// mean work of the device's block slots (two a multiprocessor, as the
// kernels' registers allow); else one, so that a call of few or uneven
// tiles still spreads over the device. rows holds the query rows each key
// tile visits (its sequence's N − first key), once per kv head.
func dkvHeadsPerBlock(rows []int, kvheads, g, sms int) int {
	total, longest := 0, 0
	for _, r := range rows {
		total += r
		longest = max(longest, r)
	}
	total *= kvheads * g
	if slots := 2 * max(sms, 1); 10*longest*g*slots <= 11*total {
		return g
	}
	return 1
}

// attentionDecode runs the decode kernel: one block per query row and kv
// head.
func (b *CUDA) attentionDecode(O, LSE, Q, K, V *cudaTensor, seqs []AttnSeq, sh AttnShape) {
	var rows []int
	for _, s := range seqs {
		for i := 0; i < s.N; i++ {
			rows = append(rows, s.Q+i, s.K, s.Past+i+1, s.P, s.PN)
		}
	}
	g, hd := sh.Heads/sh.KVHeads, sh.HeadDim
	shmem := 4 * (32*(hd+1) + 32*hd + g*hd)
	b.launch2("attndecode", "attn_decode", cuda.Dim3{X: len(rows) / decodeRowInts, Y: sh.KVHeads}, 32*g, shmem,
		O.ptr(), LSE.ptr(), Q.ptr(), K.ptr(), V.ptr(), b.uploadIntsMemo("attn-decode", rows), sh.Heads, sh.KVHeads, hd, sh.Scale)
}

// attnChunk is the query rows per chunk for a sequence of n query rows and
// up to keys keys.
func (b *CUDA) attnChunk(n, keys, heads int) int {
	c := attnGemmChunkBytes / (10 * heads * max(keys, 1))
	c = max(16, min(512, c))
	if b.attnGemmChunk > 0 {
		c = b.attnGemmChunk
	}
	return min(c, n)
}

func round8(n int) int { return (n + 7) &^ 7 }

// attnScratch holds a call's device buffers, sized for its largest chunk.
type attnScratch struct {
	b                *CUDA
	bufs             []cuda.Ptr
	sizes            []int
	qp, dop          cuda.Ptr // packed bf16 q (and dO)
	kb, vb           cuda.Ptr // bf16 keys and values of the sequence
	s, dp            cuda.Ptr // fp32 scores (and dP)
	p                cuda.Ptr // bf16 probabilities (and dS)
	op               cuda.Ptr // fp32 packed output (O or dQ)
	pack, keys, cols int
}

func (b *CUDA) newAttnScratch(seqs []AttnSeq, sh AttnShape, backward bool) *attnScratch {
	maxRows, maxKeys, maxS := 0, 0, 0
	for _, s := range seqs {
		keys := s.Past + s.N
		c := b.attnChunk(s.N, keys, sh.Heads)
		maxRows = max(maxRows, c)
		maxKeys = max(maxKeys, keys)
		maxS = max(maxS, sh.Heads*c*round8(keys))
	}
	sc := &attnScratch{b: b}
	get := func(bytes int) cuda.Ptr {
		p, size := b.rawAlloc(max(bytes, 16) + 16)
		sc.bufs, sc.sizes = append(sc.bufs, p), append(sc.sizes, size)
		return p
	}
	qd, kvd := sh.Heads*sh.HeadDim, sh.KVHeads*sh.HeadDim
	sc.qp = get(2 * maxRows * qd)
	sc.kb = get(2 * maxKeys * kvd)
	sc.vb = get(2 * maxKeys * kvd)
	sc.s = get(4 * maxS)
	sc.p = get(2 * maxS)
	sc.op = get(4 * maxRows * qd)
	if backward {
		sc.dop = get(2 * maxRows * qd)
		sc.dp = get(4 * maxS)
	}
	return sc
}

// free queues the buffers' release after the work that uses them.
func (sc *attnScratch) free() {
	for i, p := range sc.bufs {
		sc.b.rawFree(p, sc.sizes[i], false)
	}
}

func (b *CUDA) attgLaunch(name string, n int64, args ...any) {
	b.launch("attngemm", name, b.gridFor(n, 256), 256, 0, args...)
}

// castKV puts the sequence's keys and values (rows [s.K, s.K+keys)) in the
// scratch's bf16 buffers.
func (b *CUDA) castKV(sc *attnScratch, K, V *cudaTensor, s AttnSeq, keys int) {
	n := int64(keys) * int64(K.c)
	b.launch("model", "cast_bf16", b.gridFor(n, 256), 256, 0, sc.kb, K.ptr()+cuda.Ptr(4*s.K*K.c), n)
	b.launch("model", "cast_bf16", b.gridFor(n, 256), 256, 0, sc.vb, V.ptr()+cuda.Ptr(4*s.K*V.c), n)
}

// scores computes S = scale·Qp·Kbᵀ for a chunk of n query rows and keys
// keys: one GEMM per kv head, batched.
func (b *CUDA) scores(sc *attnScratch, qp cuda.Ptr, n, keys, ldS int, sh AttnShape) {
	g, hd := sh.Heads/sh.KVHeads, sh.HeadDim
	defer b.timed("attn_gemm")()
	must(b.ops.GemmStridedBatched(false, true, n*g, keys, hd, sh.Scale,
		qp, cuda.BF16, hd, int64(n*g*hd),
		sc.kb, cuda.BF16, sh.KVHeads*hd, int64(hd),
		0, sc.s, cuda.F32, ldS, int64(n*g*ldS), sh.KVHeads))
}

// attentionGemm is the forward of the GEMM path for seqs.
func (b *CUDA) attentionGemm(O, LSE, Q, K, V *cudaTensor, seqs []AttnSeq, sh AttnShape) {
	sc := b.newAttnScratch(seqs, sh, false)
	defer sc.free()
	g, hd := sh.Heads/sh.KVHeads, sh.HeadDim
	gw := g * hd
	for _, s := range seqs {
		b.castKV(sc, K, V, s, s.Past+s.N)
		chunk := b.attnChunk(s.N, s.Past+s.N, sh.Heads)
		for c0 := 0; c0 < s.N; c0 += chunk {
			n := min(chunk, s.N-c0)
			keys := s.Past + c0 + n
			ldS := round8(keys)
			qrow := s.Q + c0
			b.attgLaunch("attg_pack", int64(n)*int64(Q.c), sc.qp, Q.ptr()+cuda.Ptr(4*qrow*Q.c), n, Q.c, sh.KVHeads, gw)
			b.scores(sc, sc.qp, n, keys, ldS, sh)
			b.launch("attngemm", "attg_softmax", sh.Heads*n, 256, 0,
				sc.p, LSE.ptr(), sc.s, n, g, keys, ldS, s.Past+c0, qrow, sh.Heads)
			func() {
				defer b.timed("attn_gemm")()
				must(b.ops.GemmStridedBatched(false, false, n*g, hd, keys, 1,
					sc.p, cuda.BF16, ldS, int64(n*g*ldS),
					sc.vb, cuda.BF16, sh.KVHeads*hd, int64(hd),
					0, sc.op, cuda.F32, hd, int64(n*g*hd), sh.KVHeads))
			}()
			b.attgLaunch("attg_unpack", int64(n)*int64(O.c), O.ptr()+cuda.Ptr(4*qrow*O.c), sc.op, n, O.c, sh.KVHeads, gw)
		}
	}
}

// attentionGemmBackward is the backward of the GEMM path for seqs (Past is
// 0); D holds Σ dO·O per row and head.
func (b *CUDA) attentionGemmBackward(DQ, DK, DV, DO, Q, K, V, LSE, D *cudaTensor, seqs []AttnSeq, sh AttnShape) {
	sc := b.newAttnScratch(seqs, sh, true)
	defer sc.free()
	g, hd := sh.Heads/sh.KVHeads, sh.HeadDim
	gw, kvd := g*hd, sh.KVHeads*hd
	for _, s := range seqs {
		if s.Past != 0 {
			panic("model: AttentionBackward with a KV cache")
		}
		b.castKV(sc, K, V, s, s.N)
		// dK and dV accumulate over the chunks: start from zero.
		must(b.ops.Memset32(DK.ptr()+cuda.Ptr(4*s.K*kvd), 0, s.N*kvd))
		must(b.ops.Memset32(DV.ptr()+cuda.Ptr(4*s.K*kvd), 0, s.N*kvd))
		dk, dv := DK.ptr()+cuda.Ptr(4*s.K*kvd), DV.ptr()+cuda.Ptr(4*s.K*kvd)
		chunk := b.attnChunk(s.N, s.N, sh.Heads)
		for c0 := 0; c0 < s.N; c0 += chunk {
			n := min(chunk, s.N-c0)
			keys := c0 + n
			ldS := round8(keys)
			qrow := s.Q + c0
			ng := n * g
			b.attgLaunch("attg_pack", int64(n)*int64(Q.c), sc.qp, Q.ptr()+cuda.Ptr(4*qrow*Q.c), n, Q.c, sh.KVHeads, gw)
			b.attgLaunch("attg_pack", int64(n)*int64(DO.c), sc.dop, DO.ptr()+cuda.Ptr(4*qrow*DO.c), n, DO.c, sh.KVHeads, gw)
			b.scores(sc, sc.qp, n, keys, ldS, sh)
			rows := sh.Heads * n
			b.launch("attngemm", "attg_probs", rows, 256, 0, sc.p, LSE.ptr(), sc.s, n, g, keys, ldS, c0, qrow, sh.Heads)
			gemm := func(ta, tb bool, m, nn, k int, a cuda.Ptr, lda int, sa int64, bb cuda.Ptr, ldb int, sb int64, beta float32, c cuda.Ptr, ct cuda.DataType, ldc int, scc int64) {
				defer b.timed("attn_gemm")()
				must(b.ops.GemmStridedBatched(ta, tb, m, nn, k, 1, a, cuda.BF16, lda, sa, bb, cuda.BF16, ldb, sb, beta, c, ct, ldc, scc, sh.KVHeads))
			}
			// dV += Pᵀ·dO
			gemm(true, false, keys, hd, ng, sc.p, ldS, int64(ng*ldS), sc.dop, hd, int64(ng*hd), 1, dv, cuda.F32, kvd, int64(hd))
			// dP = dO·Vᵀ
			gemm(false, true, ng, keys, hd, sc.dop, hd, int64(ng*hd), sc.vb, kvd, int64(hd), 0, sc.dp, cuda.F32, ldS, int64(ng*ldS))
			b.launch("attngemm", "attg_dsoftmax", rows, 256, 0, sc.p, sc.s, sc.dp, LSE.ptr(), D.ptr(), n, g, keys, ldS, c0, qrow, sh.Heads, sh.Scale)
			// dQ = dS·K (packed), then unpacked into its rows
			gemm(false, false, ng, hd, keys, sc.p, ldS, int64(ng*ldS), sc.kb, kvd, int64(hd), 0, sc.op, cuda.F32, hd, int64(ng*hd))
			b.attgLaunch("attg_unpack", int64(n)*int64(DQ.c), DQ.ptr()+cuda.Ptr(4*qrow*DQ.c), sc.op, n, DQ.c, sh.KVHeads, gw)
			// dK += dSᵀ·Q
			gemm(true, false, keys, hd, ng, sc.p, ldS, int64(ng*ldS), sc.qp, hd, int64(ng*hd), 1, dk, cuda.F32, kvd, int64(hd))
		}
	}
}
