package half

import (
	"math"
	"testing"
)

func TestHalfConversionsExhaustive(t *testing.T) {
	for h := 0; h < 1<<16; h++ {
		v := F16ToF32(uint16(h))
		if math.IsNaN(float64(v)) {
			if !math.IsNaN(float64(F16ToF32(F32ToF16(v)))) {
				t.Fatalf("f16 NaN %#04x lost", h)
			}
			continue
		}
		if back := F32ToF16(v); back != uint16(h) {
			t.Fatalf("f16 %#04x -> %v -> %#04x", h, v, back)
		}
		b := BF16ToF32(uint16(h))
		if math.IsNaN(float64(b)) {
			if !math.IsNaN(float64(BF16ToF32(F32ToBF16(b)))) {
				t.Fatalf("bf16 NaN %#04x lost", h)
			}
			continue
		}
		if back := F32ToBF16(b); back != uint16(h) {
			t.Fatalf("bf16 %#04x -> %v -> %#04x", h, b, back)
		}
	}
	// Rounding against a float64 oracle: the result is a nearest half, and at
	// an exact tie the even one.
	for _, x := range []float32{0.1, 1.0 / 3, 2.5e-6, 6e-8, 3e-8, 1234.567, -0.007, 60000, 65519} { // 65520 (tie to 2^16 = Inf) is checked in TestRoundTrip
		h := F32ToF16(x)
		got := float64(F16ToF32(h))
		for _, nb := range []uint16{h - 1, h + 1} {
			alt := float64(F16ToF32(nb))
			if math.IsInf(alt, 0) || math.IsNaN(alt) {
				continue
			}
			d0, d1 := math.Abs(got-float64(x)), math.Abs(alt-float64(x))
			if d1 < d0 || (d1 == d0 && h&1 == 1) {
				t.Errorf("F32ToF16(%v) = %v, but %v is nearer", x, got, alt)
			}
		}
	}
}
