package cuda

// GPU flat inner-product search without faiss-gpu: the vectors stay on the
// device in fp16 (as Search-R1's faiss-gpu with useFloat16), a batch of
// queries is scored against a block of them by one cuBLAS GEMM (fp16 inputs,
// fp32 accumulation and output), and kernels/flatsearch.cu reduces each row
// of scores to its top k by passes over chunks: a warp-per-chunk selection
// for k ≤ 256 (topk_warpE), chunked bitonic sorts above. Ties go to the
// lower id, as numpy's stable argsort and FAISS's Flat index order them.

import (
	"fmt"
	"math"
	"runtime"
	"sync"
	"unsafe"

	"github.com/mempo/mempo/lib/tensor/half"
)

// F16 is CUDA_R_16F, IEEE half precision.
const F16 DataType = 2

const (
	topkChunk   = 2048 // TK_CHUNK of flatsearch.cu
	topkThreads = 1024
	noID        = math.MaxInt64
	// MaxFlatK is the largest k: a pass must shrink a chunk of 2048.
	MaxFlatK = topkChunk / 2
	// maxWarpK is the largest k of the warp selection (32 × its 8 slots).
	maxWarpK  = 256
	warpsPerB = 8 // TK_WARPS of flatsearch.cu
	warpStep  = 256
)

// FlatDevice is what a flat search needs of a device: a Device, or (tests)
// lib/encoder's CPU emulation of kernels/flatsearch.cu. Kernel launches a
// kernel of kernels/flatsearch.cu; Gemm has Device.Gemm's semantics.
type FlatDevice interface {
	Alloc(bytes int) (Ptr, error)
	Free(p Ptr) error
	HtoD(dst Ptr, src unsafe.Pointer, bytes int) error
	DtoH(dst unsafe.Pointer, src Ptr, bytes int) error
	Gemm(transA, transB bool, m, n, k int, alpha float32, a Ptr, at DataType, lda int, b Ptr, bt DataType, ldb int, beta float32, c Ptr, ct DataType, ldc int) error
	Kernel(name string, grid, block Dim3, shmem int, args ...any) error
}

// flatCUDA is a Device as a FlatDevice.
type flatCUDA struct{ *Device }

func (d flatCUDA) Kernel(name string, grid, block Dim3, shmem int, args ...any) error {
	f, err := d.Func("flatsearch", name)
	if err != nil {
		return err
	}
	return d.Launch(f, grid, block, shmem, args...)
}

// FlatIndex holds n vectors of dim fp16 values on the device.
type FlatIndex struct {
	d        *Device // nil on another FlatDevice
	dev      FlatDevice
	base     Ptr
	n, dim   int
	added    int
	scoreMiB int // scratch bound for one block of scores

	// The device buffers of a search are kept for the next one: allocating
	// and freeing a score block of hundreds of MiB per call (stream-ordered
	// pools give memory back at every synchronisation) cost as much as the
	// search itself at 1M vectors. mu serialises searches over them.
	mu      sync.Mutex
	scratch []flatBuf
}

// flatBuf is one kept device buffer.
type flatBuf struct {
	p     Ptr
	bytes int
}

// NewFlatIndex allocates room for n vectors of dim values; Add fills it.
func (d *Device) NewFlatIndex(n, dim int) (*FlatIndex, error) {
	x, err := NewFlatIndexOn(flatCUDA{d}, n, dim)
	if x != nil {
		x.d = d
	}
	return x, err
}

// NewFlatIndexOn is NewFlatIndex on any FlatDevice (FillRandomUnit and
// Rows need a Device).
func NewFlatIndexOn(dev FlatDevice, n, dim int) (*FlatIndex, error) {
	if n <= 0 || dim <= 0 {
		return nil, fmt.Errorf("cuda: flat index of %d×%d", n, dim)
	}
	p, err := dev.Alloc(2 * n * dim)
	if err != nil {
		return nil, fmt.Errorf("cuda: flat index of %d×%d fp16 (%d MiB): %w", n, dim, (2*n*dim)>>20, err)
	}
	return &FlatIndex{dev: dev, base: p, n: n, dim: dim, scoreMiB: defaultScoreMiB}, nil
}

// defaultScoreMiB bounds one block of fp32 scores: 2 GiB holds a batch of
// 512 queries over 1M vectors in one GEMM and one top-k pass chain (several
// blocks of a small corpus cost a pass chain each); at 21M the blocks are
// large enough either way.
const defaultScoreMiB = 2048

// SetScratchMiB bounds the fp32 scores of one block of vectors (default
// 2 GiB); tests lower it to make several blocks.
func (x *FlatIndex) SetScratchMiB(m int) { x.scoreMiB = max(m, 1) }

