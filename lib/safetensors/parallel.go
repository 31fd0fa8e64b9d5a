package safetensors

import (
	"unsafe"

	"github.com/mempo/mempo/lib/tensor"
	"github.com/mempo/mempo/lib/tensor/half"
)

// Converting between float32 and the 16-bit types is most of the cost of
// reading and writing a large checkpoint (a 7B model is 7.6 G values), so
// tensors of more than parallelMin values are converted on every core.
const parallelMin = 1 << 20

// parallelFor runs fn over [0, n), on every core for large n.
func parallelFor(n int, fn func(lo, hi int)) { tensor.Parallel(n, parallelMin/4, fn) }

// to16 converts src to BF16 or F16 values (little-endian bytes on every
// host this package supports, which it checks: nativeLittleEndian) in
// parallel, into dst of 2·len(src) bytes.
func to16(dst []byte, src []float32, dt DType) {
	out := unsafe.Slice((*uint16)(unsafe.Pointer(&dst[0])), len(src))
	parallelFor(len(src), func(lo, hi int) {
		if dt == BF16 {
			for i := lo; i < hi; i++ {
				out[i] = half.F32ToBF16(src[i])
			}
			return
		}
		for i := lo; i < hi; i++ {
			out[i] = half.F32ToF16(src[i])
		}
	})
}
