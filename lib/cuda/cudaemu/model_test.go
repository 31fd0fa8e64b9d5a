package cudaemu_test

import (
	"math"
	"testing"
	"unsafe"

	"github.com/mempo/mempo/lib/cuda"
)

// model.cu's norms launched with a fraction of their block layout's threads
// (lib/model's normLaunch: TestNormLaunch holds it to these counts) give the bits of the full launch: rmsnorm_f32's
// output, its bf16 rounding and rstd, and rmsnorm_bwd_dx_f32's dx.
func TestEmuNormLaunchSameBits(t *testing.T) {
	e := newEmuModule(t, "model", 7)
	for _, c := range []struct{ dim, full, fewer int }{
		{896, 896, 224},   // 0.5B hidden: 28 warps as 4 × 7
		{1536, 1024, 256}, // 1.5B hidden: 32 warps as 4 × 8
		{3584, 1024, 256}, // 7B hidden
		{768, 768, 256},   // 24 warps as 3 × 8
		{320, 320, 160},   // 10 warps as 2 × 5
	} {
		const rows = 6
		x, w, dy := e.rnd(rows*c.dim, 1), e.rnd(c.dim, 1), e.rnd(rows*c.dim, 1)
		type result struct{ out, rstd, dx []float32 }
		run := func(block int) result {
			xp, wp, dyp := e.f32(x), e.f32(w), e.f32(dy)
			out, rstd, o16 := e.empty(4*rows*c.dim), e.empty(4*rows), e.empty(2*rows*c.dim+16)
			e.run("rmsnorm_f32", cuda.Dim3{X: rows}, cuda.Dim3{X: block}, out, rstd, xp, wp, rows, c.dim, float32(1e-6), o16)
			dx := e.empty(4 * rows * c.dim)
			e.run("rmsnorm_bwd_dx_f32", cuda.Dim3{X: rows}, cuda.Dim3{X: block}, dx, dyp, xp, wp, rstd, rows, c.dim, cuda.Ptr(0), cuda.Ptr(0))
			return result{e.get(out, rows*c.dim), e.get(rstd, rows), e.get(dx, rows*c.dim)}
		}
		full, fewer := run(c.full), run(c.fewer)
		for _, v := range []struct {
			what string
			a, b []float32
		}{{"out", full.out, fewer.out}, {"rstd", full.rstd, fewer.rstd}, {"dx", full.dx, fewer.dx}} {
			for i := range v.a {
				if math.Float32bits(v.a[i]) != math.Float32bits(v.b[i]) {
					t.Errorf("dim %d, %d threads against %d: %s[%d] = %v, want %v", c.dim, c.fewer, c.full, v.what, i, v.b[i], v.a[i])
					break
				}
			}
		}
		// And the sums are right: rstd against float64.
		for r := 0; r < rows; r++ {
			ss := 0.0
			for j := 0; j < c.dim; j++ {
				ss += float64(x[r*c.dim+j]) * float64(x[r*c.dim+j])
			}
			want := 1 / math.Sqrt(ss/float64(c.dim)+1e-6)
			if d := math.Abs(float64(fewer.rstd[r])-want) / want; d > 1e-5 {
				t.Errorf("dim %d row %d: rstd %v, want %v", c.dim, r, fewer.rstd[r], want)
			}
		}
	}
}

