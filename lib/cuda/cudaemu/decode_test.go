package cudaemu_test

// lib/cuda's kernels/decode.cu (the CUDA decoding step of lib/model) on the
// kernel emulation (this package), against references computed here in
// float64: residual add + RMSNorm, bias + RoPE + KV-cache write (padding
// rows write no cache row), split-key decode attention with its merge (head
// dims that are not multiples of 32, splits past a row's keys, one split),
// and the small-batch bf16 GEMV kernels. Outputs start as NaN (the
// emulation's fresh memory), so an unwritten element fails; red zones catch
// writes out of bounds. The GPU runs of these kernels are lib/model's
// TestCUDADecodeKernels and TestCUDADecodeStep.

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"unsafe"

	"github.com/mempo/mempo/lib/cuda"
	"github.com/mempo/mempo/lib/cuda/cudaemu"
)

type decEmu struct {
	t *testing.T
	d *cudaemu.Device
	r *rand.Rand
}

func newDecEmu(t *testing.T) *decEmu { return newEmuModule(t, "decode", 3) }

// newEmuModule is the emulation of kernels/<module>.cu with a generator of
// seed seed (the test skips where g++ is missing).
func newEmuModule(t *testing.T, module string, seed uint64) *decEmu {
	if ok, why := cudaemu.Available(); !ok {
		t.Skipf("no kernel emulation: %s", why)
	}
	dir := t.TempDir()
	d, err := cudaemu.NewModule(dir, module, 0)
	os.RemoveAll(dir)
	if err != nil {
		t.Fatal(err)
	}
	return &decEmu{t: t, d: d, r: rand.New(rand.NewPCG(seed, 16))}
}

func (e *decEmu) rnd(n int, scale float64) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(scale * e.r.NormFloat64())
	}
	return v
}

// put copies a slice to a new device buffer; empty returns an unwritten one.
func (e *decEmu) put(p unsafe.Pointer, bytes int) cuda.Ptr {
	e.t.Helper()
	q, err := e.d.Alloc(bytes)
	if err != nil {
		e.t.Fatal(err)
	}
	if p != nil {
		if err := e.d.HtoD(q, p, bytes); err != nil {
			e.t.Fatal(err)
		}
	}
	return q
}

func (e *decEmu) f32(v []float32) cuda.Ptr { return e.put(unsafe.Pointer(&v[0]), 4*len(v)) }
func (e *decEmu) i32(v []int32) cuda.Ptr   { return e.put(unsafe.Pointer(&v[0]), 4*len(v)) }
func (e *decEmu) u16(v []uint16) cuda.Ptr  { return e.put(unsafe.Pointer(&v[0]), 2*len(v)) }
func (e *decEmu) empty(bytes int) cuda.Ptr { return e.put(nil, bytes) }

func (e *decEmu) get(p cuda.Ptr, n int) []float32 {
	e.t.Helper()
	v := make([]float32, n)
	if err := e.d.DtoH(unsafe.Pointer(&v[0]), p, 4*n); err != nil {
		e.t.Fatal(err)
	}
	return v
}

func (e *decEmu) geti(p cuda.Ptr, n int) []int32 {
	e.t.Helper()
	v := make([]int32, n)
	if err := e.d.DtoH(unsafe.Pointer(&v[0]), p, 4*n); err != nil {
		e.t.Fatal(err)
	}
	return v
}

func (e *decEmu) runShared(name string, grid, block cuda.Dim3, shmem int, args ...any) {
	e.t.Helper()
	if err := e.d.Kernel(name, grid, block, shmem, args...); err != nil {
		e.t.Fatal(err)
	}
}

func (e *decEmu) run(name string, grid, block cuda.Dim3, args ...any) {
	e.t.Helper()
	e.runShared(name, grid, block, 0, args...)
}

// near fails when got and want differ by more than tol of want's scale, or
// got has a NaN.
func (e *decEmu) near(what string, got []float32, want []float64, tol float64) {
	e.t.Helper()
	var d, s float64
	for i := range want {
		if math.IsNaN(float64(got[i])) {
			e.t.Errorf("%s: element %d is NaN (not written?)", what, i)
			return
		}
		d = math.Max(d, math.Abs(float64(got[i])-want[i]))
		s = math.Max(s, math.Abs(want[i]))
	}
	if d > tol*math.Max(s, 1e-30) {
		e.t.Errorf("%s: max error %.3g of scale %.3g", what, d, s)
	}
}

