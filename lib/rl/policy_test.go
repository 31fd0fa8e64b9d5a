package rl

import (
	"math"
	"testing"
)

// TestPPOTokenBranches walks every branch of the clipped loss with ε = 0.2
// and c = 3, values worked by hand in the table.
func TestPPOTokenBranches(t *testing.T) {
	ln := math.Log
	cases := []struct {
		name              string
		dlogp, adv, c     float64 // logp − old_logp, advantage, dual clip
		loss, grad        float64
		clipped, clippedL bool
	}{
		// r = 1.1 inside [0.8, 1.2]: L = −A·r, dL/dlogp = −A·r.
		{"A>0 inside", ln(1.1), 1, 3, -1.1, -1.1, false, false},
		// r = 1.5: L1 = −1.5, L2 = −1.2, max = L2 (clipped, flat).
		{"A>0 above", ln(1.5), 1, 3, -1.2, 0, true, false},
		// r = 0.5: L1 = −0.5, L2 = −0.8, max = L1 (unclipped).
		{"A>0 below", ln(0.5), 1, 3, -0.5, -0.5, false, false},
		// A = −1, r = 1.5: L1 = 1.5 > L2 = 1.2, below L3 = 3.
		{"A<0 above", ln(1.5), -1, 3, 1.5, 1.5, false, false},
		// A = −1, r = 0.5: L1 = 0.5 < L2 = 0.8 → clipped, flat.
		{"A<0 below", ln(0.5), -1, 3, 0.8, 0, true, false},
		// A = −1, r = 4: Lclip = L1 = 4 > L3 = 3 → dual clip, flat.
		{"dual clip", ln(4), -1, 3, 3, 0, false, true},
		// A = −0.5, r = 4 with c = 0: no dual clip, L = 2, grad = 2.
		{"dual clip off", ln(4), -0.5, 0, 2, 2, false, false},
		// A = −0.5, r = 2.5 < c = 3: L1 = 1.25 < L3 = 1.5.
		{"dual clip not reached", ln(2.5), -0.5, 3, 1.25, 1.25, false, false},
		// Δ = 25 is clamped to 20: L = e^20, grad 0.
		{"delta clamp", 25, -1, 0, math.Exp(20), 0, false, false},
		// A = 0: everything is 0.
		{"zero advantage", ln(1.5), 0, 3, 0, 0, false, false},
	}
	for _, tc := range cases {
		old := -1.3
		p := PPOToken(old+tc.dlogp, old, tc.adv, 0.2, 0.2, tc.c)
		if !near(p.Loss, tc.loss, 1e-12) || !near(p.Grad, tc.grad, 1e-12) || p.Clipped != tc.clipped || p.ClippedLower != tc.clippedL {
			t.Errorf("%s: got %+v, want loss %v grad %v clipped %v lower %v", tc.name, p, tc.loss, tc.grad, tc.clipped, tc.clippedL)
		}
		want := -math.Min(tc.dlogp, 20)
		if !near(p.NegLogRatio, want, 1e-12) {
			t.Errorf("%s: −Δ = %v, want %v", tc.name, p.NegLogRatio, want)
		}
		// Finite differences, away from the kinks (all cases above are).
		h := 1e-6
		f := func(x float64) float64 { return PPOToken(x, old, tc.adv, 0.2, 0.2, tc.c).Loss }
		fd := (f(old+tc.dlogp+h) - f(old+tc.dlogp-h)) / (2 * h)
		if math.Abs(fd-p.Grad) > 1e-6*math.Max(1, math.Abs(p.Grad)) {
			t.Errorf("%s: grad %v, finite difference %v", tc.name, p.Grad, fd)
		}
	}
	// Asymmetric clip (ε_low = 0.1, ε_high = 0.3): r = 1.25 is inside.
	if p := PPOToken(ln(1.25), 0, 1, 0.1, 0.3, 3); p.Clipped || !near(p.Loss, -1.25, 1e-12) {
		t.Errorf("asymmetric clip: %+v", p)
	}
	if p := PPOToken(ln(0.85), 0, -1, 0.1, 0.3, 3); !p.Clipped || !near(p.Loss, 0.9, 1e-12) {
		t.Errorf("asymmetric clip below: %+v", p)
	}
}

func TestKLToken(t *testing.T) {
	for _, typ := range []KLType{KLK1, KLK2, KLLowVar} {
		for _, lp := range []float64{-3, -0.2, 0} {
			if kl, g := KLToken(typ, lp, lp); kl != 0 || (typ != KLK1 && g != 0) {
				t.Errorf("%v: identical log-probs give kl %v grad %v", typ, kl, g)
			}
		}
	}
	cases := []struct {
		typ          KLType
		logp, ref    float64
		kl, grad     float64
		finiteDiffOK bool
	}{
		{KLK1, -1, -2, 1, 1, true},
		{KLK2, -1, -2, 0.5, 1, true},
		{KLK2, -2, -0.5, 1.125, -1.5, true},
		// k = ref − logp = ln 2: e^k − k − 1 = 2 − 0.6931472 − 1 = 0.3068528,
		// d/dlogp = −(e^k − 1) = −1.
		{KLLowVar, 0, math.Ln2, 1 - math.Ln2, -1, true},
		// k = −1: e^−1 + 1 − 1 = 0.3678794, grad 1 − e^−1 = 0.6321206.
		{KLLowVar, -1, -2, 0.36787944117144233, 0.6321205588285577, true},
		// k = −5: e^−5 + 4 = 4.0067379, grad 1 − e^−5 = 0.9932621.
		{KLLowVar, 0, -5, 4.006737946999085, 0.9932620530009145, true},
		// k = 3: e^3 − 4 = 16.09 > 10 → clamped to 10, grad 0.
		{KLLowVar, -3, 0, 10, 0, true},
		// k = −12: e^−12 + 11 > 10 → clamped.
		{KLLowVar, 0, -12, 10, 0, true},
		// k = 30 → pre-clamped to 20, then to 10.
		{KLLowVar, -30, 0, 10, 0, true},
	}
	for _, tc := range cases {
		kl, g := KLToken(tc.typ, tc.logp, tc.ref)
		if !near(kl, tc.kl, 1e-12) || !near(g, tc.grad, 1e-12) {
			t.Errorf("%v(%v, %v) = %v, %v; want %v, %v", tc.typ, tc.logp, tc.ref, kl, g, tc.kl, tc.grad)
		}
		h := 1e-6
		k1, _ := KLToken(tc.typ, tc.logp+h, tc.ref)
		k0, _ := KLToken(tc.typ, tc.logp-h, tc.ref)
		if fd := (k1 - k0) / (2 * h); math.Abs(fd-g) > 1e-6 {
			t.Errorf("%v(%v, %v): grad %v, finite difference %v", tc.typ, tc.logp, tc.ref, g, fd)
		}
	}
	for _, s := range []string{"k3", "low_var_kl", "k1", "kl", "k2", "mse"} {
		if _, err := ParseKLType(s); err != nil {
			t.Error(err)
		}
	}
	if _, err := ParseKLType("full"); err == nil {
		t.Error("ParseKLType(full) accepted")
	}
}
