package model

import (
	"fmt"
	"math"
	"runtime"
	"slices"
	"testing"
	"time"
	"unsafe"

	"github.com/mempo/mempo/lib/cuda"
)

// TestStepBucket: rows are padded to powers of two.
func TestStepBucket(t *testing.T) {
	for n, want := range map[int]int{1: 1, 2: 2, 3: 4, 6: 8, 32: 32, 33: 64, 256: 256, 300: 512} {
		if got := stepBucket(n); got != want {
			t.Errorf("stepBucket(%d) = %d, want %d", n, got, want)
		}
	}
}

// TestCUDADecodeStep holds the CUDA decoding step (cuda_decode.go) to the
// model's op-by-op path on every parity fixture, in fp32 and bf16 mode:
// greedy and sampled continuations of batches whose rows finish at
// different steps (so the step runs several buckets, padded rows included),
// with the step run directly and replayed from CUDA graphs (with launches
// overlapped and fused, and not), with split-key attention (attn_split_sub,
// attn_split_group, attn_split_merged) and with the per-row decode kernel
// (useSplit), with skinny.cu's products (q, k and v;
// all) and with cuBLAS's (gate and up, k and v, batched in pairs and
// not). Graph replays must equal the direct step
// bit for bit (the same launches), overlapped and fused or not; both must give
// the op-by-op path's tokens, and log-probs within 1e-4 (fp32) or 2e-2
// (bf16): the step's attention splits the keys and its small-batch products
// are its own kernel, so sums run in another order, and a padded bucket's
// GEMMs have other shapes, so cuBLAS may sum in another order too.
func TestCUDADecodeStep(t *testing.T) {
	cudaOrSkip(t)
	for _, name := range fixtureCases {
		for _, bf16 := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/bf16=%v", name, bf16), func(t *testing.T) {
				be, err := NewCUDA()
				if err != nil {
					t.Fatal(err)
				}
				be.SetBF16(bf16)
				m := loadFixtureOn(t, name, be)
				g := openGolden(t, name)
				p0, p1, p2 := g.ids(t, "greedy.prompt"), g.ids(t, "ids.0"), g.ids(t, "ids.1")
				reqs := []Request{{Prompt: p0, N: 1, Seed: 1}, {Prompt: p1[:len(p1)/2+1], N: 2, Seed: 2}, {Prompt: p2, N: 3, Seed: 3}}
				run := func(mode string, opts GenerateOptions) []*Generation {
					be.decode = mode
					out, err := m.Generate(reqs, opts)
					if err != nil {
						t.Fatal(err)
					}
					return out
				}
				greedy := GenerateOptions{MaxTokens: 20, IgnoreEOS: true}
				ref := run(decodeGeneric, greedy)
				// An EOS id that one row emits early, so rows end at different
				// steps and the active rows move to smaller buckets.
				eos := ref[1].IDs[3]
				cases := []struct {
					what string
					opts GenerateOptions
				}{
					{"greedy", greedy},
					{"greedy with EOS", GenerateOptions{MaxTokens: 20, EOS: []int{eos}}},
					{"temperature", GenerateOptions{MaxTokens: 16, Sampling: SampleParams{Temperature: 0.9}}},
					{"top-k", GenerateOptions{MaxTokens: 12, Sampling: SampleParams{Temperature: 0.8, TopK: 5}}},
				}
				tol := 1e-4
				if bf16 {
					tol = 2e-2
				}
				for _, c := range cases {
					gen := run(decodeGeneric, c.opts)
					direct := run(decodeDirect, c.opts)
					replays := be.graphReplays
					graph := run(decodeGraph, c.opts)
					if be.graphErr != nil {
						t.Fatalf("%s: graph capture failed: %v", c.what, be.graphErr)
					}
					if be.graphReplays == replays {
						t.Errorf("%s: no graph was replayed", c.what)
					}
					// The graph without overlapped launches (PDL) and with
					// q/k/v and RoPE apart must give the same bits: overlap
					// changes when kernels start, and the fused kernel sums
					// as the ones it replaces.
					overlap := be.overlap
					be.overlap, be.ropeApart = false, true
					serial := run(decodeGraph, c.opts)
					be.overlap, be.ropeApart = overlap, false
					for i := range graph {
						if !slices.Equal(graph[i].IDs, serial[i].IDs) || !equalF32(graph[i].LogProbs, serial[i].LogProbs) ||
							!equalF32(graph[i].SampleLogProbs, serial[i].SampleLogProbs) {
							t.Errorf("%s row %d: overlapped (%v), fused launches differ from serial, separate ones\n fused    %v %v\n separate %v %v",
								c.what, i, overlap, graph[i].IDs, graph[i].LogProbs, serial[i].IDs, serial[i].LogProbs)
						}
					}
					// The same with the per-row attention kernel instead of
					// split keys, with attn_split_group at every step of more
					// than 4 rows (by default only where rows × kv heads fill
					// the chip twice), and with split keys but no in-block
					// split (attn_split_merged).
					be.perRowAttn = true
					perRow := run(decodeGraph, c.opts)
					be.perRowAttn, be.groupFrom = false, 1
					group := run(decodeGraph, c.opts)
					be.groupFrom = 0
					be.attnNoSub = true
					merged := run(decodeGraph, c.opts)
					be.attnNoSub, be.skinnyOff = false, true
					cublas := run(decodeGraph, c.opts)
					be.skinnyOff, be.pairOff = true, true
					apart := run(decodeGraph, c.opts)
					be.skinnyOff, be.pairOff, be.skinnyAll = false, false, true
					skinnyAll := run(decodeGraph, c.opts)
					be.skinnyAll = false
					var worst float64
					for i := range gen {
						for _, v := range []struct {
							what string
							gen  *Generation
						}{{"per-row attention", perRow[i]}, {"attn_split_group", group[i]}, {"attn_split_merged", merged[i]}, {"cuBLAS products", cublas[i]}, {"cuBLAS products, pairs apart", apart[i]}, {"skinny.cu products", skinnyAll[i]}} {
							if !slices.Equal(v.gen.IDs, gen[i].IDs) || v.gen.Finish != gen[i].Finish {
								t.Errorf("%s row %d, %s: tokens differ from the op-by-op path\n graph   %v (%s)\n generic %v (%s)",
									c.what, i, v.what, v.gen.IDs, v.gen.Finish, gen[i].IDs, gen[i].Finish)
							} else {
								for j := range gen[i].LogProbs {
									worst = math.Max(worst, math.Abs(float64(v.gen.LogProbs[j]-gen[i].LogProbs[j])))
								}
							}
						}
						if !slices.Equal(graph[i].IDs, direct[i].IDs) || !equalF32(graph[i].LogProbs, direct[i].LogProbs) ||
							!equalF32(graph[i].SampleLogProbs, direct[i].SampleLogProbs) || graph[i].Finish != direct[i].Finish {
							t.Errorf("%s row %d: graph replay differs from the direct step\n graph  %v %v\n direct %v %v",
								c.what, i, graph[i].IDs, graph[i].LogProbs, direct[i].IDs, direct[i].LogProbs)
						}
						if !slices.Equal(graph[i].IDs, gen[i].IDs) || graph[i].Finish != gen[i].Finish {
							t.Errorf("%s row %d: tokens differ from the op-by-op path\n graph   %v (%s)\n generic %v (%s)",
								c.what, i, graph[i].IDs, graph[i].Finish, gen[i].IDs, gen[i].Finish)
							continue
						}
						for j := range gen[i].LogProbs {
							worst = math.Max(worst, math.Abs(float64(graph[i].LogProbs[j]-gen[i].LogProbs[j])))
							worst = math.Max(worst, math.Abs(float64(graph[i].SampleLogProbs[j]-gen[i].SampleLogProbs[j])))
						}
					}
					t.Logf("%s: log-probs within %.3g of the op-by-op path", c.what, worst)
					if worst > tol {
						t.Errorf("%s: log-probs differ from the op-by-op path by %.3g > %.3g", c.what, worst, tol)
					}
				}
				// Steps of at most 4 rows (in bf16 mode the GEMV kernels;
				// the split sampler) against the op-by-op path, and the
				// batch composition: the request decodes alone as it does
				// beside the others, greedy and sampled.
				for _, opts := range []GenerateOptions{greedy, {MaxTokens: 16, Sampling: SampleParams{Temperature: 0.9}}} {
					be.decode = decodeGraph
					alone, err := m.Generate(reqs[1:2], opts)
					if err != nil {
						t.Fatal(err)
					}
					be.decode = decodeGeneric
					aloneGen, err := m.Generate(reqs[1:2], opts)
					if err != nil {
						t.Fatal(err)
					}
					all := run(decodeGraph, opts)
					var worst float64
					for i := range alone {
						if !slices.Equal(alone[i].IDs, aloneGen[i].IDs) {
							t.Errorf("T=%g alone row %d: graph %v, op-by-op %v", opts.Sampling.Temperature, i, alone[i].IDs, aloneGen[i].IDs)
						}
						if !slices.Equal(alone[i].IDs, all[1+i].IDs) {
							t.Errorf("T=%g row %d: alone %v, in the batch %v", opts.Sampling.Temperature, i, alone[i].IDs, all[1+i].IDs)
							continue
						}
						for j := range alone[i].LogProbs {
							worst = math.Max(worst, math.Abs(float64(alone[i].LogProbs[j]-aloneGen[i].LogProbs[j])))
							worst = math.Max(worst, math.Abs(float64(alone[i].LogProbs[j]-all[1+i].LogProbs[j])))
						}
					}
					t.Logf("T=%g small steps: log-probs within %.3g of the op-by-op path and the batch", opts.Sampling.Temperature, worst)
					if worst > tol {
						t.Errorf("T=%g small steps: log-probs differ by %.3g > %.3g", opts.Sampling.Temperature, worst, tol)
					}
				}
				if bf16 {
					persistAgainstSeparate(t, be, m, reqs[1:2], greedy)
				}
				// A frozen base (LoadFrozen: in bf16 mode its matrices are
				// bf16 only) decodes through the step as the full model does.
				fm, err := LoadFrozen(fixtureDir(name), be)
				if err != nil {
					t.Fatal(err)
				}
				be.decode = decodeGraph
				frozen, err := fm.Generate(reqs, greedy)
				if err != nil {
					t.Fatal(err)
				}
				graph := run(decodeGraph, greedy)
				for i := range graph {
					if !slices.Equal(frozen[i].IDs, graph[i].IDs) || !equalF32(frozen[i].LogProbs, graph[i].LogProbs) {
						t.Errorf("frozen base row %d: %v, full model %v", i, frozen[i].IDs, graph[i].IDs)
					}
				}
			})
		}
	}
}

