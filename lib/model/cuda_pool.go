package model

import (
	"math/bits"
	"runtime"
	"sync"
	"time"

	"github.com/mempo/mempo/lib/cuda"
)

// devPool keeps freed device buffers for reuse, by rounded size, so that the
// tensors a layer makes and frees (dozens per layer, the same sizes layer
// after layer and step after step) cost no driver call. Every kernel, copy
// and GEMM runs on the device's one stream, so a buffer handed out again is
// only written by work queued after everything that used it before: the same
// argument as CUDA's stream-ordered allocator, without its API call. The pool
// holds at most limit bytes; beyond that, buffers go back to the driver.
type devPool struct {
	mu    sync.Mutex
	free  map[int][]cuda.Ptr
	bytes int64
	limit int64
	hits  int64
	miss  int64
}

// poolSize rounds a request up to the pool's size classes: multiples of
// 512 bytes up to 1 MiB, then sixteen steps per power of two (at most
// 1/16 wasted).
func poolSize(bytes int) int {
	bytes = max(bytes, 512)
	if bytes <= 1<<20 {
		return (bytes + 511) &^ 511
	}
	step := 1 << (bits.Len(uint(bytes-1)) - 5)
	return (bytes + step - 1) / step * step
}

// rawAlloc returns device memory of at least bytes and its pooled size,
// from the pool or the driver; when the device is out of memory it empties
// the pool and collects unreachable tensors before trying again.
func (b *CUDA) rawAlloc(bytes int) (cuda.Ptr, int) {
	size := poolSize(bytes)
	pl := &b.pool
	pl.mu.Lock()
	if l := pl.free[size]; len(l) > 0 {
		p := l[len(l)-1]
		pl.free[size] = l[:len(l)-1]
		pl.bytes -= int64(size)
		pl.hits++
		pl.mu.Unlock()
		return p, size
	}
	pl.miss++
	pl.mu.Unlock()
	p, err := b.ops.Alloc(size)
	for try := 0; err != nil && try < 3; try++ {
		b.flushPool()
		runtime.GC()
		time.Sleep(20 * time.Millisecond) // let finalizers queue their frees
		must(b.ops.Sync())                // drains them
		b.flushPool()
		p, err = b.ops.Alloc(size)
	}
	must(err)
	b.notePeak()
	return p, size
}

// rawFree gives memory from rawAlloc back: to the pool, or to the driver
// when the pool is full (later: through FreeLater, from a finalizer).
func (b *CUDA) rawFree(p cuda.Ptr, size int, later bool) {
	pl := &b.pool
	pl.mu.Lock()
	if pl.bytes+int64(size) <= pl.limit {
		if pl.free == nil {
			pl.free = map[int][]cuda.Ptr{}
		}
		pl.free[size] = append(pl.free[size], p)
		pl.bytes += int64(size)
		pl.mu.Unlock()
		return
	}
	pl.mu.Unlock()
	if later {
		b.ops.FreeLater(p)
	} else {
		must(b.ops.Free(p))
	}
}

// flushPool returns every pooled buffer to the driver.
func (b *CUDA) flushPool() {
	pl := &b.pool
	pl.mu.Lock()
	free := pl.free
	pl.free, pl.bytes = nil, 0
	pl.mu.Unlock()
	for _, l := range free {
		for _, p := range l {
			must(b.ops.Free(p))
		}
	}
}

// PoolStats reports the pool's hits and misses (allocations served from it
// and from the driver) and the bytes it holds.
func (b *CUDA) PoolStats() (hits, misses, bytes int64) {
	b.pool.mu.Lock()
	defer b.pool.mu.Unlock()
	return b.pool.hits, b.pool.miss, b.pool.bytes
}
