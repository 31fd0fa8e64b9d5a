package cudaemu_test

// The small-batch decoding step's fused kernels (kernels/decode.cu): the
// GEMVs that take the residual add + RMSNorm in (gemv_qkv_bf16 with bias,
// RoPE and the KV-cache write, gemv_swiglu_norm_bf16) and attn_split_merged
// (the merge done by the last split), against float64 references here.

import (
	"fmt"
	"math"
	"testing"
	"unsafe"

	"github.com/mempo/mempo/lib/cuda"
)

func (e *decEmu) runShm(name string, grid, block cuda.Dim3, shmem int, args ...any) {
	e.t.Helper()
	if err := e.d.Kernel(name, grid, block, shmem, args...); err != nil {
		e.t.Fatal(err)
	}
}

func (e *decEmu) getU16(p cuda.Ptr, n int) []float32 {
	e.t.Helper()
	raw := make([]uint16, n)
	if err := e.d.DtoH(unsafe.Pointer(&raw[0]), p, 2*n); err != nil {
		e.t.Fatal(err)
	}
	out := make([]float32, n)
	for i, h := range raw {
		out[i] = float32(bf16Value(h))
	}
	return out
}

// normRef is gemv_norm_in's input rows: v = x + d (d may be nil) and the
// bf16 values of w·v·rstd(v), rounded as the kernel rounds them.
func normRef(x, d, w []float32, m, k int, eps float32) (v []float32, xn []float64) {
	v, xn = make([]float32, m*k), make([]float64, m*k)
	for r := 0; r < m; r++ {
		var ss float64
		for j := 0; j < k; j++ {
			v[r*k+j] = x[r*k+j]
			if d != nil {
				v[r*k+j] = d[r*k+j] + x[r*k+j]
			}
			ss += float64(v[r*k+j]) * float64(v[r*k+j])
		}
		rs := float32(1 / math.Sqrt(float64(float32(ss)/float32(k)+eps)))
		for j := 0; j < k; j++ {
			xn[r*k+j] = bf16Value(bf16Round(w[j] * (v[r*k+j] * rs)))
		}
	}
	return v, xn
}

func TestEmuDecodeFusedGEMV(t *testing.T) {
	e := newDecEmu(t)
	const k, heads, kvh, hd, half, capRows, npos = 48, 3, 1, 8, 4, 10, 12
	const eps = float32(1e-6)
	qd, kvd := heads*hd, kvh*hd
	cs, sn := make([]float32, npos*half), make([]float32, npos*half)
	for p := 0; p < npos; p++ {
		for i := 0; i < half; i++ {
			a := float64(p) * math.Pow(10000, -2*float64(i)/hd)
			cs[p*half+i], sn[p*half+i] = float32(math.Cos(a)), float32(math.Sin(a))
		}
	}
	csp, snp := e.f32(cs), e.f32(sn)
	w16 := func(n int) ([]uint16, []float64) {
		h, f := make([]uint16, n*k), make([]float64, n*k)
		for i, x := range e.rnd(n*k, 0.3) {
			h[i] = bf16Round(x)
			f[i] = bf16Value(h[i])
		}
		return h, f
	}
	dot := func(xn, w []float64, r, j int) float64 {
		var s float64
		for c := 0; c < k; c++ {
			s += xn[r*k+c] * w[j*k+c]
		}
		return s
	}
	for _, m := range []int{1, 3} {
		for _, withD := range []bool{false, true} {
			what := fmt.Sprintf("m=%d residual=%v", m, withD)
			x, dv, nw := e.rnd(m*k, 1), e.rnd(m*k, 1), e.rnd(k, 1)
			var dp cuda.Ptr
			var dIn []float32
			if withD {
				dp, dIn = e.f32(dv), dv
			}
			v, xn := normRef(x, dIn, nw, m, k, eps)
			xp, nwp := e.f32(x), e.f32(nw)

			// gemv_qkv_bf16: the last row is padding (writes q, no cache row).
			hq, fq := w16(qd)
			hk, fk := w16(kvd)
			hv, fv := w16(kvd)
			bq, bk, bv := e.rnd(qd, 1), e.rnd(kvd, 1), e.rnd(kvd, 1)
			pos, crow := []int32{3, 11, 0}[:m], []int32{4, 9, -1}[:m]
			if m == 1 {
				pos, crow = []int32{7}, []int32{5}
			}
			q, kc, vc, xo := e.empty(4*m*qd), e.empty(4*capRows*kvd), e.empty(4*capRows*kvd), e.empty(4*m*k)
			// A block per 4 pairs, or (m = 3) one block whose warps loop.
			pairs, blocks := (qd+2*kvd)/2, 1
			if m == 1 {
				blocks = (pairs + 3) / 4
			}
			e.runShm("gemv_qkv_bf16", cuda.Dim3{X: blocks}, cuda.Dim3{X: 128}, 2*m*k,
				q, kc, vc, e.u16(hq), e.u16(hk), e.u16(hv), e.f32(bq), e.f32(bk), e.f32(bv), xp, dp, xo, nwp, eps,
				e.i32(pos), e.i32(crow), csp, snp, m, k, heads, kvh, hd)
			rot := func(w []float64, b []float32, nh, r int) []float64 {
				out := make([]float64, nh*hd)
				p := int(pos[r])
				for h := 0; h < nh; h++ {
					for i := 0; i < half; i++ {
						j1, j2 := h*hd+i, h*hd+i+half
						x1, x2 := dot(xn, w, r, j1)+float64(b[j1]), dot(xn, w, r, j2)+float64(b[j2])
						c, s := float64(cs[p*half+i]), float64(sn[p*half+i])
						out[j1], out[j2] = x1*c-x2*s, x2*c+x1*s
					}
				}
				return out
			}
			gotQ, gotK, gotV := e.get(q, m*qd), e.get(kc, capRows*kvd), e.get(vc, capRows*kvd)
			written := map[int]bool{}
			for r := 0; r < m; r++ {
				e.near(what+fmt.Sprintf(" q row %d", r), gotQ[r*qd:(r+1)*qd], rot(fq, bq, heads, r), 2e-3)
				if crow[r] < 0 {
					continue
				}
				c := int(crow[r])
				written[c] = true
				e.near(what+fmt.Sprintf(" k row %d", r), gotK[c*kvd:(c+1)*kvd], rot(fk, bk, kvh, r), 2e-3)
				wantV := make([]float64, kvd)
				for j := range wantV {
					wantV[j] = dot(xn, fv, r, j) + float64(bv[j])
				}
				e.near(what+fmt.Sprintf(" v row %d", r), gotV[c*kvd:(c+1)*kvd], wantV, 2e-3)
			}
			for c := 0; c < capRows; c++ {
				if !written[c] && (!math.IsNaN(float64(gotK[c*kvd])) || !math.IsNaN(float64(gotV[c*kvd]))) {
					t.Errorf("%s: gemv_qkv_bf16 wrote cache row %d", what, c)
				}
			}
			gotX := e.get(xo, m*k)
			for i := range gotX {
				if withD && gotX[i] != v[i] {
					t.Fatalf("%s: residual sum element %d is %v, want %v", what, i, gotX[i], v[i])
				}
				if !withD && !math.IsNaN(float64(gotX[i])) {
					t.Fatalf("%s: residual buffer written without a residual", what)
				}
			}

			// gemv_swiglu_norm_bf16: 11 columns (two blocks, the last partly
			// idle; for m = 3 one block, its warps looping).
			const n = 11
			hg, fg := w16(n)
			hu, fu := w16(n)
			act, xo2 := e.empty(2*m*n), e.empty(4*m*k)
			if m == 1 {
				blocks = (n + 7) / 8
			}
			e.runShm("gemv_swiglu_norm_bf16", cuda.Dim3{X: blocks}, cuda.Dim3{X: 256}, 2*m*k,
				act, xp, dp, xo2, nwp, eps, e.u16(hg), e.u16(hu), m, n, k)
			want := make([]float64, m*n)
			for r := 0; r < m; r++ {
				for j := 0; j < n; j++ {
					g, u := dot(xn, fg, r, j), dot(xn, fu, r, j)
					want[r*n+j] = g / (1 + math.Exp(-g)) * u
				}
			}
			e.near(what+" gemv_swiglu_norm_bf16", e.getU16(act, m*n), want, 1e-2)
			if withD {
				e.near(what+" gemv_swiglu_norm_bf16 residual", e.get(xo2, m*k), f64(v), 0)
			}
		}
	}
}