// bf16Round is float32 → bfloat16 bits, round to nearest even (model.cu's
// to_bf16, NaN aside).
func bf16Round(f float32) uint16 {
	u := math.Float32bits(f)
	u += 0x7fff + (u>>16)&1
	return uint16(u >> 16)
}

func bf16Value(h uint16) float64 { return float64(math.Float32frombits(uint32(h) << 16)) }

func TestEmuDecodeNormRoPE(t *testing.T) {
	e := newDecEmu(t)
	// dec_add_rmsnorm: 3 rows of 37, with and without the residual.
	const rows, dim = 3, 37
	for _, withD := range []bool{false, true} {
		x, d, w := e.rnd(rows*dim, 1), e.rnd(rows*dim, 1), e.rnd(dim, 1)
		xp, wp := e.f32(x), e.f32(w)
		var dp cuda.Ptr
		if withD {
			dp = e.f32(d)
		}
		o32, o16 := e.empty(4*rows*dim), e.empty(2*rows*dim)
		e.run("dec_add_rmsnorm", cuda.Dim3{X: rows}, cuda.Dim3{X: 64}, xp, dp, o32, o16, wp, rows, dim, float32(1e-6))
		wantX, wantO := make([]float64, rows*dim), make([]float64, rows*dim)
		for r := 0; r < rows; r++ {
			var ss float64
			for j := 0; j < dim; j++ {
				v := float64(x[r*dim+j])
				if withD {
					v = float64(x[r*dim+j] + d[r*dim+j])
				}
				wantX[r*dim+j] = v
				ss += v * v
			}
			rs := 1 / math.Sqrt(ss/dim+1e-6)
			for j := 0; j < dim; j++ {
				wantO[r*dim+j] = float64(w[j]) * wantX[r*dim+j] * rs
			}
		}
		e.near(fmt.Sprintf("dec_add_rmsnorm residual=%v x", withD), e.get(xp, rows*dim), wantX, 1e-7)
		e.near(fmt.Sprintf("dec_add_rmsnorm residual=%v out", withD), e.get(o32, rows*dim), wantO, 1e-6)
		raw := make([]uint16, rows*dim)
		if err := e.d.DtoH(unsafe.Pointer(&raw[0]), o16, 2*len(raw)); err != nil {
			t.Fatal(err)
		}
		got16 := make([]float32, len(raw))
		for i, h := range raw {
			got16[i] = float32(bf16Value(h))
		}
		e.near(fmt.Sprintf("dec_add_rmsnorm residual=%v bf16 out", withD), got16, wantO, 1e-2)
	}

	// dec_rope_kv: 3 heads / 1 kv head of 8, rows at positions 0, 5, 9; the
	// middle row is padding (no cache row).
	const heads, kvh, hd, half, npos, capRows = 3, 1, 8, 4, 16, 12
	qd, kvd := heads*hd, kvh*hd
	q, k, v := e.rnd(3*qd, 1), e.rnd(3*kvd, 1), e.rnd(3*kvd, 1)
	bq, bk, bv := e.rnd(qd, 1), e.rnd(kvd, 1), e.rnd(kvd, 1)
	pos, crow := []int32{0, 5, 9}, []int32{2, -1, 7}
	cs, sn := make([]float32, npos*half), make([]float32, npos*half)
	for p := 0; p < npos; p++ {
		for i := 0; i < half; i++ {
			a := float64(p) * math.Pow(10000, -2*float64(i)/hd)
			cs[p*half+i], sn[p*half+i] = float32(math.Cos(a)), float32(math.Sin(a))
		}
	}
	qp := e.f32(q)
	kc, vc := e.empty(4*capRows*kvd), e.empty(4*capRows*kvd)
	e.run("dec_rope_kv", cuda.Dim3{X: 3}, cuda.Dim3{X: 128}, qp, e.f32(k), e.f32(v), e.f32(bq), e.f32(bk), e.f32(bv), kc, vc,
		e.i32(pos), e.i32(crow), e.f32(cs), e.f32(sn), heads, kvh, hd)
	rot := func(x, b []float32, nh int, p int32) []float64 {
		out := make([]float64, nh*hd)
		for h := 0; h < nh; h++ {
			for i := 0; i < half; i++ {
				x1, x2 := float64(x[h*hd+i]+b[h*hd+i]), float64(x[h*hd+i+half]+b[h*hd+i+half])
				c, s := float64(cs[int(p)*half+i]), float64(sn[int(p)*half+i])
				out[h*hd+i], out[h*hd+i+half] = x1*c-x2*s, x2*c+x1*s
			}
		}
		return out
	}
	gotQ, gotK, gotV := e.get(qp, 3*qd), e.get(kc, capRows*kvd), e.get(vc, capRows*kvd)
	for r := 0; r < 3; r++ {
		e.near(fmt.Sprintf("dec_rope_kv q row %d", r), gotQ[r*qd:(r+1)*qd], rot(q[r*qd:], bq, heads, pos[r]), 1e-6)
		if crow[r] < 0 {
			continue
		}
		c := int(crow[r])
		e.near(fmt.Sprintf("dec_rope_kv k row %d", r), gotK[c*kvd:(c+1)*kvd], rot(k[r*kvd:], bk, kvh, pos[r]), 1e-6)
		wantV := make([]float64, kvd)
		for j := range wantV {
			wantV[j] = float64(v[r*kvd+j] + bv[j])
		}
		e.near(fmt.Sprintf("dec_rope_kv v row %d", r), gotV[c*kvd:(c+1)*kvd], wantV, 1e-7)
	}
	// Cache rows no row writes stay as they were (NaN from the emulation).
	for c := 0; c < capRows; c++ {
		if c != 2 && c != 7 && !math.IsNaN(float64(gotK[c*kvd])) {
			t.Errorf("dec_rope_kv wrote cache row %d", c)
		}
	}
}

