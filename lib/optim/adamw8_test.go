package optim

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestCodebooks checks the two formats against hand-computed values and
// the rounding: every value is its own code, midpoints go toward zero,
// out-of-range values clamp, and exp_avg_sq never rounds a positive value
// to zero.
func TestCodebooks(t *testing.T) {
	for _, c := range []struct {
		cb   *Codebook
		want map[uint8]float64
	}{
		{CodeExpAvg, map[uint8]float64{0x00: 0, 0x01: 0x1p-6, 0x0f: 15 * 0x1p-6, 0x10: 0.25, 0x30: 1, 0x31: 1.0625, 0x7f: 31, 0xb0: -1, 0xff: -31}},
		{CodeExpAvgSq, map[uint8]float64{0x00: 0, 0x01: 0x1p-10, 0x10: 0x1p-6, 0x70: 1, 0x71: 1.0625, 0xff: 496}},
	} {
		for code, want := range c.want {
			if got := c.cb.Value(code); float64(got) != want {
				t.Errorf("%s code %#x: %v, want %v", c.cb.Name, code, got, want)
			}
		}
		n := len(c.cb.Vals)
		for i := 0; i < n; i++ {
			v := c.cb.Vals[i]
			if got := c.cb.Encode(v); got != uint8(i) {
				t.Errorf("%s: encode(%v) = %#x, want %#x", c.cb.Name, v, got, i)
			}
			if c.cb.Signed && i > 0 {
				if got := c.cb.Encode(-v); got != uint8(i)|0x80 {
					t.Errorf("%s: encode(%v) = %#x", c.cb.Name, -v, got)
				}
			}
			if i > 1 {
				if got := c.cb.Encode(c.cb.Mids[i-1]); got != uint8(i-1) {
					t.Errorf("%s: encode(midpoint %v) = %#x, want %#x (ties toward zero)", c.cb.Name, c.cb.Mids[i-1], got, i-1)
				}
			}
		}
		if got := c.cb.Encode(1e6); got != uint8(n-1) {
			t.Errorf("%s: encode(1e6) = %#x", c.cb.Name, got)
		}
	}
	if got := CodeExpAvgSq.Encode(1e-30); got != 1 {
		t.Errorf("exp_avg_sq: a tiny positive value got code %#x, want 1 (never zero)", got)
	}
	if got := CodeExpAvg.Encode(1e-30); got != 0 {
		t.Errorf("exp_avg: a tiny value got code %#x, want 0", got)
	}
}

// TestQuantize bounds the round trip: within half a code spacing (1/32 of
// the value for normal codes) and exact for the block's largest magnitude.
func TestQuantize(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	n := 3*Block8 + 17
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(r.NormFloat64() * math.Exp(r.NormFloat64()))
	}
	for i := Block8; i < 2*Block8; i++ {
		x[i] = 0 // a block of zeros
	}
	for _, cb := range []*Codebook{CodeExpAvg, CodeExpAvgSq} {
		xs := append([]float32(nil), x...)
		if !cb.Signed {
			for i := range xs {
				xs[i] *= xs[i]
			}
		}
		q, s := make([]uint8, n), make([]float32, Blocks8(n))
		cb.Quantize(xs, q, s)
		y := make([]float32, n)
		cb.Dequantize(q, s, y)
		sub := float64(cb.Vals[16]) // the smallest normal value
		for i := range xs {
			sc := float64(s[i/Block8])
			e := math.Abs(float64(y[i] - xs[i]))
			// Normal codes: relative 1/32; subnormals: half a subnormal step.
			if e > math.Abs(float64(xs[i]))/32*(1+1e-6)+sub/32*sc*(1+1e-6) && !(cb.NoZero && y[i] == cb.Vals[1]*float32(sc)) {
				t.Fatalf("%s: x[%d] = %v came back %v (scale %v)", cb.Name, i, xs[i], y[i], sc)
			}
		}
		if s[1] != 0 || y[Block8] != 0 {
			t.Errorf("%s: zero block: scale %v, value %v", cb.Name, s[1], y[Block8])
		}
	}
}

// TestSplitMaster: every float32 is its bf16 weight plus a 16-bit
// remainder, exactly, and the weight is the nearest bf16.
func TestSplitMaster(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for k := 0; k < 200000; k++ {
		x := math.Float32frombits(r.Uint32())
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) || math.Abs(float64(x)) > 1e38 {
			continue
		}
		hi, lo := SplitMaster(x)
		if got := JoinMaster(hi, lo); math.Float32bits(got) != math.Float32bits(x) {
			t.Fatalf("%v (%#x): split %#x %d joins to %v", x, math.Float32bits(x), hi, lo, got)
		}
		w := math.Float32frombits(uint32(hi) << 16)
		ulp := math.Float32frombits(uint32(hi)<<16+1<<16) - w
		if d := math.Abs(float64(w - x)); d > math.Abs(float64(ulp))/2*(1+1e-6) {
			t.Fatalf("%v: bf16 %v is %g away, half an ulp is %g", x, w, d, ulp/2)
		}
	}
}

