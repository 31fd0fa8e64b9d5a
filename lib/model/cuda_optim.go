package model

import (
	"unsafe"

	"github.com/mempo/mempo/lib/cuda"
)

// The optimizer step on the device (lib/update's device optimizer): the
// gradient norm, clipping and the fused AdamW kernel of lib/cuda run over the
// model's own weight and gradient tensors, so weights, gradients and moments
// never cross to the host between steps.

// SumSquares returns Σ x² over t in float64.
func (b *CUDA) SumSquares(t Tensor) float64 {
	s := gt(t)
	acc := b.newTensor(2, 1) // one float64
	must(b.dev.Memset32(acc.ptr(), 0, 2))
	n := int64(s.n())
	if n > 0 {
		b.launch("adamw", "sumsq_f64", min(b.gridFor(n, 256), 4*b.dev.SMs), 256, 0, acc.ptr(), s.ptr(), n)
	}
	v := b.ToHost(acc, nil)
	b.Free(acc)
	return *(*float64)(unsafe.Pointer(&v[0]))
}

// Scale multiplies t by c in place.
func (b *CUDA) Scale(t Tensor, c float32) {
	s := gt(t)
	b.wrote(s)
	n := int64(s.n())
	b.launch("adamw", "scale_f32", b.gridFor(n, 256), 256, 0, s.ptr(), n, c)
}

// AdamW runs one fused AdamW step (lib/cuda's adamw_f32, bit for bit
// lib/optim's) on the weight p with gradient g and moments m, v, in place.
func (b *CUDA) AdamW(p, g, m, v Tensor, s cuda.AdamWStep) {
	P, G, M, V := gt(p), gt(g), gt(m), gt(v)
	sameShapeG("AdamW", P, G)
	sameShapeG("AdamW", P, M)
	sameShapeG("AdamW", P, V)
	b.wrote(P, M, V) // the weight's bf16 copy is stale now
	must(b.dev.AdamW(P.ptr(), G.ptr(), M.ptr(), V.ptr(), P.n(), s))
}
