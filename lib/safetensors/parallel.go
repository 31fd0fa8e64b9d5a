package safetensors

import (
	"runtime"
	"sync"
	"unsafe"

	"github.com/mempo/mempo/lib/tensor/half"
)

// Converting between float32 and the 16-bit types is most of the cost of
// reading and writing a large checkpoint (a 7B model is 7.6 G values), so
// tensors of more than parallelMin values are converted on every core.
const parallelMin = 1 << 20

// parallelFor runs fn over [0, n) in contiguous pieces on GOMAXPROCS
// goroutines.
func parallelFor(n int, fn func(lo, hi int)) {
	workers := runtime.GOMAXPROCS(0)
	if n < parallelMin || workers < 2 {
		fn(0, n)
		return
	}
	per := (n + workers - 1) / workers
	var wg sync.WaitGroup
	for lo := 0; lo < n; lo += per {
		wg.Add(1)
		go func(lo, hi int) {
			defer wg.Done()
			fn(lo, hi)
		}(lo, min(lo+per, n))
	}
	wg.Wait()
}

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