// add_rmsnorm_f32 gives the bits of add_f32 followed by rmsnorm_f32: the
// sums it stores, the norm's output, its bf16 rounding and rstd, with the
// norms' full and fewer-thread launches; rmsnorm_bwd_dx_f32 with a residual
// those of rmsnorm_bwd_dx_f32 followed by add_f32.
func TestEmuAddRMSNormSameBits(t *testing.T) {
	e := newEmuModule(t, "model", 9)
	for _, c := range []struct{ dim, block int }{{896, 224}, {896, 896}, {1536, 256}, {3584, 256}, {320, 160}} {
		const rows = 5
		x, d, w := e.rnd(rows*c.dim, 1), e.rnd(rows*c.dim, 1), e.rnd(c.dim, 1)
		n := rows * c.dim
		// Two kernels: the sums by add_f32, then the norm.
		x1, d1, w1 := e.f32(x), e.f32(d), e.f32(w)
		e.run("add_f32", cuda.Dim3{X: 3}, cuda.Dim3{X: 256}, x1, d1, int64(n))
		out1, rstd1, o161 := e.empty(4*n), e.empty(4*rows), e.empty(2*n+16)
		e.run("rmsnorm_f32", cuda.Dim3{X: rows}, cuda.Dim3{X: c.block}, out1, rstd1, x1, w1, rows, c.dim, float32(1e-6), o161)
		// One.
		x2, d2, w2 := e.f32(x), e.f32(d), e.f32(w)
		out2, rstd2, o162 := e.empty(4*n), e.empty(4*rows), e.empty(2*n+16)
		e.run("add_rmsnorm_f32", cuda.Dim3{X: rows}, cuda.Dim3{X: c.block}, out2, rstd2, x2, d2, w2, rows, c.dim, float32(1e-6), o162)
		for _, v := range []struct {
			what string
			a, b []float32
		}{
			{"x", e.get(x1, n), e.get(x2, n)}, {"out", e.get(out1, n), e.get(out2, n)},
			{"rstd", e.get(rstd1, rows), e.get(rstd2, rows)}, {"out16", e.get(o161, n/2), e.get(o162, n/2)},
		} {
			for i := range v.a {
				if math.Float32bits(v.a[i]) != math.Float32bits(v.b[i]) {
					t.Errorf("dim %d, %d threads: %s[%d] = %v fused, %v apart", c.dim, c.block, v.what, i, v.b[i], v.a[i])
					break
				}
			}
		}
		// The backward's dx with the residual's gradient added in the same
		// pass, against rmsnorm_bwd_dx_f32 then add_f32 (d as dy, x1 as x,
		// out1 as the residual).
		// The fused launch also writes dx's bf16 rounding (dx16).
		dx1, dx2, dx16 := e.empty(4*n), e.empty(4*n), e.empty(2*n+16)
		e.run("rmsnorm_bwd_dx_f32", cuda.Dim3{X: rows}, cuda.Dim3{X: c.block}, dx1, d1, x1, w1, rstd1, rows, c.dim, cuda.Ptr(0), cuda.Ptr(0))
		e.run("add_f32", cuda.Dim3{X: 3}, cuda.Dim3{X: 256}, dx1, out1, int64(n))
		e.run("rmsnorm_bwd_dx_f32", cuda.Dim3{X: rows}, cuda.Dim3{X: c.block}, dx2, d1, x1, w1, rstd1, rows, c.dim, out1, dx16)
		a, b, b16 := e.get(dx1, n), e.get(dx2, n), e.getBF16(dx16, n)
		for i := range a {
			if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
				t.Errorf("dim %d, %d threads: backward dx[%d] = %v fused, %v apart", c.dim, c.block, i, b[i], a[i])
				break
			}
			if w := bf16Round(b[i]); b16[i] != w {
				t.Errorf("dim %d, %d threads: backward dx16[%d] = %#x, want %#x", c.dim, c.block, i, b16[i], w)
				break
			}
		}
		// And the sums are x + d.
		got := e.get(x2, n)
		for i := range got {
			if got[i] != x[i]+d[i] {
				t.Fatalf("dim %d: x[%d] = %v, want %v", c.dim, i, got[i], x[i]+d[i])
			}
		}
	}
}

