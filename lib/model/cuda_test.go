package model

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"unsafe"

	"github.com/mempo/mempo/lib/cuda"
	"github.com/mempo/mempo/lib/envconfig"
	"github.com/mempo/mempo/lib/tensor/half"
	"github.com/mempo/mempo/lib/testenv"
)

// The CUDA backend's tests: each op alone against the CPU backend's op on
// fresh random inputs (odd sizes, sizes that are not multiples of any tile),
// with every output poisoned (NaN) before the run so an unwritten element
// fails; then the transformers parity of parity_test.go on CUDA. Without a
// usable GPU they skip with the reason.

func cudaOrSkip(t testing.TB) *CUDA {
	t.Helper()
	ok, why := CUDAAvailableReason()
	testenv.NeedCUDA(t, ok, why)
	be, err := NewCUDA()
	if err != nil {
		t.Fatal(err)
	}
	return be
}

type opPair struct {
	cpu *CPU
	gpu *CUDA
	r   *rand.Rand
	t   *testing.T
}

func newOpPair(t *testing.T, seed uint64) *opPair {
	return &opPair{cpu: NewCPU(), gpu: cudaOrSkip(t), r: rand.New(rand.NewPCG(seed, 7)), t: t}
}

// newOpPairOrEmu is newOpPair where a GPU is, else the CPU backend against
// the CUDA backend on lib/cuda/cudaemu's emulation of the kernels (emuCUDA),
// so that `go test` here runs the kernels' index math and the launchers'
// shapes too; with MEMPO_REQUIRE_CUDA=1 it wants the GPU.
func newOpPairOrEmu(t *testing.T, seed uint64) *opPair {
	if ok, _ := CUDAAvailableReason(); ok || envconfig.RequireCUDA.On() {
		return newOpPair(t, seed)
	}
	return &opPair{cpu: NewCPU(), gpu: emuCUDA(t), r: rand.New(rand.NewPCG(seed, 7)), t: t}
}

func (p *opPair) randv(n int, scale float64) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(scale * p.r.NormFloat64())
	}
	return v
}

// pair is one tensor on both backends with the same contents.
type pair struct{ c, g Tensor }

func (p *opPair) rnd(rows, cols int, scale float64) pair {
	v := p.randv(rows*cols, scale)
	return pair{p.cpu.FromHost(v, rows, cols), p.gpu.FromHost(v, rows, cols)}
}

// out is an output tensor: CPU zeros, GPU poisoned with NaN.
func (p *opPair) out(rows, cols int) pair {
	g := p.gpu.Zeros(rows, cols)
	p.gpu.Fill(g, float32(math.NaN()))
	return pair{p.cpu.Zeros(rows, cols), g}
}

// same copies the same values into an accumulating output on both.
func (p *opPair) acc(rows, cols int) pair { return p.rnd(rows, cols, 1) }

func (p *opPair) check(name string, x pair, tol float64) {
	p.t.Helper()
	a := p.gpu.ToHost(x.g, nil)
	b := p.cpu.ToHost(x.c, nil)
	for i, v := range a {
		if math.IsNaN(float64(v)) && !math.IsNaN(float64(b[i])) {
			p.t.Errorf("%s: element %d not written (NaN)", name, i)
			return
		}
	}
	if e := maxRelErr(a, b); e > tol || math.IsNaN(e) {
		p.t.Errorf("%s: relative error %.3g > %.3g", name, e, tol)
	}
}

// sameBits fails unless two tensors of the GPU backend hold the same bits.
func (p *opPair) sameBits(name string, a, b Tensor) {
	p.t.Helper()
	av, bv := p.gpu.ToHost(a, nil), p.gpu.ToHost(b, nil)
	for i := range av {
		if math.Float32bits(av[i]) != math.Float32bits(bv[i]) {
			p.t.Errorf("%s: element %d = %v against %v", name, i, av[i], bv[i])
			return
		}
	}
}

// sameWithin checks two GPU tensors agree to rel of their size: for sums
// whose order depends on which block adds first (atomic adds across
// blocks), where the bits may not repeat.
func (p *opPair) sameWithin(name string, a, b Tensor, rel float64) {
	p.t.Helper()
	av, bv := p.gpu.ToHost(a, nil), p.gpu.ToHost(b, nil)
	for i := range av {
		x, y := float64(av[i]), float64(bv[i])
		if d := math.Abs(x - y); !(d <= rel*max(math.Abs(x), math.Abs(y), 1e-30)) {
			p.t.Errorf("%s: element %d = %v against %v", name, i, av[i], bv[i])
			return
		}
	}
}

func (p *opPair) checkAbs(name string, x pair, tol float64) {
	p.t.Helper()
	a, b := p.gpu.ToHost(x.g, nil), p.cpu.ToHost(x.c, nil)
	for i := range a {
		if d := math.Abs(float64(a[i] - b[i])); !(d <= tol) {
			p.t.Errorf("%s: element %d = %g, CPU %g", name, i, a[i], b[i])
			return
		}
	}
}

func TestCUDAElementwiseOps(t *testing.T) {
	p := newOpPairOrEmu(t, 1)
	for _, sz := range [][2]int{{1, 1}, {3, 5}, {37, 129}, {257, 1000}} {
		r, c := sz[0], sz[1]
		name := fmt.Sprintf("%d×%d", r, c)
		a, b := p.rnd(r, c, 1), p.rnd(r, c, 1)
		p.cpu.Add(a.c, b.c)
		p.gpu.Add(a.g, b.g)
		p.check("Add "+name, a, 1e-6)

		bias := p.rnd(1, c, 1)
		p.cpu.AddBias(a.c, bias.c)
		p.gpu.AddBias(a.g, bias.g)
		p.check("AddBias "+name, a, 1e-6)

		s := p.acc(1, c)
		p.cpu.SumRows(s.c, a.c)
		p.gpu.SumRows(s.g, a.g)
		p.check("SumRows "+name, s, 1e-5)

		cp := p.out(r, c)
		p.cpu.Copy(cp.c, a.c)
		p.gpu.Copy(cp.g, a.g)
		p.check("Copy "+name, cp, 0)

		f := p.out(r, c)
		p.cpu.Fill(f.c, 2.5)
		p.gpu.Fill(f.g, 2.5)
		p.check("Fill "+name, f, 0)

		g, u := p.rnd(r, c, 2), p.rnd(r, c, 1)
		o := p.out(r, c)
		p.cpu.SwiGLU(o.c, g.c, u.c)
		p.gpu.SwiGLU(o.g, g.g, u.g)
		p.check("SwiGLU "+name, o, 1e-5)
		do := p.rnd(r, c, 1)
		dg, du := p.out(r, c), p.out(r, c)
		p.cpu.SwiGLUBackward(dg.c, du.c, do.c, g.c, u.c)
		p.gpu.SwiGLUBackward(dg.g, du.g, do.g, g.g, u.g)
		p.check("SwiGLUBackward dgate "+name, dg, 1e-5)
		p.check("SwiGLUBackward dup "+name, du, 1e-5)

		// Views and reshapes address the right rows.
		if r > 2 {
			vo := p.out(r-2, c)
			p.cpu.Copy(vo.c, p.cpu.View(a.c, 1, r-2))
			p.gpu.Copy(vo.g, p.gpu.View(a.g, 1, r-2))
			p.check("View "+name, vo, 0)
		}
		rows := []int{r - 1, 0, r / 2, r - 1}
		gr := p.out(len(rows), c)
		p.cpu.GatherRows(gr.c, a.c, rows)
		p.gpu.GatherRows(gr.g, a.g, rows)
		p.check("GatherRows "+name, gr, 0)
		// ScatterRows writes src rows into a permutation of dst's rows and
		// leaves the others as they were.
		sc := p.rnd(r+3, c, 1)
		perm := rand.New(rand.NewPCG(uint64(r), uint64(c))).Perm(r + 3)[:r]
		p.cpu.ScatterRows(sc.c, a.c, perm)
		p.gpu.ScatterRows(sc.g, a.g, perm)
		p.check("ScatterRows "+name, sc, 0)
	}
}

