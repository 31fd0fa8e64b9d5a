package cuda

// Synthetic vectors for dense-search benchmarks, made on the device: a
// wiki-18-sized flat index (21M × 768 fp16 = 32 GB) need not be built on the
// host and copied.

import (
	"fmt"
	"unsafe"

	"github.com/mempo/mempo/lib/tensor/half"
)

// FillRandomUnit fills every row of the index with a random unit vector
// (normal values from a hash of seed and position, L2-normalized, rounded
// to fp16) by kernels/bert.cu's synth_unit_f16, and marks the index full.
func (x *FlatIndex) FillRandomUnit(seed uint64) error {
	if x.d == nil {
		return fmt.Errorf("cuda: synthetic vectors need a CUDA device, not %T", x.dev)
	}
	f, err := x.d.Func("bert", "synth_unit_f16")
	if err != nil {
		return err
	}
	if 4*x.dim > 40<<10 {
		return fmt.Errorf("cuda: synthetic vectors of %d dimensions (at most %d)", x.dim, (40<<10)/4)
	}
	grid := min(x.n, x.d.SMs*64)
	if err := x.d.Launch(f, Dim3{X: grid}, Dim3{X: 256}, 4*x.dim, x.base, int64(x.n), x.dim, seed); err != nil {
		return err
	}
	if err := x.d.Sync(); err != nil {
		return err
	}
	x.added = x.n
	return nil
}

// Rows copies vectors lo…hi-1 back to the host as float32.
func (x *FlatIndex) Rows(lo, hi int) ([]float32, error) {
	if lo < 0 || hi > x.added || lo > hi {
		return nil, fmt.Errorf("cuda: flat index rows [%d, %d) of %d", lo, hi, x.added)
	}
	n := (hi - lo) * x.dim
	if n == 0 {
		return nil, nil
	}
	h := make([]uint16, n)
	if err := x.dev.DtoH(unsafe.Pointer(&h[0]), x.base+Ptr(2*lo*x.dim), 2*n); err != nil {
		return nil, err
	}
	out := make([]float32, n)
	for i, v := range h {
		out[i] = half.F16ToF32(v)
	}
	return out, nil
}
