package cudaemu_test

import (
	"fmt"
	"math"
	"testing"
	"unsafe"

	"github.com/mempo/mempo/lib/cuda"
)

// TestEmuDecodePersist holds decode.cu's dec_persist (every layer of a
// small bf16 decoding step in one launch) to the separate launches it
// replaces, bit for bit: per layer dec_add_rmsnorm, gemv_qkv_rope_bf16,
// attn_split_sub, gemv_bf16 of the output product (its bias added as
// add_bias_f32 adds it), dec_add_rmsnorm, gemv_swiglu_bf16 and gemv_bf16 of
// the down product. The emulation runs blocks one after another, so the
// persistent kernel runs one phase a launch (its grid barriers are the GPU
// runs' part: lib/model's TestCUDADecodeStep), except with a grid of one
// block, which also runs every phase in one launch (the barrier is then the
// block's); grids of one and of several blocks, head dims of each kernel
// (32 and 128 with two warps a head, 160 with one), three rows with one
// padding row, a row whose keys span several splits.
func TestEmuDecodePersist(t *testing.T) {
	e := newDecEmu(t)
	for _, c := range []struct {
		hd, S          int
		attn, persist  string
		heads, kvHeads int
	}{
		{32, 2, "attn_split_sub2", "dec_persist_2_64", 4, 2},
		{128, 2, "attn_split_sub2", "dec_persist_2_128", 6, 2},
		{160, 1, "attn_split_sub1", "dec_persist_1_256", 4, 2},
	} {
		for _, grid := range []int{1, 3} {
			for _, whole := range []bool{false, true} {
				if whole && grid != 1 {
					continue
				}
				t.Run(fmt.Sprintf("%s/grid=%d/one-launch=%v", c.persist, grid, whole), func(t *testing.T) {
					emuPersist(t, e, c.hd, c.S, c.heads, c.kvHeads, c.attn, c.persist, grid, whole)
				})
			}
		}
	}
}