func TestEmuDecodeAttention(t *testing.T) {
	e := newDecEmu(t)
	// Head dims of the three kernel bodies of each (1–2, 3–4 and 5–8
	// values a lane).
	for _, hd := range []int{40, 72, 160} {
		emuDecodeAttention(t, e, hd, 4, 2)
	}
	// Qwen2.5-0.5B's and 7B's groups of 7 query heads (hd 64, 128).
	emuDecodeAttention(t, e, 64, 14, 2)
	emuDecodeAttention(t, e, 128, 7, 1)
}

// emuDecodeAttention checks attn_split (+ attn_split_combine),
// attn_split_merged, attn_split_sub and attn_split_group for head dim hd,
// heads query heads and kvh kv heads. Rows 1 and 2 read their first keys
// from a shared prefix after the slots (rows (query, K, keys, P, PN):
// key j at row P+j below PN, K+j from it); row 2's prefix spans splits.
func emuDecodeAttention(t *testing.T, e *decEmu, hd, heads, kvh int) {
	const slotRows, prefixRows = 64, 32
	g, qd, kvd := heads/kvh, heads*hd, kvh*hd
	scale := float32(1 / math.Sqrt(float64(hd)))
	keys, pn, pAt := []int{1, 23, 50}, []int{0, 5, 20}, []int{0, 7, 0}
	R := len(keys)
	cacheRows := R*slotRows + prefixRows
	q, k, v := e.rnd(R*qd, 1), e.rnd(cacheRows*kvd, 1), e.rnd(cacheRows*kvd, 1)
	var rows []int32
	keyRow := func(i, j int) int {
		if j < pn[i] {
			return R*slotRows + pAt[i] + j
		}
		return i*slotRows + j
	}
	for i, n := range keys {
		rows = append(rows, int32(i), int32(i*slotRows), int32(n), int32(R*slotRows+pAt[i]), int32(pn[i]))
	}
	// float64 softmax attention of query head h of row i over its slot.
	wantO, wantL := make([]float64, R*qd), make([]float64, R*heads)
	for i, n := range keys {
		for h := 0; h < heads; h++ {
			kh := h / g
			s := make([]float64, n)
			m := math.Inf(-1)
			for j := 0; j < n; j++ {
				var dot float64
				for d := 0; d < hd; d++ {
					dot += float64(q[i*qd+h*hd+d]) * float64(k[keyRow(i, j)*kvd+kh*hd+d])
				}
				s[j] = dot * float64(scale)
				m = math.Max(m, s[j])
			}
			var l float64
			for j := range s {
				s[j] = math.Exp(s[j] - m)
				l += s[j]
			}
			for d := 0; d < hd; d++ {
				var o float64
				for j := 0; j < n; j++ {
					o += s[j] * float64(v[keyRow(i, j)*kvd+kh*hd+d])
				}
				wantO[i*qd+h*hd+d] = o / l
			}
			wantL[i*heads+h] = m + math.Log(l)
		}
	}
	qp, kp, vp, rp := e.f32(q), e.f32(k), e.f32(v), e.i32(rows)
	// (splits, fewest keys a split): one split; splits of a share of the
	// keys, rows 1 and 23 using fewer of them than row 50; more splits than
	// keys of the short rows; more than 32 splits in use (split_merge's
	// lanes hold the first 32 splits' weights).
	for _, c := range []struct{ nsp, minChunk int }{{1, 16}, {4, 16}, {8, 4}, {16, 16}, {64, 1}} {
		nsp := c.nsp
		kernels := []string{"attn_split", "attn_split_merged", "attn_split_sub"}
		if hd <= 64 {
			kernels = append(kernels, "attn_split_sub, 2 ways") // small steps' (lib/model's attnSubWays)
		}
		if hd <= 128 && hd%4 == 0 && g <= 8 {
			kernels = append(kernels, "attn_split_group, 4 warps", "attn_split_group, 1 warp") // large steps' (attnGroup)
		}
		for _, kernel := range kernels {
			name := fmt.Sprintf("%s hd %d nsp %d min chunk %d", kernel, hd, nsp, c.minChunk)
			out, o16, lse := e.empty(4*R*qd), e.empty(2*R*qd), e.empty(4*R*heads)
			part := e.empty(4 * R * heads * nsp * (hd + 2))
			if strings.HasPrefix(kernel, "attn_split_group") {
				W := 4
				if strings.HasSuffix(kernel, "1 warp") {
					W = 1
				}
				cnt := e.i32(make([]int32, R*heads))
				shared := 4 * (g*hd + W*g*32 + W*g*(hd+2))
				e.runShared("attn_split_group", cuda.Dim3{X: R, Y: kvh, Z: nsp}, cuda.Dim3{X: 32 * W}, shared, out, o16, lse, part, qp, kp, vp, rp, heads, kvh, hd, scale, c.minChunk, cnt)
				for i, n := range e.geti(cnt, R*heads) {
					if n != 0 {
						t.Errorf("%s: counter %d left at %d", name, i, n)
					}
				}
			} else if strings.HasPrefix(kernel, "attn_split_sub") {
				// S warps a head: 4 up to hd 64 (2 for small steps), 2 up to
				// 128, 1 beyond; the fewest keys a split a multiple of S·8
				// (S·4 beyond 128).
				S, ku := 4, 8
				switch {
				case hd > 128:
					S, ku = 1, 4
				case hd > 64 || strings.HasSuffix(kernel, "2 ways"):
					S = 2
				}
				minChunk := max(c.minChunk, S*ku)
				cnt := e.i32(make([]int32, R*heads))
				e.runShared(fmt.Sprintf("attn_split_sub%d", S), cuda.Dim3{X: R, Y: kvh, Z: nsp}, cuda.Dim3{X: 32 * g * S}, 4*S*g*(hd+2), out, o16, lse, part, qp, kp, vp, rp, heads, kvh, hd, scale, minChunk, cnt)
				for i, n := range e.geti(cnt, R*heads) {
					if n != 0 {
						t.Errorf("%s: counter %d left at %d", name, i, n)
					}
				}
			} else if kernel == "attn_split_merged" {
				cnt := e.i32(make([]int32, R*heads))
				e.run("attn_split_merged", cuda.Dim3{X: R, Y: kvh, Z: nsp}, cuda.Dim3{X: 32 * g}, out, o16, lse, part, qp, kp, vp, rp, heads, kvh, hd, scale, c.minChunk, cnt)
				for i, n := range e.geti(cnt, R*heads) {
					if n != 0 {
						t.Errorf("%s: counter %d left at %d", name, i, n)
					}
				}
			} else {
				e.run("attn_split", cuda.Dim3{X: R, Y: kvh, Z: nsp}, cuda.Dim3{X: 32 * g}, out, o16, lse, part, qp, kp, vp, rp, heads, kvh, hd, scale, c.minChunk)
				e.run("attn_split_combine", cuda.Dim3{X: R, Y: heads}, cuda.Dim3{X: 32}, out, o16, lse, part, rp, heads, hd, nsp, c.minChunk)
			}
			e.near(name+" out", e.get(out, R*qd), wantO, 1e-5)
			e.near(name+" lse", e.get(lse, R*heads), wantL, 1e-6)
			raw := make([]uint16, R*qd)
			if err := e.d.DtoH(unsafe.Pointer(&raw[0]), o16, 2*len(raw)); err != nil {
				t.Fatal(err)
			}
			got16 := make([]float32, len(raw))
			for i, h := range raw {
				got16[i] = float32(bf16Value(h))
			}
			e.near(name+" bf16 out", got16, wantO, 1e-2)
		}
	}
}

