package cudaemu_test

// kernels/sample.cu's split draw (sample_split_max, _sum, _pick: a row over
// several blocks) against sample_f32 (one block a row; itself against a
// float64 draw computed here) on the emulation:
// the same ids for greedy and temperature rows (uniforms near 0 and 1, the
// first of tied maxima in different chunks), the same log-probs up to the
// order of their float64 sums.

import (
	"math"
	"testing"
	"unsafe"

	"github.com/mempo/mempo/lib/cuda"
)

func TestEmuSampleSplit(t *testing.T) {
	e := newEmuModule(t, "sample", 5)
	d := e.d
	const V, ch = 1000, 143 // 7 chunks, the last one short
	nc := (V + ch - 1) / ch
	invT := []float64{0, 0.7, 1.3, 1, 2, 0}
	u := []float64{0.5, 0.001, 0.999, 0.37, 0.62, 0}
	R := len(invT)
	z := e.rnd(R*V, 3)
	// Row 5: the maximum tied at ids 150 and 870 (chunks 1 and 6).
	for j := 0; j < V; j++ {
		z[5*V+j] = float32(math.Min(float64(z[5*V+j]), 5))
	}
	z[5*V+870], z[5*V+150] = 9, 9
	zp := e.f32(z)
	itp := e.put(unsafe.Pointer(&invT[0]), 8*R)
	up := e.put(unsafe.Pointer(&u[0]), 8*R)
	type res struct {
		ids  []int32
		lp   []float32
		slp  []float32
		name string
	}
	out := func(name string) (res, [3]cuda.Ptr) {
		return res{name: name}, [3]cuda.Ptr{e.empty(4 * R), e.empty(4 * R), e.empty(4 * R)}
	}
	read := func(r *res, p [3]cuda.Ptr) {
		r.ids = make([]int32, R)
		if err := d.DtoH(unsafe.Pointer(&r.ids[0]), p[0], 4*R); err != nil {
			t.Fatal(err)
		}
		r.lp, r.slp = e.get(p[1], R), e.get(p[2], R)
	}
	ref, rp := out("sample_f32")
	e.run("sample_f32", cuda.Dim3{X: R}, cuda.Dim3{X: 1024}, rp[0], rp[1], rp[2], zp, int64(V), itp, up)
	read(&ref, rp)
	got, gp := out("split")
	part := e.empty(8 * 4 * R * nc)
	e.run("sample_split_max", cuda.Dim3{X: nc, Y: R}, cuda.Dim3{X: 256}, part, zp, int64(V), ch)
	e.run("sample_split_sum", cuda.Dim3{X: nc, Y: R}, cuda.Dim3{X: 256}, part, zp, int64(V), ch, itp)
	e.run("sample_split_pick", cuda.Dim3{X: R}, cuda.Dim3{X: 1024}, gp[0], gp[1], gp[2], part, zp, int64(V), ch, nc, itp, up)
	read(&got, gp)
	// sample_f32 against the draw computed here in float64: the first
	// maximum (greedy), else the first id whose running weight passes u·Σw.
	for i := 0; i < R; i++ {
		zr := z[i*V : (i+1)*V]
		m, am := zr[0], 0
		for j, x := range zr {
			if x > m {
				m, am = x, j
			}
		}
		var s1, total float64
		for _, x := range zr {
			s1 += math.Exp(float64(x - m))
			total += math.Exp(float64(x-m) * invT[i])
		}
		id := am
		if invT[i] > 0 {
			target, c := u[i]*total, 0.0
			for j, x := range zr {
				if c += math.Exp(float64(x-m) * invT[i]); c > target {
					id = j
					break
				}
			}
		}
		if int(ref.ids[i]) != id {
			t.Errorf("row %d: sample_f32 chose %d, the float64 draw %d", i, ref.ids[i], id)
		}
		if want := float64(zr[id]-m) - math.Log(s1); math.Abs(float64(ref.lp[i])-want) > 1e-5 {
			t.Errorf("row %d: sample_f32 log-prob %v, want %v", i, ref.lp[i], want)
		}
	}
	if ref.ids[5] != 150 {
		t.Fatalf("sample_f32 chose %d on the tied row, want 150", ref.ids[5])
	}
	for i := 0; i < R; i++ {
		if got.ids[i] != ref.ids[i] {
			t.Errorf("row %d (1/T %g, u %g): split chose %d, sample_f32 %d", i, invT[i], u[i], got.ids[i], ref.ids[i])
		}
		if d := math.Abs(float64(got.lp[i] - ref.lp[i])); !(d <= 1e-5) {
			t.Errorf("row %d: log-prob %v, sample_f32 %v", i, got.lp[i], ref.lp[i])
		}
		if d := math.Abs(float64(got.slp[i] - ref.slp[i])); !(d <= 1e-5) {
			t.Errorf("row %d: sample log-prob %v, sample_f32 %v", i, got.slp[i], ref.slp[i])
		}
	}
}