func TestCUDAMatMul(t *testing.T) {
	p := newOpPairOrEmu(t, 2)
	for _, sz := range [][3]int{{1, 1, 1}, {5, 7, 3}, {33, 65, 129}, {200, 96, 300}} {
		m, n, k := sz[0], sz[1], sz[2]
		for _, ta := range []bool{false, true} {
			for _, tb := range []bool{false, true} {
				ar, ac := m, k
				if ta {
					ar, ac = k, m
				}
				br, bc := k, n
				if tb {
					br, bc = n, k
				}
				a, b := p.rnd(ar, ac, 1), p.rnd(br, bc, 1)
				c := p.acc(m, n)
				name := fmt.Sprintf("MatMul %dx%dx%d ta=%v tb=%v", m, n, k, ta, tb)
				p.cpu.MatMul(c.c, a.c, b.c, ta, tb, 0.5, 1)
				p.gpu.MatMul(c.g, a.g, b.g, ta, tb, 0.5, 1)
				p.check(name, c, 1e-5)
				o := p.out(m, n)
				p.cpu.MatMul(o.c, a.c, b.c, ta, tb, 1, 0)
				p.gpu.MatMul(o.g, a.g, b.g, ta, tb, 1, 0)
				p.check(name+" beta=0", o, 1e-5)
			}
		}
	}
}

func TestCUDANormEmbedRoPE(t *testing.T) {
	p := newOpPairOrEmu(t, 3)
	for _, sz := range [][3]int{{1, 8, 8}, {7, 40, 20}, {65, 896, 896}, {33, 384, 128}} {
		r, c, dim := sz[0], sz[1], sz[2]
		name := fmt.Sprintf("%d×%d/%d", r, c, dim)
		x, w := p.rnd(r, c, 1), p.rnd(1, dim, 1)
		n := r * c / dim
		o, s := p.out(r, c), p.out(n, 1)
		p.cpu.RMSNorm(o.c, s.c, x.c, w.c, 1e-6)
		p.gpu.RMSNorm(o.g, s.g, x.g, w.g, 1e-6)
		p.check("RMSNorm "+name, o, 1e-5)
		p.check("RMSNorm rstd "+name, s, 1e-5)
		dy := p.rnd(r, c, 1)
		dx, dw := p.out(r, c), p.acc(1, dim)
		p.cpu.RMSNormBackward(dx.c, dw.c, dy.c, x.c, w.c, s.c)
		p.gpu.RMSNormBackward(dx.g, dw.g, dy.g, x.g, w.g, s.g)
		p.check("RMSNormBackward dx "+name, dx, 1e-5)
		p.check("RMSNormBackward dw "+name, dw, 1e-5)
		// dx aliasing dy.
		dy2 := p.rnd(r, c, 1)
		dw2 := p.acc(1, dim)
		p.cpu.RMSNormBackward(dy2.c, dw2.c, dy2.c, x.c, w.c, s.c)
		p.gpu.RMSNormBackward(dy2.g, dw2.g, dy2.g, x.g, w.g, s.g)
		p.check("RMSNormBackward in place "+name, dy2, 1e-5)
		if c == dim {
			// The residual add and the norm in one launch: against the
			// CPU's two, and the same bits as the backend's own two.
			xa, d := p.rnd(r, c, 1), p.rnd(r, c, 1)
			xb := p.gpu.FromHost(p.gpu.ToHost(xa.g, nil), r, c)
			oa, sa := p.out(r, c), p.out(r, 1)
			p.cpu.Add(xa.c, d.c)
			p.cpu.RMSNorm(oa.c, sa.c, xa.c, w.c, 1e-6)
			p.gpu.AddRMSNorm(oa.g, sa.g, xa.g, d.g, w.g, 1e-6)
			p.check("AddRMSNorm x "+name, xa, 0)
			p.check("AddRMSNorm "+name, oa, 1e-5)
			p.check("AddRMSNorm rstd "+name, sa, 1e-5)
			ob, sb := p.gpu.Zeros(r, c), p.gpu.Zeros(r, 1)
			p.gpu.Add(xb, d.g)
			p.gpu.RMSNorm(ob, sb, xb, w.g, 1e-6)
			p.sameBits("AddRMSNorm x, Add then RMSNorm "+name, xa.g, xb)
			p.sameBits("AddRMSNorm, Add then RMSNorm "+name, oa.g, ob)
			p.sameBits("AddRMSNorm rstd, Add then RMSNorm "+name, sa.g, sb)
			// The backward with the residual's gradient added in dx's
			// launch.
			g, res := p.rnd(r, c, 1), p.rnd(r, c, 1)
			dxa, dwa := p.out(r, c), p.acc(1, dim)
			dxb, dwb := p.gpu.Zeros(r, c), p.gpu.FromHost(p.gpu.ToHost(dwa.g, nil), 1, dim)
			p.cpu.RMSNormBackward(dxa.c, dwa.c, g.c, xa.c, w.c, sa.c)
			p.cpu.Add(dxa.c, res.c)
			p.gpu.RMSNormBackwardAdd(dxa.g, dwa.g, g.g, xa.g, w.g, sa.g, res.g)
			p.check("RMSNormBackwardAdd dx "+name, dxa, 1e-5)
			p.check("RMSNormBackwardAdd dw "+name, dwa, 1e-5)
			p.gpu.RMSNormBackward(dxb, dwb, g.g, xa.g, w.g, sa.g)
			p.gpu.Add(dxb, res.g)
			p.sameBits("RMSNormBackwardAdd dx, RMSNormBackward then Add "+name, dxa.g, dxb)
			// dw adds row chunks atomically: the same sums, in the order
			// the blocks finish.
			p.sameWithin("RMSNormBackwardAdd dw, RMSNormBackward "+name, dwa.g, dwb, 1e-6)
		}

		for _, hd := range []int{4, 64, 128} {
			if c%hd != 0 {
				continue
			}
			pos := make([]int, r)
			for i := range pos {
				pos[i] = p.r.IntN(5000)
			}
			for _, inv := range []bool{false, true} {
				xr := p.rnd(r, c, 1)
				p.cpu.RoPE(xr.c, pos, hd, 1e6, inv)
				p.gpu.RoPE(xr.g, pos, hd, 1e6, inv)
				p.check(fmt.Sprintf("RoPE hd=%d inv=%v %s", hd, inv, name), xr, 1e-5)
			}
			// The bias and the rotation in one launch: against the CPU's
			// two, and the same bits as the backend's own two.
			xr, bias := p.rnd(r, c, 1), p.rnd(1, c, 1)
			x2 := p.gpu.FromHost(p.gpu.ToHost(xr.g, nil), r, c)
			p.cpu.AddBias(xr.c, bias.c)
			p.cpu.RoPE(xr.c, pos, hd, 1e6, false)
			p.gpu.BiasRoPE(xr.g, bias.g, pos, hd, 1e6)
			p.check(fmt.Sprintf("BiasRoPE hd=%d %s", hd, name), xr, 1e-5)
			p.gpu.AddBias(x2, bias.g)
			p.gpu.RoPE(x2, pos, hd, 1e6, false)
			p.sameBits(fmt.Sprintf("BiasRoPE, AddBias then RoPE hd=%d %s", hd, name), xr.g, x2)
		}
	}
	for _, sz := range [][2]int{{1, 3}, {13, 7}, {300, 129}} {
		vocab, cols := sz[0]+5, sz[1]
		tab := p.rnd(vocab, cols, 1)
		ids := make([]int, sz[0]*3)
		for i := range ids {
			ids[i] = p.r.IntN(vocab)
		}
		ids[len(ids)-1] = ids[0] // a repeated id
		o := p.out(len(ids), cols)
		p.cpu.Embedding(o.c, tab.c, ids)
		p.gpu.Embedding(o.g, tab.g, ids)
		p.check("Embedding", o, 0)
		dOut := p.rnd(len(ids), cols, 1)
		dT := p.acc(vocab, cols)
		p.cpu.EmbeddingBackward(dT.c, dOut.c, ids)
		p.gpu.EmbeddingBackward(dT.g, dOut.g, ids)
		p.check("EmbeddingBackward", dT, 1e-5)
	}
}

