package model

import (
	"runtime"
	"unsafe"

	"github.com/mempo/mempo/lib/tensor"
	"github.com/mempo/mempo/lib/tensor/half"
)

// The CUDA backend's share of adapters (lora.go): the dropout kernel
// (kernels/lora.cu) and frozen weights stored as bf16 only.

func (b *CUDA) Dropout(dst, src Tensor, p float32, seed uint64) {
	d, s := gt(dst), gt(src)
	sameShapeG("Dropout", d, s)
	b.wrote(d)
	n := int64(d.n())
	if n == 0 {
		return
	}
	b.launch("lora", "dropout_f32", b.gridFor(n, 256), 256, 0, d.ptr(), s.ptr(), n, p, 1/(1-p), seed)
}

// FromHostFrozen uploads a weight that is never written and only read by
// MatMul (a frozen base's matrix, LoadFrozen). In bf16 mode it keeps the
// bf16 rounding alone (rounded on the host as the cast_bf16 kernel rounds:
// to nearest, ties to even): half the bytes of the fp32 tensor and a third
// of the fp32 tensor plus the bf16 copy the products would otherwise cache.
// Any op other than MatMul reading it panics (gt). In fp32 mode it is
// FromHost.
func (b *CUDA) FromHostFrozen(data []float32, rows, cols int) Tensor {
	if !b.bf16 {
		return b.FromHost(data, rows, cols)
	}
	n := rows * cols
	h := make([]uint16, max(n, 1))
	tensor.Parallel(n, 1<<16, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			h[i] = half.F32ToBF16(data[i])
		}
	})
	p16, size := b.rawAlloc(2*n + 16)
	if n > 0 {
		must(b.ops.HtoD(p16, unsafe.Pointer(&h[0]), 2*n))
	}
	runtime.KeepAlive(h)
	buf := &devBuf{bytes: 4 * max(n, 1), be: b, frozen: true, weight: true,
		f32stale: true, w16: p16, w16sz: size, w16ok: true}
	b.live.Add(int64(size))
	runtime.SetFinalizer(buf, func(d *devBuf) {
		if !d.freed {
			d.release(true)
		}
	})
	return &cudaTensor{buf: buf, r: rows, c: cols, own: true}
}