// The vectorized SwiGLU kernels (every operand bf16 only) give the bits of
// the scalar ones reading and writing the same bf16 tensors.
func TestEmuSwiGLUVectorSameBits(t *testing.T) {
	e := newEmuModule(t, "model", 8)
	const n = 8 * 37
	bf := func(v []float32) []uint16 {
		h := make([]uint16, len(v))
		for i, x := range v {
			h[i] = uint16(math.Float32bits(x) >> 16)
		}
		return h
	}
	g, u, d := bf(e.rnd(n, 3)), bf(e.rnd(n, 1)), bf(e.rnd(n, 1))
	gp, up, dp := e.u16(g), e.u16(u), e.u16(d)
	get16 := func(p cuda.Ptr) []uint32 {
		v := e.get(p, n/2) // n bf16 values as n/2 words
		w := make([]uint32, len(v))
		for i, x := range v {
			w[i] = math.Float32bits(x)
		}
		return w
	}
	null := cuda.Ptr(0)
	o1, o2 := e.empty(2*n), e.empty(2*n)
	e.run("swiglu_f32", cuda.Dim3{X: 2}, cuda.Dim3{X: 64}, null, null, null, int64(n), o1, gp, up)
	e.run("swiglu_bf16x8", cuda.Dim3{X: 2}, cuda.Dim3{X: 64}, o2, gp, up, int64(n/8))
	dg1, du1, dg2, du2 := e.empty(2*n), e.empty(2*n), e.empty(2*n), e.empty(2*n)
	e.run("swiglu_bwd_f32", cuda.Dim3{X: 2}, cuda.Dim3{X: 64}, null, null, null, null, null, int64(n), dg1, du1, dp, gp, up)
	e.run("swiglu_bwd_bf16x8", cuda.Dim3{X: 2}, cuda.Dim3{X: 64}, dg2, du2, dp, gp, up, int64(n/8))
	for _, c := range []struct {
		what   string
		scalar cuda.Ptr
		vector cuda.Ptr
	}{{"swiglu", o1, o2}, {"dgate", dg1, dg2}, {"dup", du1, du2}} {
		a, b := get16(c.scalar), get16(c.vector)
		for i := range a {
			if a[i] != b[i] {
				t.Errorf("%s: word %d = %#08x vectorized, %#08x scalar", c.what, i, b[i], a[i])
				break
			}
		}
	}
}

// swiglu_f32x4 (fp32 gate and up, four elements a thread) gives the bits of
// swiglu_f32 in both outputs, fp32 and its bf16 rounding, and writes only
// the ones it is given.
func TestEmuSwiGLUF32x4SameBits(t *testing.T) {
	e := newEmuModule(t, "model", 10)
	const n = 4 * 53
	g, u := e.rnd(n, 3), e.rnd(n, 1)
	gp, up := e.f32(g), e.f32(u)
	null := cuda.Ptr(0)
	o1, h1 := e.empty(4*n), e.empty(2*n)
	e.run("swiglu_f32", cuda.Dim3{X: 2}, cuda.Dim3{X: 64}, o1, gp, up, int64(n), h1, null, null)
	o2, h2, h3 := e.empty(4*n), e.empty(2*n), e.empty(2*n)
	e.run("swiglu_f32x4", cuda.Dim3{X: 2}, cuda.Dim3{X: 32}, o2, gp, up, int64(n/4), h2)
	e.run("swiglu_f32x4", cuda.Dim3{X: 1}, cuda.Dim3{X: 32}, null, gp, up, int64(n/4), h3)
	for _, c := range []struct {
		what           string
		scalar, vector cuda.Ptr
		words          int
	}{{"fp32", o1, o2, n}, {"bf16", h1, h2, n / 2}, {"bf16 alone", h1, h3, n / 2}} {
		a, b := e.get(c.scalar, c.words), e.get(c.vector, c.words)
		for i := range a {
			if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
				t.Errorf("%s: word %d = %#08x vectorized, %#08x scalar", c.what, i, math.Float32bits(b[i]), math.Float32bits(a[i]))
				break
			}
		}
	}
}