func TestCUDATokenLogProbs(t *testing.T) {
	p := newOpPairOrEmu(t, 4)
	for _, sz := range [][2]int{{1, 5}, {9, 320}, {33, 151936}} {
		rows, V := sz[0], sz[1]
		z := p.rnd(rows, V, 3)
		tg := make([]int, rows)
		dlp := make([]float32, rows)
		for i := range tg {
			tg[i] = p.r.IntN(V)
			dlp[i] = float32(p.r.NormFloat64())
		}
		tg[0] = -1
		if rows > 2 {
			dlp[1] = 0
		}
		lp, lse := p.out(rows, 1), p.out(rows, 1)
		p.cpu.TokenLogProbs(lp.c, lse.c, z.c, tg)
		p.gpu.TokenLogProbs(lp.g, lse.g, z.g, tg)
		p.check(fmt.Sprintf("TokenLogProbs lp %dx%d", rows, V), lp, 1e-5)
		p.check(fmt.Sprintf("TokenLogProbs lse %dx%d", rows, V), lse, 1e-5)
		d := p.out(rows, V)
		p.cpu.TokenLogProbsBackward(d.c, z.c, lse.c, tg, dlp)
		p.gpu.TokenLogProbsBackward(d.g, z.g, lse.g, tg, dlp)
		p.check("TokenLogProbsBackward", d, 1e-5)
		// In place over the logits.
		p.cpu.TokenLogProbsBackward(z.c, z.c, lse.c, tg, dlp)
		p.gpu.TokenLogProbsBackward(z.g, z.g, lse.g, tg, dlp)
		p.check("TokenLogProbsBackward in place", z, 1e-5)
	}
	// bf16 mode, the gradient written only as its bf16 rounding (the LM
	// head's backward: only the two products read it), read by a product.
	p.gpu.SetBF16(true)
	defer p.gpu.SetBF16(false)
	for _, sz := range [][2]int{{9, 318}, {5, 151936}} {
		rows, V := sz[0], sz[1]
		z, w := p.rnd(rows, V, 3), p.rnd(3, V, 1)
		tg := make([]int, rows)
		dlp := make([]float32, rows)
		for i := range tg {
			tg[i] = p.r.IntN(V)
			dlp[i] = float32(p.r.NormFloat64())
		}
		lp, lse := p.out(rows, 1), p.out(rows, 1)
		p.cpu.TokenLogProbs(lp.c, lse.c, z.c, tg)
		p.gpu.TokenLogProbs(lp.g, lse.g, z.g, tg)
		d := p.out(rows, V)
		p.gpu.ProductOnly(d.g)
		p.cpu.TokenLogProbsBackward(d.c, z.c, lse.c, tg, dlp)
		p.gpu.TokenLogProbsBackward(d.g, z.g, lse.g, tg, dlp)
		o := p.out(rows, 3)
		p.cpu.MatMul(o.c, d.c, w.c, false, true, 1, 0)
		p.gpu.MatMul(o.g, d.g, w.g, false, true, 1, 0)
		p.check(fmt.Sprintf("ProductOnly TokenLogProbsBackward %dx%d → product", rows, V), o, 2e-2)
		// In place over the logits, as the LM head's backward runs: the
		// op reads the fp32 logits and writes only the gradient's
		// rounding, after which the fp32 storage is given back.
		live := p.gpu.LiveBytes()
		p.gpu.ProductOnly(z.g)
		p.cpu.TokenLogProbsBackward(z.c, z.c, lse.c, tg, dlp)
		p.gpu.TokenLogProbsBackward(z.g, z.g, lse.g, tg, dlp)
		if got, want := live-p.gpu.LiveBytes(), int64(4*rows*V); got != want {
			t.Errorf("ProductOnly in place %dx%d: %d fp32 bytes given back, want %d", rows, V, got, want)
		}
		p.cpu.MatMul(o.c, z.c, w.c, false, true, 1, 0)
		p.gpu.MatMul(o.g, z.g, w.g, false, true, 1, 0)
		p.check(fmt.Sprintf("ProductOnly TokenLogProbsBackward in place %dx%d → product", rows, V), o, 2e-2)
		p.gpu.Free(z.g)
		p.gpu.Free(d.g)
		if got := live - p.gpu.LiveBytes(); got != int64(4*rows*V) {
			t.Errorf("freeing the two ProductOnly tensors: live bytes fell by %d in all, want %d (fp32 storage given back once)", got, 4*rows*V)
		}
	}
}

func TestCUDAAttention(t *testing.T) {
	// v2 is attention2.cu's flash-style kernels alone (as
	// MEMPO_CUDA_ATTN=kernel), head dims that are not multiples of 4
	// included; "decode" is the default, where sequences of up to
	// attnDecodeMaxRows rows take attndecode.cu in the forward.
	for _, c := range []struct {
		name        string
		kernelsOnly bool
	}{{"v2", true}, {"decode", false}} {
		t.Run(c.name, func(t *testing.T) {
			p := newOpPairOrEmu(t, 5)
			p.gpu.attnKernelsOnly = c.kernelsOnly
			testCUDAAttention(t, p)
		})
	}
}

