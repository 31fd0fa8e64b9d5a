package optim

import (
	"fmt"
	"math"
)

// GlobalNorm returns the L2 norm of all gradients together,
// sqrt(Σ_params Σ_i g_i²), accumulated in float64. Parameters without a
// gradient are skipped. The sum runs over fixed chunks in a fixed order, so
// the result does not depend on the number of goroutines.
func GlobalNorm(params []Param) float64 {
	total := 0.0
	for _, p := range params {
		total += sumSquares(p.Grad)
	}
	return math.Sqrt(total)
}

// ClipGradNorm scales all gradients in place so that their global L2 norm is
// at most maxNorm, as torch.nn.utils.clip_grad_norm_ does:
// coef = maxNorm/(norm + 1e-6) in float32 arithmetic as torch does, clamped
// to 1, every gradient multiplied by coef. It returns the norm before
// clipping.
//
// Differences from torch, on purpose: the norm is accumulated in float64
// (torch: float32 per-tensor norms), maxNorm ≤ 0 means "measure only, do not
// clip" (torch would zero the gradients), and a non-finite norm is returned
// with an error and the gradients left untouched, so that the caller can
// skip the step (torch would multiply them by NaN).
func ClipGradNorm(params []Param, maxNorm float64) (float64, error) {
	norm := GlobalNorm(params)
	c, clip, err := ClipCoef(norm, maxNorm)
	if err != nil || !clip {
		return norm, err
	}
	for _, p := range params {
		g := p.Grad
		parallelFor(len(g), func(lo, hi int) {
			for i := lo; i < hi; i++ {
				g[i] *= c
			}
		})
	}
	return norm, nil
}

// ClipCoef is ClipGradNorm's scale for a gradient of global norm norm: an
// error for a non-finite norm, clip false when nothing is to be scaled
// (maxNorm ≤ 0, or a coefficient of at least 1), else the float32
// coefficient torch computes, maxNorm/(norm + 1e-6). Optimizers that hold
// their gradients elsewhere (on a GPU) scale by it too.
func ClipCoef(norm, maxNorm float64) (c float32, clip bool, err error) {
	if math.IsNaN(norm) || math.IsInf(norm, 0) {
		return 0, false, fmt.Errorf("optim: gradient norm is %v", norm)
	}
	if maxNorm <= 0 {
		return 0, false, nil
	}
	// torch computes the coefficient with float32 tensors:
	// max_norm / (total_norm + 1e-6), then clamps it to 1.
	c = float32(maxNorm) / float32(float32(norm)+float32(1e-6))
	if c >= 1 {
		return 0, false, nil // torch multiplies by 1.0, which changes nothing
	}
	return c, true, nil
}

func sumSquares(g []float32) float64 {
	n := len(g)
	if n == 0 {
		return 0
	}
	nc := (n + chunk - 1) / chunk
	partial := make([]float64, nc)
	parallelFor(n, func(lo, hi int) {
		s := 0.0
		for _, x := range g[lo:hi] {
			v := float64(x)
			s += v * v
		}
		partial[lo/chunk] = s
	})
	total := 0.0
	for _, s := range partial {
		total += s
	}
	return total
}