// TestAdamW8TracksAdamW runs both optimizers for 100 steps on a noisy
// least-squares problem (the gradient depends on the weights, so the
// paths may drift apart): the 8-bit path's weights stay within 6% of the
// distance the fp32 path moved (3.6% measured), its loss within 10%.
func TestAdamW8TracksAdamW(t *testing.T) {
	const n, dim = 4 * Block8, 64
	r := rand.New(rand.NewPCG(5, 6))
	a := make([]float32, dim*n)
	for i := range a {
		a[i] = float32(r.NormFloat64() / 8)
	}
	target := make([]float32, dim)
	for i := range target {
		target[i] = float32(r.NormFloat64())
	}
	grad := func(w, g []float32, step int) float64 {
		res := make([]float64, dim)
		var loss float64
		for j := 0; j < dim; j++ {
			var s float64
			for i := 0; i < n; i++ {
				s += float64(a[j*n+i]) * float64(w[i])
			}
			res[j] = s - float64(target[j])
			loss += res[j] * res[j] / 2
		}
		nr := rand.New(rand.NewPCG(uint64(step), 9)) // same noise on both paths
		for i := range g {
			var s float64
			for j := 0; j < dim; j++ {
				s += res[j] * float64(a[j*n+i])
			}
			g[i] = float32(s + 0.01*nr.NormFloat64())
		}
		return loss
	}
	w0 := make([]float32, n)
	for i := range w0 {
		w0[i] = float32(r.NormFloat64() / 10)
	}
	cfg := DefaultAdamW()
	o32, _ := NewAdamW(cfg)
	o8, _ := NewAdamW8(cfg)
	w32, w8 := append([]float32(nil), w0...), append([]float32(nil), w0...)
	g32, g8 := make([]float32, n), make([]float32, n)
	var l32, l8 float64
	for step := 1; step <= 100; step++ {
		l32 = grad(w32, g32, step)
		l8 = grad(w8, g8, step)
		if err := o32.Step([]Param{{Name: "w", Data: w32, Grad: g32}}, 1e-3); err != nil {
			t.Fatal(err)
		}
		if err := o8.Step([]Param{{Name: "w", Data: w8, Grad: g8}}, 1e-3); err != nil {
			t.Fatal(err)
		}
	}
	var moved, diff float64
	for i := range w0 {
		moved += sq(float64(w32[i] - w0[i]))
		diff += sq(float64(w8[i] - w32[i]))
	}
	rel := math.Sqrt(diff / moved)
	t.Logf("after 100 steps: |w8 − w32| / |w32 − w0| = %.4f, loss fp32 %.5g, 8-bit %.5g", rel, l32, l8)
	if rel > 0.06 || math.Abs(l8-l32) > 0.1*l32 {
		t.Errorf("8-bit AdamW drifted: relative weight difference %.4f, loss %.5g vs %.5g", rel, l8, l32)
	}
}

func sq(x float64) float64 { return x * x }

// TestAdamW8ResumeBitExact: 30 steps, the state through Flat and back, 30
// more, equals 60 steps in one go bit for bit.
func TestAdamW8ResumeBitExact(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	n := 2*Block8 + 5
	w0 := make([]float32, n)
	for i := range w0 {
		w0[i] = float32(r.NormFloat64())
	}
	gs := make([][]float32, 60)
	for k := range gs {
		gs[k] = make([]float32, n)
		for i := range gs[k] {
			gs[k][i] = float32(r.NormFloat64() * math.Exp(r.NormFloat64()))
		}
	}
	run := func(o *AdamW8, w []float32, from, to int) {
		for k := from; k < to; k++ {
			if err := o.Step([]Param{{Name: "w", Data: w, Grad: gs[k]}}, 1e-3); err != nil {
				t.Fatal(err)
			}
		}
	}
	a, _ := NewAdamW8(DefaultAdamW())
	wa := append([]float32(nil), w0...)
	run(a, wa, 0, 60)
	b, _ := NewAdamW8(DefaultAdamW())
	wb := append([]float32(nil), w0...)
	run(b, wb, 0, 30)
	st, err := State8FromFlat(b.State().Flat())
	if err != nil {
		t.Fatal(err)
	}
	c, _ := NewAdamW8(DefaultAdamW())
	if err := c.LoadState(st); err != nil {
		t.Fatal(err)
	}
	run(c, wb, 30, 60)
	for i := range wa {
		if math.Float32bits(wa[i]) != math.Float32bits(wb[i]) {
			t.Fatalf("w[%d]: %v uninterrupted, %v resumed", i, wa[i], wb[i])
		}
	}
	if c.StepCount() != 60 {
		t.Errorf("step count %d", c.StepCount())
	}
}