func testCUDAAttention(t *testing.T, p *opPair) {
	type cfg struct{ heads, kv, hd int }
	cfgs := []cfg{{2, 1, 4}, {4, 2, 16}, {14, 2, 64}, {12, 2, 128}, {3, 3, 40}, {2, 2, 6}, {4, 1, 256}}
	lensAll := [][]int{{1}, {5, 17}, {33, 1, 70}, {200}}
	if p.gpu.dev == nil {
		// The emulation (a fiber per thread) takes ~100x a GPU's time here:
		// every kernel and register count, on fewer and shorter shapes.
		cfgs, lensAll = []cfg{{2, 1, 4}, {4, 2, 16}, {2, 1, 64}, {3, 3, 40}, {2, 2, 6}}, [][]int{{1}, {5, 17}, {33, 1, 40}}
	}
	for _, c := range cfgs {
		for _, lens := range lensAll {
			sh := AttnShape{Heads: c.heads, KVHeads: c.kv, HeadDim: c.hd, Scale: float32(1 / math.Sqrt(float64(c.hd)))}
			var seqs []AttnSeq
			R := 0
			for _, n := range lens {
				seqs = append(seqs, AttnSeq{Q: R, N: n, K: R})
				R += n
			}
			name := fmt.Sprintf("h=%d kv=%d hd=%d lens=%v", c.heads, c.kv, c.hd, lens)
			q, k, v := p.rnd(R, c.heads*c.hd, 1), p.rnd(R, c.kv*c.hd, 1), p.rnd(R, c.kv*c.hd, 1)
			o, lse := p.out(R, c.heads*c.hd), p.out(R, c.heads)
			p.cpu.Attention(o.c, lse.c, q.c, k.c, v.c, seqs, sh)
			p.gpu.Attention(o.g, lse.g, q.g, k.g, v.g, seqs, sh)
			p.check("Attention out "+name, o, 1e-5)
			p.check("Attention lse "+name, lse, 1e-5)
			do := p.rnd(R, c.heads*c.hd, 1)
			dq, dk, dv := p.out(R, c.heads*c.hd), p.out(R, c.kv*c.hd), p.out(R, c.kv*c.hd)
			p.cpu.AttentionBackward(dq.c, dk.c, dv.c, do.c, q.c, k.c, v.c, o.c, lse.c, seqs, sh)
			p.gpu.AttentionBackward(dq.g, dk.g, dv.g, do.g, q.g, k.g, v.g, o.g, lse.g, seqs, sh)
			if R == len(lens) {
				// Every sequence has one token: the softmax is constant,
				// dq and dk are exactly 0 and both sides hold rounding
				// noise, so compare absolutely.
				p.checkAbs("AttentionBackward dq "+name, dq, 1e-5)
				p.checkAbs("AttentionBackward dk "+name, dk, 1e-5)
			} else {
				p.check("AttentionBackward dq "+name, dq, 1e-4)
				p.check("AttentionBackward dk "+name, dk, 1e-4)
			}
			p.check("AttentionBackward dv "+name, dv, 1e-4)
		}
		// Decoding: one query per slot over a cache with Past rows.
		capacity := 300
		slots := 3
		kc, vc := p.rnd(slots*capacity, c.kv*c.hd, 1), p.rnd(slots*capacity, c.kv*c.hd, 1)
		seqs := []AttnSeq{{Q: 0, N: 1, K: 0, Past: 0}, {Q: 1, N: 1, K: capacity, Past: 37}, {Q: 2, N: 3, K: 2 * capacity, Past: 250}}
		q := p.rnd(5, c.heads*c.hd, 1)
		sh := AttnShape{Heads: c.heads, KVHeads: c.kv, HeadDim: c.hd, Scale: float32(1 / math.Sqrt(float64(c.hd)))}
		o, lse := p.out(5, c.heads*c.hd), p.out(5, c.heads)
		p.cpu.Attention(o.c, lse.c, q.c, kc.c, vc.c, seqs, sh)
		p.gpu.Attention(o.g, lse.g, q.g, kc.g, vc.g, seqs, sh)
		p.check(fmt.Sprintf("Attention decode hd=%d", c.hd), o, 1e-5)
		p.check(fmt.Sprintf("Attention decode lse hd=%d", c.hd), lse, 1e-5)
		checkAttentionPrefix(p, sh, 1e-5)
	}
}

// checkAttentionPrefix: sequences that read their first keys from a shared
// prefix elsewhere in the cache (AttnSeq.P, PN) — a decoding row, three
// rows, a prefill of 60 — against the CPU's attention.
func checkAttentionPrefix(p *opPair, sh AttnShape, tol float64) {
	const capacity = 300
	kvd, qd := sh.KVHeads*sh.HeadDim, sh.Heads*sh.HeadDim
	kc, vc := p.rnd(3*capacity, kvd, 1), p.rnd(3*capacity, kvd, 1)
	seqs := []AttnSeq{{Q: 0, N: 1, K: capacity, Past: 37, P: 2 * capacity, PN: 10},
		{Q: 1, N: 3, K: 0, Past: 150, P: 2*capacity + 50, PN: 100},
		{Q: 4, N: 60, K: capacity, Past: 80, P: 2*capacity + 7, PN: 80}}
	q := p.rnd(64, qd, 1)
	o, lse := p.out(64, qd), p.out(64, sh.Heads)
	p.cpu.Attention(o.c, lse.c, q.c, kc.c, vc.c, seqs, sh)
	p.gpu.Attention(o.g, lse.g, q.g, kc.g, vc.g, seqs, sh)
	p.check(fmt.Sprintf("Attention shared prefix hd=%d", sh.HeadDim), o, tol)
	p.checkAbs(fmt.Sprintf("Attention shared prefix lse hd=%d", sh.HeadDim), lse, tol)
}

// TestCUDAAttentionGemm checks bf16 mode's tensor-core attention
// (cuda_attn.go) against the CPU's fp32 attention: GQA and plain heads, odd
// head dims and lengths, several sequences, chunks that split a sequence,
// a KV cache with Past > 0, and a mix of sequences on the GEMM path and on
// the kernels. Tolerances are bf16's: operands and probabilities rounded to
// 8 bits of mantissa, accumulation in fp32. Without a GPU it runs on the
// emulation (fewer shapes), the tensor-core fragments included.
func TestCUDAAttentionGemm(t *testing.T) {
	// "mma": head dims 64 and 128 take the tensor-core flash kernels
	// (attnmma.cu), the others the cuBLAS path; "gemm": every head dim takes
	// the cuBLAS path (MEMPO_CUDA_ATTN=gemm).
	for _, noMMA := range []bool{false, true} {
		t.Run(map[bool]string{false: "mma", true: "gemm"}[noMMA], func(t *testing.T) {
			p := newOpPairOrEmu(t, 11)
			p.gpu.SetBF16(true)
			p.gpu.attnNoMMA = noMMA
			testCUDAAttentionBF16(t, p)
		})
	}
}

