package tensor

import (
	"math"
	"runtime"
	"sync"
)

// Parallel calls fn on consecutive chunks [lo, hi) that cover [0, n), using up
// to GOMAXPROCS goroutines. grain is the smallest chunk worth a goroutine (work
// items, not bytes): small jobs run inline, since a goroutine costs about a
// microsecond. fn must be safe to run concurrently on disjoint chunks.
func Parallel(n, grain int, fn func(lo, hi int)) {
	if n <= 0 {
		return
	}
	if grain < 1 {
		grain = 1
	}
	workers := runtime.GOMAXPROCS(0)
	if w := n / grain; w < workers {
		workers = w
	}
	if workers <= 1 {
		fn(0, n)
		return
	}
	chunk := (n + workers - 1) / workers
	var wg sync.WaitGroup
	for lo := 0; lo < n; lo += chunk {
		hi := min(lo+chunk, n)
		wg.Add(1)
		go func(lo, hi int) {
			defer wg.Done()
			fn(lo, hi)
		}(lo, hi)
	}
	wg.Wait()
}

// Dot is Σ a[i]·b[i] over len(a) elements, accumulated in float32 with four
// partial sums (the order a vectorizing BLAS would use, and faster in Go).
func Dot(a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(a); i += 4 {
		s0 += a[i] * b[i]
		s1 += a[i+1] * b[i+1]
		s2 += a[i+2] * b[i+2]
		s3 += a[i+3] * b[i+3]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return (s0 + s1) + (s2 + s3)
}

// Axpy computes y += alpha·x over len(x) elements.
func Axpy(alpha float32, x, y []float32) {
	y = y[:len(x)]
	for i, v := range x {
		y[i] += alpha * v
	}
}

// Max is the largest element of a non-empty slice and its first index.
func Max(x []float32) (float32, int) {
	best, at := x[0], 0
	for i, v := range x[1:] {
		if v > best {
			best, at = v, i+1
		}
	}
	return best, at
}

// LogSumExp is log Σ exp(x[i]), computed in float64 around the maximum so it
// neither overflows nor loses the small terms.
func LogSumExp(x []float32) float32 {
	m, _ := Max(x)
	if math.IsInf(float64(m), -1) {
		return m
	}
	var s float64
	for _, v := range x {
		s += math.Exp(float64(v - m))
	}
	return m + float32(math.Log(s))
}
