package optim

import (
	"runtime"
	"sync"
)

// chunk is the fixed work unit of parallelFor. Chunk boundaries depend only
// on the length, never on the number of goroutines, so per-chunk partial
// results (sumSquares) are the same however the chunks are scheduled.
const chunk = 1 << 16

// parallelFor calls fn(lo, hi) once for every chunk [lo, hi) of [0, n),
// on up to GOMAXPROCS goroutines; a single chunk runs inline. fn must only
// touch indices in [lo, hi) (or per-chunk slots).
func parallelFor(n int, fn func(lo, hi int)) {
	nc := (n + chunk - 1) / chunk
	if nc <= 1 {
		if n > 0 {
			fn(0, n)
		}
		return
	}
	workers := min(runtime.GOMAXPROCS(0), nc)
	var wg sync.WaitGroup
	next := make(chan int, nc)
	for c := 0; c < nc; c++ {
		next <- c
	}
	close(next)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for c := range next {
				lo := c * chunk
				fn(lo, min(lo+chunk, n))
			}
		}()
	}
	wg.Wait()
}