func testCUDAAttentionBF16(t *testing.T, p *opPair) {
	type cfg struct{ heads, kv, hd int }
	type runCase struct {
		lens    []int
		minRows int
		chunk   int
	}
	cfgs := []cfg{{14, 2, 64}, {12, 2, 128}, {4, 1, 64}, {2, 2, 128}, {4, 4, 32}, {3, 1, 40}, {2, 2, 6}}
	runs := []runCase{
		{[]int{200}, 1, 0},
		{[]int{5, 300, 17}, 1, 64},
		{[]int{130, 3, 129}, 0, 0}, // default threshold: 3 goes to the kernels
		{[]int{64, 65, 127, 1}, 0, 0},
		{[]int{1, 2}, 1, 0},
	}
	if p.gpu.dev == nil {
		// The emulation (every warp exchange of the tensor-core fragments
		// a fiber switch): grouped and plain heads at both of attnmma.cu's
		// head dims and one of the GEMM path's, tiles cut by the diagonal,
		// partial tiles and several sequences a launch.
		cfgs = []cfg{{4, 1, 64}, {2, 2, 128}, {3, 1, 40}}
		runs = []runCase{{[]int{5, 150, 17}, 1, 64}, {[]int{64, 65, 1}, 0, 0}}
	}
	for _, c := range cfgs {
		for _, run := range runs {
			p.gpu.attnGemmRows, p.gpu.attnGemmChunk = run.minRows, run.chunk
			sh := AttnShape{Heads: c.heads, KVHeads: c.kv, HeadDim: c.hd, Scale: float32(1 / math.Sqrt(float64(c.hd)))}
			var seqs []AttnSeq
			R := 0
			for _, n := range run.lens {
				seqs = append(seqs, AttnSeq{Q: R, N: n, K: R})
				R += n
			}
			name := fmt.Sprintf("h=%d kv=%d hd=%d lens=%v chunk=%d", c.heads, c.kv, c.hd, run.lens, run.chunk)
			q, k, v := p.rnd(R, c.heads*c.hd, 1), p.rnd(R, c.kv*c.hd, 1), p.rnd(R, c.kv*c.hd, 1)
			o, lse := p.out(R, c.heads*c.hd), p.out(R, c.heads)
			p.cpu.Attention(o.c, lse.c, q.c, k.c, v.c, seqs, sh)
			p.gpu.Attention(o.g, lse.g, q.g, k.g, v.g, seqs, sh)
			p.check("AttentionGemm out "+name, o, 3e-2)
			p.checkAbs("AttentionGemm lse "+name, lse, 3e-2)
			do := p.rnd(R, c.heads*c.hd, 1)
			dq, dk, dv := p.out(R, c.heads*c.hd), p.out(R, c.kv*c.hd), p.out(R, c.kv*c.hd)
			p.cpu.AttentionBackward(dq.c, dk.c, dv.c, do.c, q.c, k.c, v.c, o.c, lse.c, seqs, sh)
			p.gpu.AttentionBackward(dq.g, dk.g, dv.g, do.g, q.g, k.g, v.g, o.g, lse.g, seqs, sh)
			if R == len(run.lens) {
				p.checkAbs("AttentionGemm dq "+name, dq, 3e-2)
				p.checkAbs("AttentionGemm dk "+name, dk, 3e-2)
			} else {
				p.check("AttentionGemm dq "+name, dq, 5e-2)
				p.check("AttentionGemm dk "+name, dk, 5e-2)
			}
			p.check("AttentionGemm dv "+name, dv, 5e-2)
			checkAttentionBackwardRoPE(t, p, name, R, sh, seqs, q, k, v, o, lse, do)
		}
		// A prefill over a cache: queries after Past cached keys.
		p.gpu.attnGemmRows, p.gpu.attnGemmChunk = 1, 48
		capacity := 400
		kc, vc := p.rnd(2*capacity, c.kv*c.hd, 1), p.rnd(2*capacity, c.kv*c.hd, 1)
		seqs := []AttnSeq{{Q: 0, N: 100, K: 0, Past: 37}, {Q: 100, N: 150, K: capacity, Past: 200}}
		q := p.rnd(250, c.heads*c.hd, 1)
		sh := AttnShape{Heads: c.heads, KVHeads: c.kv, HeadDim: c.hd, Scale: float32(1 / math.Sqrt(float64(c.hd)))}
		o, lse := p.out(250, c.heads*c.hd), p.out(250, c.heads)
		p.cpu.Attention(o.c, lse.c, q.c, kc.c, vc.c, seqs, sh)
		p.gpu.Attention(o.g, lse.g, q.g, kc.g, vc.g, seqs, sh)
		p.check(fmt.Sprintf("AttentionGemm past hd=%d", c.hd), o, 3e-2)
		p.checkAbs(fmt.Sprintf("AttentionGemm past lse hd=%d", c.hd), lse, 3e-2)
		checkAttentionPrefix(p, sh, 3e-2)
	}
}

// checkAttentionBackwardRoPE: AttentionBackwardRoPE (where attnmma.cu
// takes the call, RoPE's backward made by its dQ kernel) gives
// AttentionBackward followed by RoPE's backward on dq and dk, at positions
// that are not the rows' order, with dq's bf16 rounding that of its values.
func checkAttentionBackwardRoPE(t *testing.T, p *opPair, name string, R int, sh AttnShape, seqs []AttnSeq, q, k, v, o, lse, do pair) {
	t.Helper()
	const theta = 10000
	pos := make([]int, R)
	for i := range pos {
		pos[i] = (i*37 + 5) % 300
	}
	run := func(fused bool) (dq, dk, dv Tensor) {
		dq, dk, dv = p.gpu.Zeros(R, sh.Heads*sh.HeadDim), p.gpu.Zeros(R, sh.KVHeads*sh.HeadDim), p.gpu.Zeros(R, sh.KVHeads*sh.HeadDim)
		if fused {
			p.gpu.AttentionBackwardRoPE(dq, dk, dv, do.g, q.g, k.g, v.g, o.g, lse.g, seqs, sh, pos, theta)
		} else {
			p.gpu.AttentionBackward(dq, dk, dv, do.g, q.g, k.g, v.g, o.g, lse.g, seqs, sh)
			p.gpu.RoPE(dq, pos, sh.HeadDim, theta, true)
			p.gpu.RoPE(dk, pos, sh.HeadDim, theta, true)
		}
		return dq, dk, dv
	}
	dq1, dk1, dv1 := run(false)
	dq2, dk2, dv2 := run(true)
	defer func() {
		for _, x := range []Tensor{dq1, dk1, dv1, dq2, dk2, dv2} {
			p.gpu.Free(x)
		}
	}()
	for _, c := range []struct {
		what string
		a, b Tensor
	}{{"dq", dq1, dq2}, {"dk", dk1, dk2}, {"dv", dv1, dv2}} {
		a, b := p.gpu.ToHost(c.a, nil), p.gpu.ToHost(c.b, nil)
		if e := maxRelErr(b, a); !(e <= 1e-6) {
			t.Errorf("AttentionBackwardRoPE %s %s: relative error %.3g against the separate launches", c.what, name, e)
		}
	}
	if g := gt(dq2); p.gpu.useAttnMMA(sh) && g.buf.w16ok {
		vals := p.gpu.ToHost(dq2, nil)
		bits := make([]uint16, len(vals))
		must(p.gpu.ops.DtoH(unsafe.Pointer(&bits[0]), g.buf.w16, 2*len(bits)))
		for i, x := range vals {
			if w := half.F32ToBF16(x); bits[i] != w {
				t.Errorf("AttentionBackwardRoPE dq16 %s: element %d = %#x, want %#x (of %v)", name, i, bits[i], w, x)
				break
			}
		}
	} else if p.gpu.useAttnMMA(sh) {
		t.Errorf("AttentionBackwardRoPE %s: dq's bf16 rounding not written", name)
	}
}