func TestEmuDecodeGEMV(t *testing.T) {
	e := newDecEmu(t)
	const k = 2168 // 271 pieces of 8 values: two strides of 128 pieces and a partial one
	rnd16 := func(n int, scale float64) ([]uint16, []float64) {
		h, f := make([]uint16, n), make([]float64, n)
		for i, x := range e.rnd(n, scale) {
			h[i] = bf16Round(x)
			f[i] = bf16Value(h[i])
		}
		return h, f
	}
	dot := func(x, w []float64, r, j int) float64 {
		var s float64
		for c := 0; c < k; c++ {
			s += x[r*k+c] * w[j*k+c]
		}
		return s
	}
	for _, m := range []int{1, 3, 4} {
		x16, x := rnd16(m*k, 1)
		xp := e.u16(x16)
		// gemv_bf16: 10 columns (two blocks of 8 warps, the last partly idle).
		const n = 10
		w16, w := rnd16(n*k, 1)
		y := e.empty(4 * m * n)
		e.run("gemv_bf16", cuda.Dim3{X: (n + 7) / 8}, cuda.Dim3{X: 256}, y, xp, e.u16(w16), m, n, k)
		want := make([]float64, m*n)
		for r := 0; r < m; r++ {
			for j := 0; j < n; j++ {
				want[r*n+j] = dot(x, w, r, j)
			}
		}
		e.near(fmt.Sprintf("gemv_bf16 m=%d", m), e.get(y, m*n), want, 1e-6)

		// gemv3_bf16: 5, 3 and 2 columns.
		ns := []int{5, 3, 2}
		var ys []cuda.Ptr
		var wf [][]float64
		var args []any
		for _, nn := range ns {
			h, f := rnd16(nn*k, 1)
			ys = append(ys, e.empty(4*m*nn))
			wf = append(wf, f)
			args = append(args, ys[len(ys)-1], e.u16(h), nn)
		}
		args = append(args, xp, m, k)
		e.run("gemv3_bf16", cuda.Dim3{X: (10 + 7) / 8}, cuda.Dim3{X: 256}, args...)
		for i, nn := range ns {
			want := make([]float64, m*nn)
			for r := 0; r < m; r++ {
				for j := 0; j < nn; j++ {
					want[r*nn+j] = dot(x, wf[i], r, j)
				}
			}
			e.near(fmt.Sprintf("gemv3_bf16 m=%d output %d", m, i), e.get(ys[i], m*nn), want, 1e-6)
		}

		// gemv_swiglu_bf16: 9 columns.
		const ni = 9
		g16, gw := rnd16(ni*k, 1)
		u16, uw := rnd16(ni*k, 1)
		act := e.empty(2 * m * ni)
		e.run("gemv_swiglu_bf16", cuda.Dim3{X: (ni + 7) / 8}, cuda.Dim3{X: 256}, act, xp, e.u16(g16), e.u16(u16), m, ni, k)
		raw := make([]uint16, m*ni)
		if err := e.d.DtoH(unsafe.Pointer(&raw[0]), act, 2*len(raw)); err != nil {
			t.Fatal(err)
		}
		got := make([]float32, len(raw))
		want = make([]float64, m*ni)
		for r := 0; r < m; r++ {
			for j := 0; j < ni; j++ {
				gg, uu := dot(x, gw, r, j), dot(x, uw, r, j)
				want[r*ni+j] = gg / (1 + math.Exp(-gg)) * uu
				got[r*ni+j] = float32(bf16Value(raw[r*ni+j]))
			}
		}
		e.near(fmt.Sprintf("gemv_swiglu_bf16 m=%d", m), got, want, 1e-2)
	}
}