// TestPersistBlocks: MEMPO_CUDA_PERSIST unset takes the persistent step
// from a hidden size of 3072 (Qwen2.5-7B's 3584, not 1.5B's 1536); a number
// decides for every model.
func TestPersistBlocks(t *testing.T) {
	for _, c := range []struct{ setting, hidden, want int }{
		{persistAuto, 896, 0}, {persistAuto, 1536, 0}, {persistAuto, 3072, 1}, {persistAuto, 3584, 1},
		{0, 3584, 0}, {1, 896, 1}, {2, 896, 2},
	} {
		if got := persistBlocksFor(c.setting, c.hidden); got != c.want {
			t.Errorf("setting %d, hidden %d: %d blocks, want %d", c.setting, c.hidden, got, c.want)
		}
	}
	t.Setenv("MEMPO_CUDA_PERSIST", "")
	if got := persistBlocksFromEnv(); got != persistAuto {
		t.Errorf("MEMPO_CUDA_PERSIST unset: %d, want persistAuto", got)
	}
	t.Setenv("MEMPO_CUDA_PERSIST", "0")
	if got := persistBlocksFromEnv(); got != 0 {
		t.Errorf("MEMPO_CUDA_PERSIST=0: %d", got)
	}
	t.Setenv("MEMPO_CUDA_PERSIST", "2")
	if got := persistBlocksFromEnv(); got != 2 {
		t.Errorf("MEMPO_CUDA_PERSIST=2: %d", got)
	}
}