// buf returns kept buffer i with room for bytes, reallocating it when it is
// smaller.
func (x *FlatIndex) buf(i, bytes int) (Ptr, error) {
	bytes = max(bytes, 256)
	for len(x.scratch) <= i {
		x.scratch = append(x.scratch, flatBuf{})
	}
	b := &x.scratch[i]
	if b.bytes >= bytes {
		return b.p, nil
	}
	if b.p != 0 {
		if err := x.dev.Free(b.p); err != nil {
			return 0, err
		}
		*b = flatBuf{}
	}
	p, err := x.dev.Alloc(bytes)
	if err != nil {
		return 0, err
	}
	*b = flatBuf{p, bytes}
	return p, nil
}

// Ntotal is the number of vectors added so far.
func (x *FlatIndex) Ntotal() int { return x.added }

// Add appends row-major float32 vectors, rounded to fp16 (nearest, ties to
// even), converting and copying 16 MiB at a time.
func (x *FlatIndex) Add(v []float32) error {
	if len(v)%x.dim != 0 {
		return fmt.Errorf("cuda: flat index add: %d values is not a multiple of dim %d", len(v), x.dim)
	}
	rows := len(v) / x.dim
	if x.added+rows > x.n {
		return fmt.Errorf("cuda: flat index add: %d + %d vectors exceed the %d allocated", x.added, rows, x.n)
	}
	const piece = 8 << 20 // values per copy
	buf := make([]uint16, min(piece, len(v)))
	for off := 0; off < len(v); off += piece {
		m := min(piece, len(v)-off)
		ToF16(buf[:m], v[off:off+m])
		dst := x.base + Ptr(2*(x.added*x.dim+off))
		if err := x.dev.HtoD(dst, unsafe.Pointer(&buf[0]), 2*m); err != nil {
			return err
		}
	}
	x.added += rows
	return nil
}

// Free releases the device memory.
func (x *FlatIndex) Free() error {
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, b := range x.scratch {
		if b.p != 0 {
			x.dev.Free(b.p)
		}
	}
	x.scratch = nil
	if x.base == 0 {
		return nil
	}
	err := x.dev.Free(x.base)
	x.base = 0
	return err
}

// Search returns, for each of the queries (row-major, nq×dim), the k best
// inner products and their ids, best first; missing entries (k > Ntotal)
// are -inf with id -1. Queries are rounded to fp16 like the vectors.
func (x *FlatIndex) Search(queries []float32, k int) ([]float32, []int64, error) {
	if len(queries)%x.dim != 0 {
		return nil, nil, fmt.Errorf("cuda: flat search: %d values is not a multiple of dim %d", len(queries), x.dim)
	}
	if k <= 0 || k > MaxFlatK {
		return nil, nil, fmt.Errorf("cuda: flat search: k=%d outside [1, %d]", k, MaxFlatK)
	}
	nq := len(queries) / x.dim
	if nq == 0 || x.added == 0 {
		return nil, nil, nil
	}
	if nq > 65535 {
		return nil, nil, fmt.Errorf("cuda: flat search: %d queries in one call (at most 65535)", nq)
	}
	d := x.dev
	plan := planFlat(nq, x.added, k, x.scoreMiB<<20)

	x.mu.Lock()
	defer x.mu.Unlock()
	nbuf := 0
	alloc := func(bytes int) (Ptr, error) {
		nbuf++
		return x.buf(nbuf-1, bytes)
	}
	q16 := make([]uint16, len(queries))
	ToF16(q16, queries)
	qp, err := alloc(2 * len(q16))
	if err != nil {
		return nil, nil, err
	}
	if err := d.HtoD(qp, unsafe.Pointer(&q16[0]), 2*len(q16)); err != nil {
		return nil, nil, err
	}
	scores, err := alloc(4 * nq * plan.block)
	if err != nil {
		return nil, nil, err
	}
	var tmpS, tmpI [2]Ptr
	for i := range tmpS {
		if tmpS[i], err = alloc(4 * nq * plan.tmp); err != nil {
			return nil, nil, err
		}
		if tmpI[i], err = alloc(8 * nq * plan.tmp); err != nil {
			return nil, nil, err
		}
	}
	runS, err := alloc(4 * nq * plan.blocks * k)
	if err != nil {
		return nil, nil, err
	}
	runI, err := alloc(8 * nq * plan.blocks * k)
	if err != nil {
		return nil, nil, err
	}
	outS, err := alloc(4 * nq * k)
	if err != nil {
		return nil, nil, err
	}
	outI, err := alloc(8 * nq * k)
	if err != nil {
		return nil, nil, err
	}

	// reduce shrinks rows of n entries (row stride n) to k entries each,
	// written at dst with row stride dstStride.
	reduce := func(inS, inI Ptr, n int, idBase int64, dstS, dstI Ptr, dstStride int) error {
		which := 0
		for {
			p := topkPass(nq, n, k)
			nch := (n + p.chunk - 1) / p.chunk
			oS, oI, oStride := tmpS[which], tmpI[which], nch*k
			if nch == 1 {
				oS, oI, oStride = dstS, dstI, dstStride
			}
			var err error
			if p.kernel == "topk_chunks" {
				err = d.Kernel(p.kernel, Dim3{X: nch, Y: nq}, Dim3{X: topkThreads}, 0,
					inS, inI, int64(n), int64(n), idBase, k, oS, oI, int64(oStride))
			} else {
				err = d.Kernel(p.kernel, Dim3{X: (nch + warpsPerB - 1) / warpsPerB, Y: nq}, Dim3{X: 32 * warpsPerB}, 0,
					inS, inI, int64(n), int64(n), idBase, k, int64(p.chunk), oS, oI, int64(oStride))
			}
			if err != nil {
				return err
			}
			if nch == 1 {
				return nil
			}
			inS, inI, n, idBase = oS, oI, nch*k, 0
			which ^= 1
		}
	}
	for b := 0; b < plan.blocks; b++ {
		r0 := b * plan.block
		rows := min(plan.block, x.added-r0)
		if err := d.Gemm(false, true, nq, rows, x.dim, 1, qp, F16, x.dim, x.base+Ptr(2*r0*x.dim), F16, x.dim,
			0, scores, F32, rows); err != nil {
			return nil, nil, err
		}
		// Raw scores carry no id array: entry j is vector r0 + j.
		if err := reduce(scores, 0, rows, int64(r0), runS+Ptr(4*b*k), runI+Ptr(8*b*k), plan.blocks*k); err != nil {
			return nil, nil, err
		}
	}
	if plan.blocks == 1 {
		outS, outI = runS, runI
	} else if err := reduce(runS, runI, plan.blocks*k, 0, outS, outI, k); err != nil {
		return nil, nil, err
	}
	dist := make([]float32, nq*k)
	ids := make([]int64, nq*k)
	if err := d.DtoH(unsafe.Pointer(&dist[0]), outS, 4*len(dist)); err != nil {
		return nil, nil, err
	}
	if err := d.DtoH(unsafe.Pointer(&ids[0]), outI, 8*len(ids)); err != nil {
		return nil, nil, err
	}
	for i, id := range ids {
		if id == noID {
			ids[i], dist[i] = -1, float32(math.Inf(-1))
		}
	}
	return dist, ids, nil
}