// TestEmuDecodeFusedGEMV holds gemv_qkv_rope_bf16 to gemv3_bf16 followed
// by dec_rope_kv, bit for bit
// (the same sums in the same order): 1 to 4 rows, biases and none, a
// padding row (no cache row), q heads sharing a kv head.
func TestEmuDecodeFusedGEMV(t *testing.T) {
	e := newDecEmu(t)
	const k, heads, kvh, hd, npos, capRows = 136, 6, 2, 8, 16, 12
	qd, kvd := heads*hd, kvh*hd
	bf := func(n int) cuda.Ptr {
		h := make([]uint16, n)
		for i, x := range e.rnd(n, 1) {
			h[i] = bf16Round(x)
		}
		return e.u16(h)
	}
	cs, sn := make([]float32, npos*hd/2), make([]float32, npos*hd/2)
	for p := 0; p < npos; p++ {
		for i := 0; i < hd/2; i++ {
			a := float64(p) / math.Pow(10000, float64(2*i)/hd)
			cs[p*hd/2+i], sn[p*hd/2+i] = float32(math.Cos(a)), float32(math.Sin(a))
		}
	}
	csp, snp := e.f32(cs), e.f32(sn)
	wq, wk, wv := bf(qd*k), bf(kvd*k), bf(kvd*k)
	equal := func(what string, a, b cuda.Ptr, n int) {
		t.Helper()
		x, y := e.geti(a, n), e.geti(b, n) // bits, NaN (unwritten) included
		for i := range x {
			if x[i] != y[i] {
				t.Errorf("%s: element %d differs: %#x against %#x", what, i, x[i], y[i])
				return
			}
		}
	}
	for m := 1; m <= 4; m++ {
		xp := bf(m * k)
		pos, crow := make([]int32, m), make([]int32, m)
		for r := range pos {
			pos[r], crow[r] = int32(3*r+1), int32(capRows-1-2*r)
		}
		crow[m/2] = -1
		pp, cp := e.i32(pos), e.i32(crow)

		for _, bias := range []bool{false, true} {
			var bq, bk, bv cuda.Ptr
			if bias {
				bq, bk, bv = e.f32(e.rnd(qd, 1)), e.f32(e.rnd(kvd, 1)), e.f32(e.rnd(kvd, 1))
			}
			what := fmt.Sprintf("gemv_qkv_rope_bf16 m=%d bias=%v", m, bias)
			q, kk, v := e.empty(4*m*qd), e.empty(4*m*kvd), e.empty(4*m*kvd)
			kc, vc := e.empty(4*capRows*kvd), e.empty(4*capRows*kvd)
			e.run("gemv3_bf16", cuda.Dim3{X: (qd + 2*kvd + 7) / 8}, cuda.Dim3{X: 256}, q, wq, qd, kk, wk, kvd, v, wv, kvd, xp, m, k)
			e.run("dec_rope_kv", cuda.Dim3{X: m}, cuda.Dim3{X: 32}, q, kk, v, bq, bk, bv, kc, vc, pp, cp, csp, snp, heads, kvh, hd)
			fq, fkc, fvc := e.empty(4*m*qd), e.empty(4*capRows*kvd), e.empty(4*capRows*kvd)
			tasks := heads*hd/2 + kvh*hd/2 + kvd
			e.run("gemv_qkv_rope_bf16", cuda.Dim3{X: (tasks + 3) / 4}, cuda.Dim3{X: 128}, fq, fkc, fvc, wq, wk, wv, bq, bk, bv, xp, m, k,
				pp, cp, csp, snp, heads, kvh, hd)
			equal(what+" q", fq, q, m*qd)
			equal(what+" k cache", fkc, kc, capRows*kvd)
			equal(what+" v cache", fvc, vc, capRows*kvd)
		}
	}
}