// persistAgainstSeparate holds the small bf16 steps with their layers in one
// persistent launch (dec_persist) to the same steps as separate launches,
// bit for bit, greedy and sampled; then the same with a grid too large to
// be resident, whose barriers must give up and the step run again as
// separate launches.
func persistAgainstSeparate(t *testing.T, be *CUDA, m *Model, reqs []Request, greedy GenerateOptions) {
	t.Helper()
	gen := func(opts GenerateOptions) []*Generation {
		be.decode = decodeGraph
		out, err := m.Generate(reqs, opts)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	same := func(what string, a, b []*Generation) {
		t.Helper()
		for i := range a {
			if !slices.Equal(a[i].IDs, b[i].IDs) || !equalF32(a[i].LogProbs, b[i].LogProbs) || !equalF32(a[i].SampleLogProbs, b[i].SampleLogProbs) {
				t.Errorf("%s row %d: %v %v\n separate launches %v %v", what, i, a[i].IDs, a[i].LogProbs, b[i].IDs, b[i].LogProbs)
			}
		}
	}
	blocks, timeout := be.persistBlocks, be.persistTimeout
	defer func() {
		be.persistBlocks, be.persistTimeout, be.persistOversize, be.persistErr = blocks, timeout, 0, nil
	}()
	be.persistBlocks = 1
	for _, opts := range []GenerateOptions{greedy, {MaxTokens: 16, Sampling: SampleParams{Temperature: 0.9}}} {
		n := be.persistSteps
		on := gen(opts)
		if ran := be.persistSteps - n; m.a.qkNorm && ran != 0 {
			t.Errorf("T=%g: %d steps ran dec_persist on a model with per-head q/k norms", opts.Sampling.Temperature, ran)
		} else if !m.a.qkNorm && ran == 0 {
			t.Fatalf("T=%g: no step ran dec_persist", opts.Sampling.Temperature)
		}
		be.persistBlocks = 0
		off := gen(opts)
		be.persistBlocks = 1
		same(fmt.Sprintf("T=%g dec_persist", opts.Sampling.Temperature), on, off)
		if opts.Sampling.Temperature > 0 || m.a.qkNorm {
			continue
		}
		be.persistOversize, be.persistTimeout = 4, 20*time.Millisecond
		fell := gen(opts)
		if be.persistErr == nil || be.persistBlocks != 0 {
			t.Errorf("a grid 4 times what is resident: no barrier gave up (err %v, blocks %d)", be.persistErr, be.persistBlocks)
		}
		same("after the barriers gave up", fell, off)
		be.persistBlocks, be.persistOversize, be.persistTimeout, be.persistErr = 1, 0, timeout, nil
	}
}

func equalF32(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return false
		}
	}
	return true
}