func TestCUDASample(t *testing.T) {
	p := newOpPairOrEmu(t, 6)
	// Top-k / top-p rows are drawn on the device unless the candidate set is
	// over 2048 tokens: with logits of scale 2 over 151936 words about half
	// the vocabulary is within the CPU's first threshold (the host draws
	// them); with scale 6 a few hundred are (the device does).
	for _, c := range []struct {
		V        int
		scale    float64
		hostRows bool
	}{{7, 2, false}, {320, 2, false}, {151936, 6, false}, {151936, 2, true}} {
		V := c.V
		rows := 40
		if p.gpu.dev == nil && V > 1000 {
			rows = 10 // the emulation: every kind of row still, twice
		}
		z := p.rnd(rows, V, c.scale)
		host0 := p.gpu.hostSamples
		params := make([]SampleParams, rows)
		u := make([]float64, rows)
		for i := range params {
			switch i % 5 {
			case 0:
				params[i] = SampleParams{} // greedy
			case 1:
				params[i] = SampleParams{Temperature: 1}
			case 2:
				params[i] = SampleParams{Temperature: 0.7}
			case 3:
				params[i] = SampleParams{Temperature: 1, TopK: 5}
			case 4:
				params[i] = SampleParams{Temperature: 0.9, TopP: 0.8}
			}
			u[i] = p.r.Float64()
		}
		a := p.cpu.Sample(z.c, params, u)
		b := p.gpu.Sample(z.g, params, u)
		for i := range a {
			if a[i].ID != b[i].ID {
				t.Errorf("V=%d row %d (%+v): id %d, CPU %d", V, i, params[i], b[i].ID, a[i].ID)
				continue
			}
			if d := math.Abs(float64(a[i].LogProb - b[i].LogProb)); d > 1e-4 {
				t.Errorf("V=%d row %d: logprob %g, CPU %g", V, i, b[i].LogProb, a[i].LogProb)
			}
			if d := math.Abs(float64(a[i].SampleLogProb - b[i].SampleLogProb)); d > 1e-4 {
				t.Errorf("V=%d row %d: sample logprob %g, CPU %g", V, i, b[i].SampleLogProb, a[i].SampleLogProb)
			}
		}
		if host := p.gpu.hostSamples - host0; (host > 0) != c.hostRows {
			t.Errorf("V=%d scale %g: %d filtered rows drawn on the host, want host draws: %v", V, c.scale, host, c.hostRows)
		}
	}
}

// TestCUDAParityWithTransformers is parity_test.go's check on the CUDA backend.
func TestCUDAParityWithTransformers(t *testing.T) {
	gpu, _ := CUDAAvailableReason()
	if !gpu && !envconfig.RequireCUDA.On() {
		// The emulation (lib/cuda/cudaemu): the backend's launches and
		// kernels, the GEMMs as loops.
		emuCUDA(t)
	}
	runParity(t, func(name string) Backend {
		if !gpu && !envconfig.RequireCUDA.On() {
			return emuCUDA(t)
		}
		be, err := NewCUDA()
		if err != nil {
			t.Fatal(err)
		}
		return be
	})
}

// TestCUDAAvailableReason: without a GPU the backend says why, in one line.
func TestCUDAAvailableReason(t *testing.T) {
	ok, why := CUDAAvailableReason()
	if envconfig.RequireCUDA.Get() == "1" && !ok {
		t.Fatalf("MEMPO_REQUIRE_CUDA=1 but CUDA is not available: %s", why)
	}
	if !ok && (why == "" || len(why) > 300) {
		t.Errorf("reason %q", why)
	}
	t.Logf("CUDA available=%v %s", ok, why)
}

// TestCUDABF16 measures the bf16 mode (bf16 GEMM operands, fp32
// accumulation, everything else fp32) against transformers' fp32 goldens and
// states its tolerances, about twice the worst seen on the H200 over the five
// fixtures (2026-11-30: logits 1.04e-2, log-probs 0.208 absolute on values
// down to −30, gradients 3.6e-2, greedy 32 of 32 tokens on every fixture):
// logits within 2e-2 of the logits' scale (max |Δ| / max |ref|), token
// log-probs within 0.3 absolute, every gradient within 6e-2 of its scale.
// Greedy agreement is logged, not required: a near-tie may flip in bf16.
// Without a GPU it runs on the emulation (the emulation's worst on
// 2026-12-07: logits 1.04e-2, log-probs 0.208, gradients 5.2e-2).
func TestCUDABF16(t *testing.T) {
	// One GEMM alone: bf16 rounding of both operands.
	p := newOpPairOrEmu(t, 9)
	p.gpu.SetBF16(true)
	a, b := p.rnd(130, 257, 1), p.rnd(97, 257, 1)
	c := p.out(130, 97)
	p.cpu.MatMul(c.c, a.c, b.c, false, true, 1, 0)
	p.gpu.MatMul(c.g, a.g, b.g, false, true, 1, 0)
	p.check("MatMul bf16", c, 2e-2)
	// A weight keeps its bf16 copy between products and remakes it after
	// a write: the second round must see the new values.
	w := p.rnd(97, 257, 1)
	p.gpu.MarkWeight(w.g)
	for round := 0; round < 3; round++ {
		c := p.out(130, 97)
		p.cpu.MatMul(c.c, a.c, w.c, false, true, 1, 0)
		p.gpu.MatMul(c.g, a.g, w.g, false, true, 1, 0)
		p.check(fmt.Sprintf("MatMul bf16 with a kept weight, round %d", round), c, 2e-2)
		nw := p.rnd(97, 257, 1)
		switch round {
		case 0:
			p.cpu.Copy(w.c, nw.c)
			p.gpu.Copy(w.g, nw.g)
		case 1:
			p.cpu.Add(w.c, nw.c)
			p.gpu.Add(w.g, nw.g)
		}
	}

	// An activation's rounding is kept for the next products (up to
	// maxCasts of them) and dropped when any op writes the activation: the
	// products after each in-place write must see the new values.
	x, wx := p.rnd(130, 256, 1), p.rnd(97, 256, 1)
	bias := p.rnd(1, 256, 1)
	for round := 0; round < 4; round++ {
		for rep := 0; rep < 2; rep++ {
			c := p.out(130, 97)
			p.cpu.MatMul(c.c, x.c, wx.c, false, true, 1, 0)
			p.gpu.MatMul(c.g, x.g, wx.g, false, true, 1, 0)
			p.check(fmt.Sprintf("MatMul bf16 with a kept activation, round %d", round), c, 2e-2)
		}
		switch round {
		case 0:
			p.cpu.AddBias(x.c, bias.c)
			p.gpu.AddBias(x.g, bias.g)
		case 1:
			pos := make([]int, 130)
			for i := range pos {
				pos[i] = 3 * i
			}
			p.cpu.RoPE(x.c, pos, 64, 10000, false)
			p.gpu.RoPE(x.g, pos, 64, 10000, false)
		case 2:
			// Written through a view of its buffer.
			y := p.rnd(10, 256, 1)
			p.cpu.Copy(p.cpu.View(x.c, 5, 10), y.c)
			p.gpu.Copy(p.gpu.View(x.g, 5, 10), y.g)
		}
	}

	for _, name := range fixtureCases {
		t.Run(name, func(t *testing.T) {
			be := p.gpu
			if be.dev != nil {
				var err error
				if be, err = NewCUDA(); err != nil {
					t.Fatal(err)
				}
			} else {
				be = emuCUDA(t)
			}
			be.SetBF16(true)
			m := loadFixtureOn(t, name, be)
			g := openGolden(t, name)
			seqs := [][]int{g.ids(t, "ids.0"), g.ids(t, "ids.1")}
			weights := [][]float32{g.f32(t, "weights.0"), g.f32(t, "weights.1")}
			logits, err := m.Logits(seqs)
			if err != nil {
				t.Fatal(err)
			}
			var le, lpe, ge float64
			for bi := range seqs {
				le = math.Max(le, maxRelErr(logits[bi], g.f32(t, "logits."+string(rune('0'+bi)))))
			}
			lps, err := m.LogProbs(seqs)
			if err != nil {
				t.Fatal(err)
			}
			for bi := range seqs {
				want := g.f32(t, "logprobs."+string(rune('0'+bi)))
				for i := range want {
					lpe = math.Max(lpe, math.Abs(float64(lps[bi][i]-want[i])))
				}
			}
			m.ZeroGrads()
			if _, _, err := m.Backward(seqs, weights); err != nil {
				t.Fatal(err)
			}
			worst := ""
			for pname, got := range m.Grads() {
				if e := maxRelErr(got, g.f32(t, "grad."+pname)); e > ge {
					ge, worst = e, pname
				}
			}
			prompt, want := g.ids(t, "greedy.prompt"), g.ids(t, "greedy.output")
			gen, err := m.Generate([]Request{{Prompt: prompt}}, GenerateOptions{MaxTokens: len(want), IgnoreEOS: true})
			if err != nil {
				t.Fatal(err)
			}
			agree := 0
			for agree < len(want) && gen[0].IDs[agree] == want[agree] {
				agree++
			}
			t.Logf("bf16 %s: logits rel err %.3g, log-prob abs err %.3g, worst grad rel err %.3g (%s), greedy agrees on the first %d of %d tokens",
				name, le, lpe, ge, worst, agree, len(want))
			if le > 2e-2 || lpe > 0.3 || ge > 6e-2 {
				t.Errorf("bf16 %s outside the stated tolerances", name)
			}
		})
	}
}