func f64(v []float32) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = float64(x)
	}
	return out
}

// TestEmuDecodeAttentionMerged: attn_split_merged gives attn_split +
// attn_split_combine's outputs bit for bit and leaves its counters at zero,
// over several launches on the same counters.
func TestEmuDecodeAttentionMerged(t *testing.T) {
	e := newDecEmu(t)
	const heads, kvh, hd, slotRows, chunk = 6, 2, 24, 80, 16
	g, qd, kvd := heads/kvh, heads*hd, kvh*hd
	nsp := (slotRows + chunk - 1) / chunk
	scale := float32(1 / math.Sqrt(hd))
	keys := []int{1, 33, 80}
	R := len(keys)
	var rows []int32
	for i, n := range keys {
		rows = append(rows, int32(i), int32(i*slotRows), int32(n))
	}
	rp := e.i32(rows)
	cnt := e.i32(make([]int32, R*heads))
	for rep := 0; rep < 2; rep++ {
		qp, kp, vp := e.f32(e.rnd(R*qd, 1)), e.f32(e.rnd(R*slotRows*kvd, 1)), e.f32(e.rnd(R*slotRows*kvd, 1))
		var outs [2][3][]float32
		for i, merged := range []bool{false, true} {
			out, o16, lse := e.empty(4*R*qd), e.empty(2*R*qd), e.empty(4*R*heads)
			part := e.empty(4 * R * heads * nsp * (hd + 2))
			if merged {
				e.run("attn_split_merged", cuda.Dim3{X: R, Y: kvh, Z: nsp}, cuda.Dim3{X: 32 * g}, out, o16, lse, part, qp, kp, vp, rp, heads, kvh, hd, scale, chunk, cnt)
			} else {
				e.run("attn_split", cuda.Dim3{X: R, Y: kvh, Z: nsp}, cuda.Dim3{X: 32 * g}, out, o16, lse, part, qp, kp, vp, rp, heads, kvh, hd, scale, chunk)
				e.run("attn_split_combine", cuda.Dim3{X: R, Y: heads}, cuda.Dim3{X: 32}, out, o16, lse, part, rp, heads, hd, nsp)
			}
			outs[i] = [3][]float32{e.get(out, R*qd), e.getU16(o16, R*qd), e.get(lse, R*heads)}
		}
		for j, name := range []string{"out", "bf16 out", "lse"} {
			for i, x := range outs[1][j] {
				if math.Float32bits(x) != math.Float32bits(outs[0][j][i]) {
					t.Fatalf("launch %d: attn_split_merged %s element %d = %v, attn_split + combine %v", rep, name, i, x, outs[0][j][i])
				}
			}
		}
		c := make([]int32, R*heads)
		if err := e.d.DtoH(unsafe.Pointer(&c[0]), cnt, 4*len(c)); err != nil {
			t.Fatal(err)
		}
		for i, v := range c {
			if v != 0 {
				t.Fatalf("launch %d: counter %d left at %d", rep, i, v)
			}
		}
	}
}