// TestCUDADecodeKernels checks the decoding step's own kernels alone, on
// fresh random inputs and the model shapes (head dims 64 and 128, groups of
// 7 and 6 query heads) besides small odd ones, outputs poisoned with NaN:
// attn_split (with its merge, several splits, splits past the keys, one
// split) and attn_split_group against the CPU backend's attention over the
// same KV-cache slots,
// and gemv_bf16 against cuBLAS's bf16 product of the same operands.
func TestCUDADecodeKernels(t *testing.T) {
	p := newOpPair(t, 21)
	b := p.gpu
	const cap = 256
	for _, sh := range []AttnShape{{14, 2, 64, 0.125}, {28, 4, 128, 0.088}, {12, 2, 128, 0.088}, {4, 4, 16, 0.25}, {6, 2, 8, 0.35}} {
		qd, kvd := sh.Heads*sh.HeadDim, sh.KVHeads*sh.HeadDim
		keys := []int{1, 37, 200, 256}
		R := len(keys)
		q, k, v := p.rnd(R, qd, 1), p.rnd(R*cap, kvd, 1), p.rnd(R*cap, kvd, 1)
		var seqs []AttnSeq
		var rows []int
		for i, n := range keys {
			// Row i is the last query of slot i: keys [0, n) of the slot;
			// the last row reads its first 100 from rows slot 0 leaves
			// unused (a shared prefix: AttnSeq.P, PN).
			s := AttnSeq{Q: i, N: 1, K: i * cap, Past: n - 1}
			if i == len(keys)-1 {
				s.P, s.PN = 8, 100
			}
			seqs = append(seqs, s)
			rows = append(rows, i, s.K, n, s.P, s.PN)
		}
		ref, refLse := p.cpu.Zeros(R, qd), p.cpu.Zeros(R, sh.Heads)
		p.cpu.Attention(ref, refLse, q.c, k.c, v.c, seqs, sh)
		rp := b.uploadInts(rows)
		for _, nsp := range []int{16, 6, 1} {
			out, lse := p.out(R, qd), p.out(R, sh.Heads)
			p.cpu.Copy(out.c, ref)
			p.cpu.Copy(lse.c, refLse)
			part, size := b.rawAlloc(4 * R * sh.Heads * nsp * (sh.HeadDim + 2))
			O, L := gt(out.g), gt(lse.g)
			b.launch2("decode", "attn_split", cuda.Dim3{X: R, Y: sh.KVHeads, Z: nsp}, 32*sh.Heads/sh.KVHeads, 0,
				O.ptr(), cuda.Ptr(0), L.ptr(), part, gt(q.g).ptr(), gt(k.g).ptr(), gt(v.g).ptr(), rp, sh.Heads, sh.KVHeads, sh.HeadDim, sh.Scale, splitMinChunk)
			b.launch2("decode", "attn_split_combine", cuda.Dim3{X: R, Y: sh.Heads}, 32, 0, O.ptr(), cuda.Ptr(0), L.ptr(), part, rp, sh.Heads, sh.HeadDim, nsp, splitMinChunk)
			what := fmt.Sprintf("attn_split heads %d/%d hd %d splits %d", sh.Heads, sh.KVHeads, sh.HeadDim, nsp)
			p.check(what+" out", out, 1e-5)
			p.checkAbs(what+" lse", lse, 1e-5)
			// attn_split_group (steps of more than 4 rows), its counters
			// zero before and after.
			if g := sh.Heads / sh.KVHeads; sh.HeadDim <= 128 && sh.HeadDim%4 == 0 && g <= 8 {
				b.Fill(out.g, float32(math.NaN()))
				b.Fill(lse.g, float32(math.NaN()))
				cnt, csize := b.rawAlloc(4 * R * sh.Heads)
				must(b.dev.Memset32(cnt, 0, R*sh.Heads))
				b.launch2("decode", "attn_split_group", cuda.Dim3{X: R, Y: sh.KVHeads, Z: nsp}, 32*attnGroupWarps, attnGroupShared(g, sh.HeadDim, attnGroupWarps),
					O.ptr(), cuda.Ptr(0), L.ptr(), part, gt(q.g).ptr(), gt(k.g).ptr(), gt(v.g).ptr(), rp, sh.Heads, sh.KVHeads, sh.HeadDim, sh.Scale, attnGroupMinChunk, cnt)
				what := fmt.Sprintf("attn_split_group heads %d/%d hd %d splits %d", sh.Heads, sh.KVHeads, sh.HeadDim, nsp)
				p.check(what+" out", out, 1e-5)
				p.checkAbs(what+" lse", lse, 1e-5)
				left := make([]int32, R*sh.Heads)
				must(b.dev.DtoH(unsafe.Pointer(&left[0]), cnt, 4*len(left)))
				for i, n := range left {
					if n != 0 {
						t.Errorf("%s: counter %d left at %d", what, i, n)
					}
				}
				b.rawFree(cnt, csize, false)
			}
			b.rawFree(part, size, false)
		}
	}
	b.SetBF16(true)
	defer b.SetBF16(false)
	for _, s := range [][3]int{{1, 896, 896}, {4, 4864, 896}, {3, 896, 4864}, {2, 13, 64}, {1, 151936, 896}, {4, 3584, 8}} {
		m, n, k := s[0], s[1], s[2]
		x, w := p.rnd(m, k, 1), p.rnd(n, k, 0.05)
		b.MarkWeight(w.g)
		ref := b.Zeros(m, n)
		b.MatMul(ref, x.g, w.g, false, true, 1, 0) // bf16 operands, fp32 sums (cuBLAS)
		y := b.Zeros(m, n)
		b.Fill(y, float32(math.NaN()))
		x16, w16 := b.activationBF16(gt(x.g)), b.bf16Operand(gt(w.g))
		b.launch("decode", "gemv_bf16", (n+7)/8, 256, 0, gt(y).ptr(), x16, w16, m, n, k)
		got, want := b.ToHost(y, nil), b.ToHost(ref, nil)
		if e := maxRelErr(got, want); !(e <= 1e-5) {
			t.Errorf("gemv_bf16 %d×%d×%d: relative error %.3g against cuBLAS", m, n, k, e)
		}
	}
	// skinny.cu: steps of 5 to 32 rows, the 0.5B and 7B shapes and ragged
	// ones, one product and three in a launch; twice, for the counters.
	for _, sh := range []struct {
		m, k int
		ns   []int
	}{{5, 896, []int{896}}, {32, 896, []int{4864}}, {31, 4864, []int{896}}, {32, 96, []int{200}}, {8, 896, []int{151936}},
		{32, 18944, []int{3584}}, {17, 3584, []int{3584, 512, 512}}, {24, 896, []int{4864, 4864}}, {9, 64, []int{24, 40, 8}}} {
		m, k := sh.m, sh.k
		x := p.rnd(m, k, 1)
		x16 := b.activationBF16(gt(x.g))
		var cs, ws []cuda.Ptr
		var refs, ys []Tensor
		var keep []pair // the weights' device buffers live while their raw bf16 pointers are used
		for _, n := range sh.ns {
			w := p.rnd(n, k, 0.05)
			keep = append(keep, w)
			b.MarkWeight(w.g)
			ref := b.Zeros(m, n)
			b.MatMul(ref, x.g, w.g, false, true, 1, 0)
			y := b.Zeros(m, n)
			refs, ys = append(refs, ref), append(ys, y)
			cs, ws = append(cs, gt(y).ptr()), append(ws, b.bf16Operand(gt(w.g)))
		}
		st := &cudaStepper{b: b, maxB: m, bf16: true}
		parts, tiles := skinnyParts(b.dev.SMs, m), 0
		for _, n := range sh.ns {
			tiles += (n + skinnyCols - 1) / skinnyCols
		}
		part, psize := b.rawAlloc(4*parts + 16)
		cnt, csize := b.rawAlloc(4 * tiles)
		must(b.dev.Memset32(cnt, 0, tiles))
		st.skPart, st.skCnt = part, cnt
		what := fmt.Sprintf("skinny m=%d k=%d n=%v", m, k, sh.ns)
		var first [][]float32
		for run := 0; run < 2; run++ {
			for _, y := range ys {
				b.Fill(y, float32(math.NaN()))
			}
			st.skinnyGemm(x16, m, k, cs, ws, sh.ns)
			for i, y := range ys {
				got := b.ToHost(y, nil)
				if e := maxRelErr(got, b.ToHost(refs[i], nil)); !(e <= 1e-5) {
					t.Errorf("%s product %d: relative error %.3g against cuBLAS", what, i, e)
				}
				if run == 0 {
					first = append(first, got)
				} else if !slices.Equal(first[i], got) {
					t.Errorf("%s product %d: a second launch gave other bits", what, i)
				}
			}
		}
		b.rawFree(part, psize, false)
		b.rawFree(cnt, csize, false)
		runtime.KeepAlive(keep)
		runtime.KeepAlive(x)
	}
	// q, k, v in one launch; gate, up and SwiGLU in one launch.
	for m := 1; m <= gemvMaxRows; m++ {
		const H, qd, kvd, I = 896, 896, 128, 4864
		x := p.rnd(m, H, 1)
		ws := []pair{p.rnd(qd, H, 0.05), p.rnd(kvd, H, 0.05), p.rnd(kvd, H, 0.05), p.rnd(I, H, 0.05), p.rnd(I, H, 0.05)}
		var w16 []cuda.Ptr
		for _, w := range ws {
			b.MarkWeight(w.g)
			w16 = append(w16, b.bf16Operand(gt(w.g)))
		}
		x16 := b.activationBF16(gt(x.g))
		var ys []Tensor
		for i, n := range []int{qd, kvd, kvd} {
			ref := b.Zeros(m, n)
			b.MatMul(ref, x.g, ws[i].g, false, true, 1, 0)
			y := b.Zeros(m, n)
			b.Fill(y, float32(math.NaN()))
			ys = append(ys, y, ref)
		}
		b.launch("decode", "gemv3_bf16", (qd+2*kvd+7)/8, 256, 0, gt(ys[0]).ptr(), w16[0], qd, gt(ys[2]).ptr(), w16[1], kvd,
			gt(ys[4]).ptr(), w16[2], kvd, x16, m, H)
		for i := 0; i < 3; i++ {
			if e := maxRelErr(b.ToHost(ys[2*i], nil), b.ToHost(ys[2*i+1], nil)); !(e <= 1e-5) {
				t.Errorf("gemv3_bf16 m=%d output %d: relative error %.3g against cuBLAS", m, i, e)
			}
		}
		gate, up, act := b.Zeros(m, I), b.Zeros(m, I), b.Zeros(m, I)
		b.MatMul(gate, x.g, ws[3].g, false, true, 1, 0)
		b.MatMul(up, x.g, ws[4].g, false, true, 1, 0)
		b.SwiGLU(act, gate, up)
		a16, size := b.rawAlloc(2*m*I + 16)
		b.launch("decode", "gemv_swiglu_bf16", (I+7)/8, 256, 0, a16, x16, w16[3], w16[4], m, I, H)
		raw := make([]uint16, m*I)
		must(b.dev.DtoH(unsafe.Pointer(&raw[0]), a16, 2*m*I))
		got := make([]float32, m*I)
		for i, h := range raw {
			got[i] = math.Float32frombits(uint32(h) << 16)
		}
		// bf16 output: within its rounding (2^-8 relative) of the fp32 SwiGLU.
		if e := maxRelErr(got, b.ToHost(act, nil)); !(e <= 1e-2) {
			t.Errorf("gemv_swiglu_bf16 m=%d: relative error %.3g against cuBLAS + SwiGLU", m, e)
		}
		b.rawFree(a16, size, false)
	}
}