// copy_runs_f32 and cast_runs_bf16 move runs of rows (a KV cache's shared
// prefixes; the rows an attention call reads, packed and rounded): every
// destination row of every run, at widths that take the 16-byte path and
// one that does not, with a grid smaller than the rows (the warps stride).
func TestEmuRowRuns(t *testing.T) {
	e := newEmuModule(t, "model", 9)
	for _, cols := range []int{128, 12, 7} {
		const rows = 40
		src := e.rnd(rows*cols, 1)
		// Runs of 1 to 6 rows; the copies' sources and destinations apart.
		type run struct{ dst, src, n int }
		runs := []run{{20, 0, 3}, {23, 5, 1}, {30, 9, 6}, {24, 16, 4}, {36, 0, 2}}
		var rv, sv []int32
		total := 0
		for _, r := range runs {
			rv, sv = append(rv, int32(r.dst), int32(r.src)), append(sv, int32(total))
			total += r.n
		}
		sv = append(sv, int32(total))
		tp := e.f32(src)
		e.run("copy_runs_f32", cuda.Dim3{X: 2}, cuda.Dim3{X: 64}, tp, e.i32(rv), e.i32(sv), len(runs), int64(total), cols)
		got := e.get(tp, rows*cols)
		want := append([]float32(nil), src...)
		for _, r := range runs {
			copy(want[r.dst*cols:(r.dst+r.n)*cols], src[r.src*cols:(r.src+r.n)*cols])
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("copy_runs_f32, %d columns: element %d (row %d) = %v, want %v", cols, i, i/cols, got[i], want[i])
			}
		}
		// Packed: run i's rows at its offset.
		var pv []int32
		for i, r := range runs {
			pv = append(pv, sv[i], int32(r.src))
		}
		dp := e.empty(2*total*cols + 16)
		e.run("cast_runs_bf16", cuda.Dim3{X: 3}, cuda.Dim3{X: 32}, dp, e.f32(src), e.i32(pv), e.i32(sv), len(runs), int64(total), cols)
		bits := make([]uint16, total*cols)
		if err := e.d.DtoH(unsafe.Pointer(&bits[0]), dp, 2*len(bits)); err != nil {
			t.Fatal(err)
		}
		at := 0
		for _, r := range runs {
			for k := 0; k < r.n*cols; k++ {
				if w := bf16Round(src[r.src*cols+k]); bits[at] != w {
					t.Fatalf("cast_runs_bf16, %d columns: packed element %d = %#x, want %#x", cols, at, bits[at], w)
				}
				at++
			}
		}
	}
}

// getBF16 reads n bf16 values back as their bits.
func (e *decEmu) getBF16(p cuda.Ptr, n int) []uint16 {
	bits := make([]uint16, n)
	if err := e.d.DtoH(unsafe.Pointer(&bits[0]), p, 2*n); err != nil {
		e.t.Fatal(err)
	}
	return bits
}

// attn_bwd_dsum: D = the row sums of dO∘O per head, and with do16 dO's
// bf16 rounding, which attnmma.cu's backward reads; D the same bits either way.
func TestEmuAttnDSum(t *testing.T) {
	e := newEmuModule(t, "model", 11)
	for _, c := range []struct{ rows, heads, hd int }{{5, 3, 64}, {3, 2, 128}, {4, 1, 40}} {
		n := c.rows * c.heads * c.hd
		do, o := e.rnd(n, 1), e.rnd(n, 1)
		dop, op := e.f32(do), e.f32(o)
		warps := c.rows * c.heads
		grid := cuda.Dim3{X: (warps*32 + 255) / 256}
		d1, d2, do16 := e.empty(4*warps), e.empty(4*warps), e.empty(2*n+16)
		e.run("attn_bwd_dsum", grid, cuda.Dim3{X: 256}, d1, dop, op, c.rows, c.heads, c.hd, cuda.Ptr(0))
		e.run("attn_bwd_dsum", grid, cuda.Dim3{X: 256}, d2, dop, op, c.rows, c.heads, c.hd, do16)
		a, b, b16 := e.get(d1, warps), e.get(d2, warps), e.getBF16(do16, n)
		for w := range a {
			want := 0.0
			for j := 0; j < c.hd; j++ {
				want += float64(do[w*c.hd+j]) * float64(o[w*c.hd+j])
			}
			if math.Float32bits(a[w]) != math.Float32bits(b[w]) || math.Abs(float64(a[w])-want) > 1e-5*(1+math.Abs(want)) {
				t.Errorf("%+v: D[%d] = %v and %v with do16, want %v", c, w, a[w], b[w], want)
			}
		}
		for i := range do {
			if w := bf16Round(do[i]); b16[i] != w {
				t.Fatalf("%+v: do16[%d] = %#x, want %#x", c, i, b16[i], w)
			}
		}
	}
}
