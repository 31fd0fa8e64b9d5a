package model

import (
	"fmt"
	"os"
	"unsafe"

	"github.com/mempo/mempo/lib/cuda"
)

// The layers of a small bf16 decoding step in one launch (decode.cu's
// dec_persist): where a step has one to four rows, its seven launches a
// layer are each a few microseconds of latency (a launch, a memory round
// trip, a reduction) against about ten microseconds of weights a layer at
// the 0.5B shape, so the chain, not the bytes, bounds the step. dec_persist
// runs them as five phases a layer of one grid that stays resident, with a
// grid-wide barrier between phases, each phase the arithmetic of the
// launches it replaces in the same order: the step's bits are those of the
// separate launches (TestCUDADecodeStep holds them to each other).
//
// The barrier is one counter that only grows: a block adds one (a
// release) and waits for the count of the whole grid (an acquire), about
// 0.8 µs on the H200 with 132 blocks (1.9 µs with a count reset by the last
// block and a separate generation word). It needs every block resident at
// once: the grid is at most the
// multiprocessors times what cuOccupancyMaxActiveBlocksPerMultiprocessor
// says one holds (and at most CUDA.persistBlocks a multiprocessor). On a
// device shared with another process that may not hold; a barrier that
// waits past CUDA.persistTimeout gives up, the host sees it with the
// sampled ids and runs the step again with separate launches, and the
// backend keeps to them from then on.
//
// Measured (BENCHMARKS.md, "Decoding: the layers of a small step in one
// launch"), it is not the step's cure: per layer at 0.5B batch 1 the phases
// take 4.8 (norm + q/k/v), 7.3 (attention), 2.6 (output product), 9.2 (norm +
// gate/up) and 6.8 µs (down product) plus five barriers of 0.85 µs, 35 µs
// in all against 7 µs of weights at the bound, as much as the seven
// launches: with one block of 14 warps a
// multiprocessor (its registers allow no second) each phase is a chain of
// dependent memory round trips that the separate launches' thousands of
// warps hid as well.

// persistAuto (CUDA.persistBlocks, MEMPO_CUDA_PERSIST unset) takes
// dec_persist, one block a multiprocessor, for models of at least
// persistAutoHidden hidden values and separate launches below. Measured on
// the H200 (2026-12-02, batch 1, steps alone, the same process; BENCHMARKS.md
// "Decoding: the layers of a small step in one launch"): at the 7B shape
// 4.72 against 4.85 ms a step (2.8% faster, twice, and 3.5% in another
// run), at 0.5B and 1.5B within 2% either way (0.969 and 0.948 against 0.933
// and 0.953 ms at 0.5B).
const (
	persistAuto       = -1
	persistAutoHidden = 3072
)

// persistBlocksFor is the blocks a multiprocessor dec_persist takes for a
// model of hidden values under the setting blocks (persistAuto: by size).
func persistBlocksFor(blocks, hidden int) int {
	if blocks != persistAuto {
		return max(0, blocks)
	}
	if hidden >= persistAutoHidden {
		return 1
	}
	return 0
}

// persistTableWords is DecLayer's size in 8-byte words: wq, wk, wv, wo, wg,
// wu, wd, ln1, ln2, bq, bk, bv, bo, kc, vc.
const persistTableWords = 15

// persistTable uploads the layers' operands in DecLayer's layout to a
// buffer from get.
func (s *cudaStepper) persistTable(get func(int) cuda.Ptr) cuda.Ptr {
	words := make([]uint64, 0, persistTableWords*len(s.layers))
	for _, W := range s.layers {
		for _, p := range []cuda.Ptr{W.wq, W.wk, W.wv, W.wo, W.wg, W.wu, W.wd, W.inNorm, W.postNorm, W.bq, W.bk, W.bv, W.bo, W.kc, W.vc} {
			words = append(words, uint64(p))
		}
	}
	t := get(8 * len(words))
	must(s.b.dev.HtoD(t, unsafe.Pointer(&words[0]), 8*len(words)))
	return t
}