func emuPersist(t *testing.T, e *decEmu, hd, S, heads, kvh int, attnKernel, persistKernel string, grid int, oneLaunch bool) {
	const H, I, layers, m, slotRows, nsp, minChunk = 64, 104, 2, 3, 64, 4, 16
	const eps = float32(1e-6)
	g, qd, kvd := heads/kvh, heads*hd, kvh*hd
	scale := float32(1 / math.Sqrt(float64(hd)))
	bf := func(n int) cuda.Ptr {
		h := make([]uint16, n)
		for i, x := range e.rnd(n, 0.3) {
			h[i] = bf16Round(x)
		}
		return e.u16(h)
	}
	// Rows: slot 0 at position 40, slot 1 at 20, a padding row (position
	// 0, no cache row, one key of slot 0).
	pos, crow := []int32{40, 20, 0}, []int32{40, slotRows + 20, -1}
	rows := []int32{0, 0, 41, 0, 0, 1, slotRows, 21, 0, 0, 2, 0, 1, 0, 0} // (query, K, keys, P, PN): no shared prefix
	pp, cp, rp := e.i32(pos), e.i32(crow), e.i32(rows)
	cs, sn := make([]float32, slotRows*hd/2), make([]float32, slotRows*hd/2)
	for p := 0; p < slotRows; p++ {
		for i := 0; i < hd/2; i++ {
			a := float64(p) / math.Pow(10000, float64(2*i)/float64(hd))
			cs[p*hd/2+i], sn[p*hd/2+i] = float32(math.Cos(a)), float32(math.Sin(a))
		}
	}
	csp, snp := e.f32(cs), e.f32(sn)
	type layer struct {
		wq, wk, wv, wo, wg, wu, wd, ln1, ln2, bq, bk, bv, bo cuda.Ptr
		kc, vc                                               []float32
		bo32                                                 []float32
	}
	L := make([]layer, layers)
	for l := range L {
		ln1, ln2 := e.rnd(H, 0.2), e.rnd(H, 0.2)
		for j := range ln1 {
			ln1[j] += 1
			ln2[j] += 1
		}
		L[l] = layer{wq: bf(qd * H), wk: bf(kvd * H), wv: bf(kvd * H), wo: bf(H * qd), wg: bf(I * H), wu: bf(I * H), wd: bf(H * I),
			ln1: e.f32(ln1), ln2: e.f32(ln2), bq: e.f32(e.rnd(qd, 0.1)), bk: e.f32(e.rnd(kvd, 0.1)), bv: e.f32(e.rnd(kvd, 0.1)),
			kc: e.rnd(2*slotRows*kvd, 1), vc: e.rnd(2*slotRows*kvd, 1)}
		if l == 1 {
			L[l].bo32 = e.rnd(H, 0.1) // an output bias in one layer only
			L[l].bo = e.f32(L[l].bo32)
		}
	}
	x0 := e.rnd(m*H, 1)
	bits := func(p cuda.Ptr, n int) []int32 { return e.geti(p, n) }
	get16 := func(p cuda.Ptr, n int) []uint16 {
		v := make([]uint16, n)
		if err := e.d.DtoH(unsafe.Pointer(&v[0]), p, 2*n); err != nil {
			t.Fatal(err)
		}
		return v
	}
	normThreads := min(1024, max(32, (H+31)/32*32))

	// The separate launches.
	x, xn, q := e.f32(x0), e.empty(2*m*H), e.empty(4*m*qd)
	att, att16, lse := e.empty(4*m*qd), e.empty(2*m*qd), e.empty(4*m*heads)
	part, cnt := e.empty(4*m*heads*nsp*(hd+2)), e.i32(make([]int32, m*heads))
	o, act := e.empty(4*m*H), e.empty(2*m*I)
	var kcs, vcs []cuda.Ptr
	for l := range L {
		W := &L[l]
		kc, vc := e.f32(W.kc), e.f32(W.vc)
		kcs, vcs = append(kcs, kc), append(vcs, vc)
		var d cuda.Ptr
		if l > 0 {
			d = o
		}
		e.run("dec_add_rmsnorm", cuda.Dim3{X: m}, cuda.Dim3{X: normThreads}, x, d, cuda.Ptr(0), xn, W.ln1, m, H, eps)
		tasks := (heads+kvh)*hd/2 + kvd
		e.run("gemv_qkv_rope_bf16", cuda.Dim3{X: (tasks + 7) / 8}, cuda.Dim3{X: 256}, q, kc, vc, W.wq, W.wk, W.wv, W.bq, W.bk, W.bv, xn, m, H,
			pp, cp, csp, snp, heads, kvh, hd)
		e.runShared(attnKernel, cuda.Dim3{X: m, Y: kvh, Z: nsp}, cuda.Dim3{X: 32 * g * S}, 4*S*g*(hd+2), att, att16, lse, part, q, kc, vc, rp,
			heads, kvh, hd, scale, minChunk, cnt)
		e.run("gemv_bf16", cuda.Dim3{X: (H + 3) / 4}, cuda.Dim3{X: 128}, o, att16, W.wo, m, H, qd)
		if W.bo32 != nil { // add_bias_f32: o = o + b
			ov := e.get(o, m*H)
			for i := range ov {
				ov[i] = ov[i] + W.bo32[i%H]
			}
			if err := e.d.HtoD(o, unsafe.Pointer(&ov[0]), 4*len(ov)); err != nil {
				t.Fatal(err)
			}
		}
		e.run("dec_add_rmsnorm", cuda.Dim3{X: m}, cuda.Dim3{X: normThreads}, x, o, cuda.Ptr(0), xn, W.ln2, m, H, eps)
		e.run("gemv_swiglu_bf16", cuda.Dim3{X: (I + 7) / 8}, cuda.Dim3{X: 256}, act, xn, W.wg, W.wu, m, I, H)
		e.run("gemv_bf16", cuda.Dim3{X: (H + 3) / 4}, cuda.Dim3{X: 128}, o, act, W.wd, m, H, I)
	}
	// The last residual add, which the final norm would do.
	xv, ov := e.get(x, m*H), e.get(o, m*H)
	for i := range xv {
		xv[i] = ov[i] + xv[i]
	}

	// dec_persist, one phase a launch.
	px, pq := e.f32(x0), e.empty(4*m*qd)
	patt, patt16, plse := e.empty(4*m*qd), e.empty(2*m*qd), e.empty(4*m*heads)
	ppart, pcnt, pact := e.empty(4*m*heads*nsp*(hd+2)), e.i32(make([]int32, m*heads)), e.empty(2*m*I)
	bar := e.i32(make([]int32, 4))
	var tab []uint64
	var pkcs, pvcs []cuda.Ptr
	for l := range L {
		W := &L[l]
		kc, vc := e.f32(W.kc), e.f32(W.vc)
		pkcs, pvcs = append(pkcs, kc), append(pvcs, vc)
		for _, p := range []cuda.Ptr{W.wq, W.wk, W.wv, W.wo, W.wg, W.wu, W.wd, W.ln1, W.ln2, W.bq, W.bk, W.bv, W.bo, kc, vc} {
			tab = append(tab, uint64(p))
		}
	}
	tp := e.put(unsafe.Pointer(&tab[0]), 8*len(tab))
	attnFloats := (S*g*(hd+2) + 3) / 4 * 4
	opRows := m * max(H, qd, I)
	step := 1
	if oneLaunch {
		step = 5 * layers
	}
	for ph := 0; ph < 5*layers; ph += step {
		e.runShared(persistKernel, cuda.Dim3{X: grid}, cuda.Dim3{X: 32 * g * S}, 4*attnFloats+2*opRows,
			tp, ph, ph+step, px, pq, patt, patt16, plse, ppart, pcnt, pact, pp, cp, rp, csp, snp, m, H, I, heads, kvh, hd, eps, scale, nsp,
			minChunk, bar, uint64(1e9), cuda.Ptr(0))
	}

	same := func(what string, got, want []int32) {
		t.Helper()
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("%s: element %d is %#x, separate launches %#x", what, i, got[i], want[i])
				return
			}
		}
	}
	wantX := make([]int32, len(xv))
	for i, f := range xv {
		wantX[i] = int32(math.Float32bits(f))
	}
	same("residual stream", bits(px, m*H), wantX)
	for l := range L {
		same(fmt.Sprintf("layer %d k cache", l), bits(pkcs[l], 2*slotRows*kvd), bits(kcs[l], 2*slotRows*kvd))
		same(fmt.Sprintf("layer %d v cache", l), bits(pvcs[l], 2*slotRows*kvd), bits(vcs[l], 2*slotRows*kvd))
	}
	same("q (last layer)", bits(pq, m*qd), bits(q, m*qd))
	same("attention (last layer)", bits(patt, m*qd), bits(att, m*qd))
	same("lse (last layer)", bits(plse, m*heads), bits(lse, m*heads))
	a16, b16 := get16(patt16, m*qd), get16(att16, m*qd)
	c16, d16 := get16(pact, m*I), get16(act, m*I)
	for i := range a16 {
		if a16[i] != b16[i] {
			t.Fatalf("attention bf16 element %d: %#x, separate launches %#x", i, a16[i], b16[i])
		}
	}
	for i := range c16 {
		if c16[i] != d16[i] {
			t.Fatalf("SwiGLU bf16 element %d: %#x, separate launches %#x", i, c16[i], d16[i])
		}
	}
	for i, n := range e.geti(pcnt, m*heads) {
		if n != 0 {
			t.Errorf("attention counter %d left at %d", i, n)
		}
	}
	// Nothing left NaN (unwritten) in the stream.
	for i, f := range e.get(px, m*H) {
		if math.IsNaN(float64(f)) {
			t.Fatalf("residual element %d is NaN", i)
		}
	}
}