// TestCUDAPool checks that a freed buffer is handed out again (no driver
// call) and that a reused buffer is cleared by Zeros.
func TestCUDAPool(t *testing.T) {
	be := cudaOrSkip(t)
	a := be.Zeros(100, 101)
	be.Fill(a, 7)
	be.Free(a)
	h0, _, _ := be.PoolStats()
	b := be.Zeros(101, 100)
	if h1, _, _ := be.PoolStats(); h1 != h0+1 {
		t.Errorf("pool hits %d → %d: the freed buffer was not reused", h0, h1)
	}
	for i, v := range be.ToHost(b, nil) {
		if v != 0 {
			t.Fatalf("Zeros on a reused buffer: element %d = %g", i, v)
		}
	}
}

// TestCUDADualBF16 checks, in bf16 mode, the bf16 roundings that ops write
// next to their outputs for the products that read them (dual): each op's
// output goes through a product, compared with the CPU's fp32, and once
// more after an in-place write, which must make the rounding stale.
func TestCUDADualBF16(t *testing.T) {
	p := newOpPairOrEmu(t, 13)
	p.gpu.SetBF16(true)
	const R, C = 70, 128
	w := p.rnd(33, C, 1)
	product := func(name string, x pair) {
		t.Helper()
		o := p.out(R, 33)
		p.cpu.MatMul(o.c, x.c, w.c, false, true, 1, 0)
		p.gpu.MatMul(o.g, x.g, w.g, false, true, 1, 0)
		p.check(name+" → product", o, 2e-2)
		// An in-place write makes the rounding stale.
		d := p.rnd(R, C, 1)
		p.cpu.Add(x.c, d.c)
		p.gpu.Add(x.g, d.g)
		p.cpu.MatMul(o.c, x.c, w.c, false, true, 1, 0)
		p.gpu.MatMul(o.g, x.g, w.g, false, true, 1, 0)
		p.check(name+" → Add → product", o, 2e-2)
	}
	x, nw := p.rnd(R, C, 1), p.rnd(1, C, 1)
	o, rs := p.out(R, C), p.out(R, 1)
	p.cpu.RMSNorm(o.c, rs.c, x.c, nw.c, 1e-6)
	p.gpu.RMSNorm(o.g, rs.g, x.g, nw.g, 1e-6)
	{
		// A view of rows reads the rounding at its offset (the LM head's
		// chunks of the final norm's output): no cast of its own.
		casts := 0
		if inner := p.gpu.kernel; inner != nil {
			p.gpu.kernel = func(module, name string, grid, block cuda.Dim3, shmem int, args ...any) error {
				if strings.HasPrefix(name, "cast") {
					casts++
				}
				return inner(module, name, grid, block, shmem, args...)
			}
			defer func() { p.gpu.kernel = inner }()
		}
		vo := p.out(40, 33)
		p.cpu.MatMul(vo.c, p.cpu.View(o.c, 17, 40), w.c, false, true, 1, 0)
		p.gpu.MatMul(vo.g, p.gpu.View(o.g, 17, 40), w.g, false, true, 1, 0)
		p.check("RMSNorm → view of rows 17…56 → product", vo, 2e-2)
		if casts > 1 { // the weight's own rounding, once
			t.Errorf("a view of a tensor with its bf16 rounding was cast again (%d casts)", casts)
		}
	}
	product("RMSNorm", o)
	{
		// A ProductOnly norm writes only the rounding (and rstd).
		on := p.out(R, C)
		p.gpu.ProductOnly(on.g)
		p.cpu.RMSNorm(on.c, rs.c, x.c, nw.c, 1e-6)
		p.gpu.RMSNorm(on.g, rs.g, x.g, nw.g, 1e-6)
		p.check("ProductOnly RMSNorm rstd", rs, 1e-5)
		po := p.out(R, 33)
		p.cpu.MatMul(po.c, on.c, w.c, false, true, 1, 0)
		p.gpu.MatMul(po.g, on.g, w.g, false, true, 1, 0)
		p.check("ProductOnly RMSNorm → product", po, 2e-2)
	}

	g, u := p.rnd(R, C, 1), p.rnd(R, C, 1)
	a := p.out(R, C)
	p.cpu.SwiGLU(a.c, g.c, u.c)
	p.gpu.SwiGLU(a.g, g.g, u.g)
	product("SwiGLU", a)
	dout := p.rnd(R, C, 1)
	dg, du := p.out(R, C), p.out(R, C)
	p.cpu.SwiGLUBackward(dg.c, du.c, dout.c, g.c, u.c)
	p.gpu.SwiGLUBackward(dg.g, du.g, dout.g, g.g, u.g)
	product("SwiGLUBackward dgate", dg)
	product("SwiGLUBackward dup", du)

	y, bias := p.rnd(R, C, 1), p.rnd(1, C, 1)
	p.cpu.AddBias(y.c, bias.c)
	p.gpu.AddBias(y.g, bias.g)
	product("AddBias", y)

	pos := make([]int, R)
	for i := range pos {
		pos[i] = 5 * i
	}
	r := p.rnd(R, C, 1)
	p.cpu.RoPE(r.c, pos, 64, 1e6, false)
	p.gpu.RoPE(r.g, pos, 64, 1e6, false)
	product("RoPE", r)

	// The norm's backward (with and without the residual's gradient)
	// writes dx's rounding for the down and o_proj backward products.
	for _, withRes := range []bool{false, true} {
		dy, res := p.rnd(R, C, 1), p.rnd(R, C, 1)
		dx, dw := p.out(R, C), p.rnd(1, C, 0)
		p.cpu.RMSNormBackward(dx.c, dw.c, dy.c, x.c, nw.c, rs.c)
		if withRes {
			p.cpu.Add(dx.c, res.c)
			p.gpu.RMSNormBackwardAdd(dx.g, dw.g, dy.g, x.g, nw.g, rs.g, res.g)
		} else {
			p.gpu.RMSNormBackward(dx.g, dw.g, dy.g, x.g, nw.g, rs.g)
		}
		product(fmt.Sprintf("RMSNormBackward (residual %v)", withRes), dx)
	}

	z := p.rnd(R, C, 3)
	tg := make([]int, R)
	dlp := make([]float32, R)
	for i := range tg {
		tg[i] = (7 * i) % C
		dlp[i] = float32(i%5) - 2
	}
	tg[3] = -1
	lp, lse := p.out(R, 1), p.out(R, 1)
	p.cpu.TokenLogProbs(lp.c, lse.c, z.c, tg)
	p.gpu.TokenLogProbs(lp.g, lse.g, z.g, tg)
	p.cpu.TokenLogProbsBackward(z.c, z.c, lse.c, tg, dlp)
	p.gpu.TokenLogProbsBackward(z.g, z.g, lse.g, tg, dlp)
	product("TokenLogProbsBackward", z)

	// ProductOnly: SwiGLU writes only the bf16 rounding; products read it,
	// and any other op reading the tensor panics.
	po := p.out(R, C)
	p.gpu.ProductOnly(po.g)
	p.cpu.SwiGLU(po.c, g.c, u.c)
	p.gpu.SwiGLU(po.g, g.g, u.g)
	{
		o := p.out(R, 33)
		p.cpu.MatMul(o.c, po.c, w.c, false, true, 1, 0)
		p.gpu.MatMul(o.g, po.g, w.g, false, true, 1, 0)
		p.check("ProductOnly SwiGLU → product", o, 2e-2)
		func() {
			defer func() {
				if recover() == nil {
					t.Error("reading a ProductOnly tensor with Add did not panic")
				}
			}()
			p.gpu.Add(p.gpu.Zeros(R, C), po.g)
		}()
		p.gpu.Free(po.g)
	}

	// ProductOnly products: gate and up written only in bf16 (a second
	// product adding into gate, as an adapter does), SwiGLU and its backward
	// reading them and a bf16-only dout.
	{
		x, wg, wa, wu := p.rnd(R, C, 1), p.rnd(C, C, 0.1), p.rnd(C, C, 0.1), p.rnd(C, C, 0.1)
		gate, up, dout := p.out(R, C), p.out(R, C), p.out(R, C)
		for _, t := range []Tensor{gate.g, up.g, dout.g} {
			p.gpu.ProductOnly(t)
		}
		for _, be := range []Backend{p.cpu, p.gpu} {
			side := func(q pair) Tensor {
				if be == Backend(p.cpu) {
					return q.c
				}
				return q.g
			}
			be.MatMul(side(gate), side(x), side(wg), false, true, 1, 0)
			be.MatMul(side(gate), side(x), side(wa), false, true, 0.5, 1)
			be.MatMul(side(up), side(x), side(wu), false, true, 1, 0)
			be.MatMul(side(dout), side(x), side(wa), false, true, 1, 0)
		}
		act, dg, du := p.out(R, C), p.out(R, C), p.out(R, C)
		p.cpu.SwiGLU(act.c, gate.c, up.c)
		p.gpu.SwiGLU(act.g, gate.g, up.g)
		p.check("ProductOnly products → SwiGLU", act, 3e-2)
		p.cpu.SwiGLUBackward(dg.c, du.c, dout.c, gate.c, up.c)
		p.gpu.SwiGLUBackward(dg.g, du.g, dout.g, gate.g, up.g)
		p.check("ProductOnly products → SwiGLUBackward dgate", dg, 3e-2)
		p.check("ProductOnly products → SwiGLUBackward dup", du, 3e-2)
		// Every input and output bf16 only (swiglu_bf16x8 and
		// swiglu_bwd_bf16x8), the outputs read by products.
		act2, dg2, du2 := p.out(R, C), p.out(R, C), p.out(R, C)
		for _, t := range []Tensor{act2.g, dg2.g, du2.g} {
			p.gpu.ProductOnly(t)
		}
		p.cpu.SwiGLU(act2.c, gate.c, up.c)
		p.gpu.SwiGLU(act2.g, gate.g, up.g)
		p.cpu.SwiGLUBackward(dg2.c, du2.c, dout.c, gate.c, up.c)
		p.gpu.SwiGLUBackward(dg2.g, du2.g, dout.g, gate.g, up.g)
		for _, c := range []struct {
			name string
			x    pair
		}{{"SwiGLU", act2}, {"SwiGLUBackward dgate", dg2}, {"SwiGLUBackward dup", du2}} {
			o := p.out(R, 33)
			p.cpu.MatMul(o.c, c.x.c, w.c, false, true, 1, 0)
			p.gpu.MatMul(o.g, c.x.g, w.g, false, true, 1, 0)
			p.check("ProductOnly products → "+c.name+" (all bf16) → product", o, 3e-2)
		}
		func() {
			defer func() {
				if recover() == nil {
					t.Error("reading a ProductOnly product with Add did not panic")
				}
			}()
			p.gpu.Add(p.gpu.Zeros(R, C), gate.g)
		}()
	}

	// Attention on the tensor cores writes its output's rounding when its
	// sequences cover every row.
	sh := AttnShape{Heads: 2, KVHeads: 1, HeadDim: 64, Scale: 0.125}
	seqs := []AttnSeq{{Q: 0, N: 30, K: 0}, {Q: 30, N: 40, K: 30}}
	q, k, v := p.rnd(R, C, 1), p.rnd(R, 64, 1), p.rnd(R, 64, 1)
	att, alse := p.out(R, C), p.out(R, 2)
	p.cpu.Attention(att.c, alse.c, q.c, k.c, v.c, seqs, sh)
	p.gpu.Attention(att.g, alse.g, q.g, k.g, v.g, seqs, sh)
	product("Attention", att)
}