// flatPlan sizes one search: base vectors are scored block rows at a time
// (nq×block fp32 scores within the scratch bound), and tmp is the entries
// per row of the largest intermediate top-k buffer. (Every pass's chunk is
// at least topkChunk, so the bitonic bound holds for the warp passes too.)
type flatPlan struct {
	block, blocks, tmp int
}

func planFlat(nq, n, k, scratchBytes int) flatPlan {
	block := max(scratchBytes/(4*nq), topkChunk) / topkChunk * topkChunk
	block = min(block, (n+topkChunk-1)/topkChunk*topkChunk)
	blocks := (n + block - 1) / block
	chunks := func(m int) int { return (m + topkChunk - 1) / topkChunk }
	tmp := max(chunks(block)*k, chunks(blocks*k)*k)
	return flatPlan{block: block, blocks: blocks, tmp: tmp}
}

// passPlan is one top-k pass over rows of n entries: its kernel and the
// entries per chunk (one chunk per warp, or topkChunk per block).
type passPlan struct {
	kernel string
	chunk  int
}

// topkPass picks the kernel of a pass: for k ≤ 256 the warp selection with
// the smallest of 32·E slots that holds k, over chunks of a multiple of 256
// entries, at least topkChunk and 16·k (each pass shrinks a row 16 times
// or more), at most 64Ki, sized for about 16K warps over the nq rows (a
// hundred per SM of an H200, enough to hide the loads' latency).
func topkPass(nq, n, k int) passPlan {
	if k > maxWarpK {
		return passPlan{"topk_chunks", topkChunk}
	}
	e := 1
	for 32*e < k {
		e *= 2
	}
	round := func(c int) int { return (c + warpStep - 1) / warpStep * warpStep }
	c := round((nq*n + 16383) / 16384)
	c = max(c, topkChunk, round(16*k))
	c = min(c, 1<<16, round(n))
	c = max(c, topkChunk)
	return passPlan{fmt.Sprintf("topk_warp%d", e), c}
}

// ToF16 rounds float32 values to IEEE half bit patterns (nearest, ties to
// even; beyond ±65504 to infinity). Long inputs are split over the CPUs: a
// batch of 512 queries of 768 values took about 4 ms on one core, most of a
// 1M-vector search's time.
func ToF16(dst []uint16, src []float32) {
	const piece = 1 << 14
	if len(src) < 2*piece {
		toF16(dst, src)
		return
	}
	parts := min(runtime.GOMAXPROCS(0), (len(src)+piece-1)/piece)
	step := (len(src) + parts - 1) / parts
	var wg sync.WaitGroup
	for lo := 0; lo < len(src); lo += step {
		hi := min(lo+step, len(src))
		wg.Add(1)
		go func() {
			defer wg.Done()
			toF16(dst[lo:hi], src[lo:hi])
		}()
	}
	wg.Wait()
}

func toF16(dst []uint16, src []float32) {
	for i, f := range src {
		dst[i] = half.F32ToF16(f)
	}
}