// persist queues dec_persist for the layers of a step of bk rows, or says
// false where the step needs separate launches: fp32 mode, steps over
// gemvMaxRows rows, Qwen3's per-head norms, the variants tests and
// benchmarks ask for, an attention layout without attn_split_sub, a grid
// that cannot be resident.
func (s *cudaStepper) persist(bk int, pos, crow, rows cuda.Ptr) bool {
	b, A := s.b, s.a
	H, I, hd := A.hidden, A.inter, A.headDim
	qd, g := A.heads*hd, A.heads/A.kvHeads
	blocks := persistBlocksFor(b.persistBlocks, H)
	if blocks <= 0 || s.tab == 0 || !s.gemv(bk, H) || !s.gemv(bk, qd) || !s.gemv(bk, I) || A.qkNorm || b.ropeApart || !b.useSplit() {
		return false
	}
	_, S, minChunk, ok := b.attnSubWays(bk, A.kvHeads, g, hd)
	if !ok {
		return false
	}
	var kernel string
	switch {
	case S == 2 && hd <= 64:
		kernel = "dec_persist_2_64"
	case S == 2:
		kernel = "dec_persist_2_128"
	case S == 1:
		kernel = "dec_persist_1_256"
	default:
		return false
	}
	block := 32 * g * S
	attnFloats := (S*g*(hd+2) + 3) / 4 * 4
	shmem := 4*attnFloats + 2*bk*max(H, qd, I)
	f := b.fn("decode", kernel)
	if shmem > 48<<10 {
		if b.dev.SetMaxDynamicShared(f, shmem) != nil {
			return false
		}
	}
	occ, err := b.dev.ResidentBlocks(f, block, shmem)
	if err != nil || occ < 1 {
		return false
	}
	grid := b.dev.SMs * min(occ, blocks)
	if b.persistOversize > 1 {
		grid = b.dev.SMs * occ * b.persistOversize // more than is resident at once (tests)
	}
	nsp := b.splitPlan(bk, A.kvHeads, s.maxKeys, minChunk)
	s.launch("decode", kernel, cuda.Dim3{X: grid}, block, shmem,
		s.tab, 0, persistPhases*len(s.layers), s.x, s.q, s.att, s.att16, s.lse, s.part, s.cnt, s.act, pos, crow, rows,
		s.rope.cos, s.rope.sin, bk, H, I, A.heads, A.kvHeads, hd, A.eps, s.scale, nsp, minChunk, s.bar,
		uint64(b.persistTimeout.Nanoseconds()), b.persistTrace)
	b.persistSteps++
	b.persistGrid, b.persistPhaseCount = grid, persistPhases*len(s.layers)
	return true
}

// persistPhases is dec_persist's phases a layer.
const persistPhases = 5

// persistTimedOut handles a step whose dec_persist barrier gave up: the
// backend turns dec_persist off, the barrier and attention counters are
// reset, the graphs (which hold the launch) dropped, and the caller runs
// the step again (its inputs are still in place; it rewrites the same
// cache rows).
func (s *cudaStepper) persistTimedOut(bk int) {
	b := s.b
	b.persistErr = fmt.Errorf("model: the decoding step's persistent launch (dec_persist, %d rows) waited past %v at a grid barrier: its blocks were not all resident (another process on the GPU?); steps of few rows now run as separate launches (MEMPO_CUDA_PERSIST=0 does so from the start)", bk, b.persistTimeout)
	fmt.Fprintln(os.Stderr, "mempo:", b.persistErr)
	b.persistBlocks = 0
	must(b.dev.Memset32(s.bar, 0, 4))
	must(b.dev.Memset32(s.cnt, 0, s.maxB*s.a.heads))
	for _, g := range s.graphs {
		g.Destroy()
	}
	s.graphs, s.seen = map[int]*cuda.Graph{}, map[int]int{}
}
