package model

import (
	"fmt"
	"math"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/mempo/mempo/lib/cuda"
	"github.com/mempo/mempo/lib/envconfig"
)

// CUDA is the GPU backend: fp32 tensors in device memory, matrix products
// through cuBLAS with CUBLAS_COMPUTE_32F (no TF32), every other op a kernel of
// lib/cuda/kernels compiled by NVRTC at first use. Work is queued on one
// stream; ToHost and Sample synchronize. Device memory is freed by Free, or
// when the Go garbage collector finds a tensor unreachable. One backend is
// driven by one goroutine at a time (as the model does); its ops must not be
// called concurrently. docs/GPU.md describes the modes and variables.
type CUDA struct {
	dev *cuda.Device

	// ops is what the ops use of dev (memory, copies, GEMMs); kernel, when
	// set, launches kernels instead of dev, and sms is dev's SM count. The
	// tests set all three to lib/cuda/cudaemu's CPU emulation, dev nil,
	// to run the ops without a GPU (cuda_emu_test.go).
	ops    cudaOps
	kernel func(module, name string, grid, block cuda.Dim3, shmem int, args ...any) error
	sms    int

	cpu *CPU // RoPE tables are computed by the CPU backend's code, bit for bit

	ropeMu sync.Mutex
	rope   map[ropeKey]*cudaRope

	// bf16: matrix products take bf16 operands (rounded from the fp32
	// tensors at each call) with fp32 accumulation and fp32 results; every
	// other op stays fp32. See SetBF16.
	bf16 bool

	// attnKernelsOnly keeps every sequence on the flash-style kernels in
	// bf16 mode too (MEMPO_CUDA_ATTN=kernel); attnGemmRows overrides the
	// shortest sequence of the tensor-core path (cuda_attn.go; tests).
	attnKernelsOnly bool
	attnNoMMA       bool // MEMPO_CUDA_ATTN=gemm: the cuBLAS path instead of attnmma.cu
	attnGemmRows    int
	attnGemmChunk   int // query rows per chunk, when > 0 (tests)

	prof *cudaProf // per-kernel event timing, when profiling

	memo  map[string]*uploadMemo // see uploadIntsMemo
	pool  devPool                // freed buffers for reuse (cuda_pool.go)
	casts []castEntry            // kept bf16 roundings of activations, most recent first

	hostSamples int // filtered rows Sample drew on the host (tests read it)

	decode   string // decoding step: graph, direct or generic (cuda_decode.go)
	graphErr error  // why a capture failed (the step then runs direct)
	overlap  bool   // the decoding step's kernels launched overlapped (MEMPO_CUDA_PDL; cuda_decode.go)

	graphReplays int  // decoding steps replayed from a graph (tests read it)
	perRowAttn   bool // decoding takes attndecode.cu's per-row kernel instead of attn_split (tests, benchmarks)
	ropeApart    bool // small decoding steps run q/k/v and RoPE as separate launches (tests, benchmarks)
	attnNoSub    bool // decoding's split attention without the in-block split (attn_split_merged; tests, benchmarks)
	attnNoGroup  bool // steps of more than 4 rows take attn_split_sub or attn_split_merged, not attn_split_group (MEMPO_CUDA_ATTN_GROUP=0; tests, benchmarks)
	groupWarps   int  // attn_split_group's warps a block where not attnGroupWarps (benchmarks)
	groupFrom    int  // attn_split_group from this many rows × kv heads where not twice the SMs (tests)
	skinnyOff    bool // steps of 5 to 32 bf16 rows take cuBLAS products, not skinny.cu (MEMPO_CUDA_SKINNY=0; benchmarks)
	skinnyAll    bool // steps of 5 to 32 bf16 rows take skinny.cu for every product, not only q, k and v (benchmarks, tests)
	pairOff      bool // decoding steps run gate and up (k and v) as two cuBLAS calls, not one batched call (MEMPO_CUDA_PAIR=0; benchmarks)
	fuseOff      bool // fusedOps' methods as two launches each (MEMPO_CUDA_FUSE=0; benchmarks)

	// The small decoding steps' layers in one persistent launch
	// (dec_persist; cuda_persist.go): at most persistBlocks blocks a
	// multiprocessor (0: separate launches; persistAuto: by the model's
	// size; MEMPO_CUDA_PERSIST), a grid
	// barrier that waits longer than persistTimeout gives up, and the step
	// then runs again with separate launches, persistErr saying why.
	// persistOversize multiplies the grid past what is resident (tests).
	persistBlocks   int
	persistTimeout  time.Duration
	persistOversize int
	persistErr      error
	persistSteps    int // steps queued with dec_persist (tests read it)
	// persistTrace, when set, receives dec_persist's phase clocks
	// (benchmarks).
	persistTrace      cuda.Ptr
	persistGrid       int // the last dec_persist launch's blocks and phases (benchmarks)
	persistPhaseCount int

	live      atomic.Int64 // bytes of device memory held by tensors
	peak      atomic.Int64 // PeakBytes (cuda_lean.go)
	sinceGC   atomic.Int64
	gcTrigger int64
}

// cudaOps is the part of lib/cuda's Device the ops use.
type cudaOps interface {
	Alloc(bytes int) (cuda.Ptr, error)
	Free(p cuda.Ptr) error
	FreeLater(p cuda.Ptr)
	Sync() error
	HtoD(dst cuda.Ptr, src unsafe.Pointer, bytes int) error
	DtoH(dst unsafe.Pointer, src cuda.Ptr, bytes int) error
	DtoD(dst, src cuda.Ptr, bytes int) error
	Memset32(p cuda.Ptr, v uint32, n int) error
	Upload(src unsafe.Pointer, bytes int) (cuda.Ptr, error)
	UploadGen() uint64
	Gemm(transA, transB bool, m, n, k int, alpha float32, a cuda.Ptr, at cuda.DataType, lda int, b cuda.Ptr, bt cuda.DataType, ldb int, beta float32, c cuda.Ptr, ct cuda.DataType, ldc int) error
	GemmStridedBatched(transA, transB bool, m, n, k int, alpha float32, a cuda.Ptr, at cuda.DataType, lda int, strideA int64, b cuda.Ptr, bt cuda.DataType, ldb int, strideB int64, beta float32, c cuda.Ptr, ct cuda.DataType, ldc int, strideC int64, batch int) error
}

// cudaRope is a device cos/sin table [position][headDim/2]; the buffers are
// held so the collector keeps them while the table is in use.
type cudaRope struct {
	n        int // positions in the table
	cos, sin cuda.Ptr
	cosBuf   *devBuf
	sinBuf   *devBuf
}

type devBuf struct {
	p     cuda.Ptr
	bytes int
	size  int // the pool's size class of p
	freed bool
	be    *CUDA

	// w16 is the buffer's bf16 rounding for the products of bf16 mode,
	// valid while w16ok. A weight (MarkWeight) makes it at first use and
	// again after it changes (Copy, Fill or Add into it): inference casts
	// each weight once, not once per product. An activation gets it from
	// the op that writes it (dual), so the products that read it need no
	// rounding pass. Every op marks its outputs' copies stale (wrote).
	weight bool
	// productOnly (ProductOnly): the next dual op writes only w16, and
	// f32stale then says the fp32 values were never written; their storage
	// is given back then (dropF32: p unset).
	productOnly, f32stale bool
	// frozen: the buffer has no fp32 storage at all, only w16
	// (FromHostFrozen, or DropF32 for the 8-bit optimizer, which then
	// writes w16 itself); p is unset.
	frozen bool
	w16    cuda.Ptr
	w16sz  int
	w16ok  bool
}

// release frees the buffer's device memory (now, or stream-ordered later).
func (d *devBuf) release(later bool) {
	d.freed = true
	if d.frozen {
		d.be.live.Add(-int64(d.w16sz))
	} else if d.p != 0 {
		d.be.live.Add(-int64(d.bytes))
		d.be.rawFree(d.p, d.size, later)
	}
	if d.w16 != 0 {
		d.be.rawFree(d.w16, d.w16sz, later)
		d.w16 = 0
	}
}

// touch marks the buffer's bf16 copy stale after a write into it.
func (d *devBuf) touch() { d.w16ok = false }

// dropF32 gives back the fp32 storage of a buffer whose bf16 rounding
// holds its values (a ProductOnly one in dualDone, a weight in DropF32); p
// is unset from then on.
func (d *devBuf) dropF32() {
	if d.p == 0 || d.frozen {
		return
	}
	d.be.rawFree(d.p, d.size, false)
	d.be.live.Add(-int64(d.bytes))
	d.p = 0
}

type cudaTensor struct {
	buf  *devBuf
	off  int // in elements
	r, c int
	own  bool
}

func (t *cudaTensor) Rows() int { return t.r }
func (t *cudaTensor) Cols() int { return t.c }

func (t *cudaTensor) ptr() cuda.Ptr {
	if t.buf.freed {
		panic("model: CUDA tensor used after Free")
	}
	return t.buf.p + cuda.Ptr(4*t.off)
}
func (t *cudaTensor) n() int { return t.r * t.c }

// keptBF16 is t's bf16 rounding where its buffer keeps a valid one (a
// whole buffer's, so a view of rows reads it at its offset), else 0.
func (t *cudaTensor) keptBF16() cuda.Ptr {
	if !t.buf.w16ok {
		return 0
	}
	return t.buf.w16 + cuda.Ptr(2*t.off)
}

func gt(t Tensor) *cudaTensor {
	c := gtAny(t)
	if c.buf.frozen {
		panic("model: a bf16-only weight (LoadFrozen, DropF32) has no fp32 values; only MatMul and Embedding read it")
	}
	if c.buf.f32stale {
		panic("model: a ProductOnly tensor's fp32 values were never written; only MatMul may read it")
	}
	return c
}

// gtAny is gt for the operands of MatMul and for Free, which may be
// ProductOnly tensors.
func gtAny(t Tensor) *cudaTensor {
	c, ok := t.(*cudaTensor)
	if !ok {
		panic(fmt.Sprintf("model: CUDA backend given a %T tensor", t))
	}
	return c
}

func sameShapeG(op string, a, b *cudaTensor) {
	if a.r != b.r || a.c != b.c {
		panic(fmt.Sprintf("model: %s: shapes %d×%d and %d×%d differ", op, a.r, a.c, b.r, b.c))
	}
}

// CUDAAvailableReason is CUDAAvailable with the reason when it is false.
func CUDAAvailableReason() (bool, string) { return cuda.Available() }

// NewCUDA returns the CUDA backend on the default device.
func NewCUDA() (*CUDA, error) {
	if ok, why := cuda.Available(); !ok {
		return nil, fmt.Errorf("cuda: %s", why)
	}
	d, err := cuda.Default()
	if err != nil {
		return nil, err
	}
	be := &CUDA{dev: d, ops: d, sms: d.SMs, cpu: NewCPU(), rope: map[ropeKey]*cudaRope{}}
	be.gcTrigger = max(d.TotalMem/8, 1<<30)
	be.pool.limit = d.TotalMem / 4
	be.bf16 = envconfig.CUDABF16.On()
	be.attnKernelsOnly = envconfig.CUDAAttn.Get() == "kernel"
	be.attnNoMMA = envconfig.CUDAAttn.Get() == "gemm"
	be.decode = decodeModeFromEnv()
	be.overlap = envconfig.CUDAPDL.Get() != "0"
	be.skinnyOff = envconfig.CUDASkinny.Get() == "0"
	be.pairOff = envconfig.CUDAPair.Get() == "0"
	be.fuseOff = envconfig.CUDAFuse.Get() == "0"
	be.attnNoGroup = envconfig.CUDAAttnGroup.Get() == "0"
	be.persistBlocks, be.persistTimeout = persistBlocksFromEnv(), time.Second
	return be, nil
}

// SetBF16 switches the matrix products to bf16 operands with fp32
// accumulation (tensor cores), the rest of the model staying fp32: weights
// and activations are rounded to bf16 where they enter a GEMM, as under
// torch.autocast, and outputs, gradients and master weights stay fp32.
// MEMPO_CUDA_BF16=1 sets it for every new backend.
func (b *CUDA) SetBF16(on bool) { b.bf16 = on }

// BF16 reports whether the GEMMs take bf16 operands.
func (b *CUDA) BF16() bool { return b.bf16 }

// Device is the GPU the backend runs on.
func (b *CUDA) Device() *cuda.Device { return b.dev }

func (*CUDA) Name() string { return "cuda" }

func must(err error) {
	if err != nil {
		panic(err)
	}
}

// alloc returns a buffer of n float32s (from the pool, cuda_pool.go),
// collecting garbage tensors first when much has been allocated since the
// last collection.
func (b *CUDA) alloc(n int) *devBuf {
	bytes := 4 * max(n, 1)
	if b.sinceGC.Add(int64(bytes)) > b.gcTrigger {
		b.sinceGC.Store(0)
		runtime.GC()
	}
	p, size := b.rawAlloc(bytes)
	buf := &devBuf{p: p, bytes: bytes, size: size, be: b}
	b.live.Add(int64(bytes))
	runtime.SetFinalizer(buf, func(d *devBuf) {
		if !d.freed {
			d.release(true)
		}
	})
	return buf
}

func (b *CUDA) newTensor(rows, cols int) *cudaTensor {
	return &cudaTensor{buf: b.alloc(rows * cols), r: rows, c: cols, own: true}
}

// LiveBytes is the device memory held by tensors not yet freed.
func (b *CUDA) LiveBytes() int64 { return b.live.Load() }

func (b *CUDA) Zeros(rows, cols int) Tensor {
	t := b.newTensor(rows, cols)
	must(b.ops.Memset32(t.ptr(), 0, t.n()))
	return t
}

func (b *CUDA) Empty(rows, cols int) Tensor { return b.newTensor(rows, cols) }

func (b *CUDA) FromHost(data []float32, rows, cols int) Tensor {
	if len(data) != rows*cols {
		panic(fmt.Sprintf("model: FromHost: %d values for %d×%d", len(data), rows, cols))
	}
	t := b.newTensor(rows, cols)
	if len(data) > 0 {
		must(b.ops.HtoD(t.ptr(), unsafe.Pointer(&data[0]), 4*len(data)))
	}
	runtime.KeepAlive(data)
	return t
}

func (b *CUDA) ToHost(t Tensor, dst []float32) []float32 {
	s := gt(t)
	n := s.n()
	if cap(dst) < n {
		dst = make([]float32, n)
	}
	dst = dst[:n]
	if n > 0 {
		must(b.ops.DtoH(unsafe.Pointer(&dst[0]), s.ptr(), 4*n))
	}
	return dst
}

func (*CUDA) View(t Tensor, row0, rows int) Tensor {
	s := gt(t)
	if row0 < 0 || rows < 0 || row0+rows > s.r {
		panic(fmt.Sprintf("model: View rows [%d,%d) of %d", row0, row0+rows, s.r))
	}
	return &cudaTensor{buf: s.buf, off: s.off + row0*s.c, r: rows, c: s.c}
}

func (*CUDA) Reshape(t Tensor, rows, cols int) Tensor {
	s := gt(t)
	if rows*cols != s.r*s.c {
		panic(fmt.Sprintf("model: Reshape %d×%d to %d×%d", s.r, s.c, rows, cols))
	}
	return &cudaTensor{buf: s.buf, off: s.off, r: rows, c: cols}
}

func (b *CUDA) Copy(dst, src Tensor) {
	d, s := gt(dst), gt(src)
	sameShapeG("Copy", d, s)
	b.wrote(d)
	must(b.ops.DtoD(d.ptr(), s.ptr(), 4*d.n()))
}

func (b *CUDA) Fill(t Tensor, v float32) {
	s := gt(t)
	b.wrote(s)
	must(b.ops.Memset32(s.ptr(), math.Float32bits(v), s.n()))
}

// Free releases a tensor made by Zeros or FromHost (views are left alone).
func (b *CUDA) Free(t Tensor) {
	s := gtAny(t)
	if !s.own || s.buf.freed {
		return
	}
	if len(b.casts) > 0 {
		b.dropCasts(s.buf)
	}
	s.buf.release(false)
}

// MarkWeight tells the backend that t is a model weight: written rarely
// (SetParam after an optimizer step), read by many products. In bf16 mode
// its bf16 rounding is kept between products (see devBuf.w16).
func (b *CUDA) MarkWeight(t Tensor) {
	s := gtAny(t)
	if s.own && s.off == 0 {
		s.buf.weight = true
	}
}

// castEntry is an activation's bf16 rounding, kept for the next products.
type castEntry struct {
	buf    *devBuf
	off, n int
	p      cuda.Ptr
	size   int
}

// maxCasts bounds the activations whose bf16 rounding is kept: enough for
// the runs of products that share an operand (q, k, v from the same
// normalized input; a weight gradient right after the input gradient from
// the same output gradient), little enough that the copies cost no memory
// to speak of.
const maxCasts = 4

// wrote is called by every op on its outputs before it writes them: it
// makes kept bf16 roundings of those buffers stale.
func (b *CUDA) wrote(ts ...*cudaTensor) {
	for _, t := range ts {
		t.buf.touch()
		if len(b.casts) > 0 {
			b.dropCasts(t.buf)
		}
	}
}

// dropCasts forgets (and frees) the kept roundings of buf.
func (b *CUDA) dropCasts(buf *devBuf) {
	k := b.casts[:0]
	for _, e := range b.casts {
		if e.buf == buf {
			b.rawFree(e.p, e.size, false)
		} else {
			k = append(k, e)
		}
	}
	clear(b.casts[len(k):])
	b.casts = k
}

// activationBF16 returns t rounded to bf16 from the kept roundings, or
// casts it and keeps the result, evicting the least recently used.
func (b *CUDA) activationBF16(t *cudaTensor) cuda.Ptr {
	n := t.n()
	for i, e := range b.casts {
		if e.buf == t.buf && e.off == t.off && e.n == n {
			copy(b.casts[1:i+1], b.casts[:i])
			b.casts[0] = e
			return e.p
		}
	}
	p, size := b.castBF16(t)
	if len(b.casts) == maxCasts {
		last := b.casts[maxCasts-1]
		b.rawFree(last.p, last.size, false)
		b.casts = b.casts[:maxCasts-1]
	}
	b.casts = append([]castEntry{{buf: t.buf, off: t.off, n: n, p: p, size: size}}, b.casts...)
	return p
}

// whole reports whether t is its whole buffer (not a view of part of it).
func (t *cudaTensor) whole() bool { return t.off == 0 && 4*max(t.n(), 1) == t.buf.bytes }

// dual returns where an op writing t should also write t's bf16 rounding:
// t's w16 buffer in bf16 mode when t is a whole buffer, else 0 (the kernels
// skip a null pointer). The op calls dualDone after its launch.
func (b *CUDA) dual(t *cudaTensor) cuda.Ptr {
	if !b.bf16 || !t.whole() {
		return 0
	}
	buf := t.buf
	if buf.w16 == 0 {
		buf.w16, buf.w16sz = b.rawAlloc(buf.bytes/2 + 16)
	}
	return buf.w16
}

// dualDone marks t's bf16 rounding valid after an op wrote it at p. When t
// is ProductOnly its fp32 values are now never to be read (gt panics), so
// their storage goes back at once: a training step keeps gate, up, the
// SwiGLU output and the normed inputs of every layer until the backward,
// and their unwritten fp32 buffers were two thirds of what those held.
// Freeing is stream-ordered (the pool, or cuMemFreeAsync), so an op still
// reading the fp32 values in place (the LM head's log-softmax backward)
// finishes first.
func (b *CUDA) dualDone(t *cudaTensor, p cuda.Ptr) {
	if p != 0 {
		t.buf.w16ok = true
		t.buf.f32stale = t.buf.productOnly
		if t.buf.productOnly {
			t.buf.dropF32()
		}
	}
}

// f32Out is where an op writes t's fp32 values: nowhere (0) when t is
// ProductOnly and its bf16 rounding is written instead (the kernels skip a
// null pointer).
func (b *CUDA) f32Out(t *cudaTensor, p16 cuda.Ptr) cuda.Ptr {
	if t.buf.productOnly && p16 != 0 {
		return 0
	}
	return t.ptr()
}

// ProductOnly promises that t, about to be written by MatMul, RMSNorm,
// SwiGLU, SwiGLUBackward or TokenLogProbsBackward, will only be read by MatMul,
// SwiGLU and SwiGLUBackward (and added into by MatMul) before it is freed:
// in bf16 mode those ops then write and read only its bf16 rounding, saving
// half the bytes of every store and load; any other op reading it panics.
// It does nothing in fp32 mode.
func (b *CUDA) ProductOnly(t Tensor) {
	s := gt(t)
	if b.bf16 && s.whole() {
		s.buf.productOnly = true
	}
}

// bf16Operand returns t rounded to bf16: its buffer's valid copy (w16; a
// view of rows reads it at its offset, as the LM head's chunks of the final
// norm's output do), a weight's remade copy, or an activation's
// (activationBF16). None is freed by the caller.
func (b *CUDA) bf16Operand(t *cudaTensor) cuda.Ptr {
	if p := t.keptBF16(); p != 0 {
		return p
	}
	buf := t.buf
	if !buf.weight || t.off != 0 || 4*t.n() > buf.bytes {
		return b.activationBF16(t)
	}
	if buf.w16 == 0 {
		buf.w16, buf.w16sz = b.rawAlloc(buf.bytes/2 + 16)
	}
	// A weight's rounding, made again after it changed.
	n := int64(buf.bytes / 4)
	b.launch("model", "cast_bf16", b.gridFor(n, 256), 256, 0, buf.w16, buf.p, n)
	buf.w16ok = true
	return buf.w16
}

// ---- launches ----

func (b *CUDA) fn(module, name string) *cuda.Function {
	f, err := b.dev.Func(module, name)
	must(err)
	return f
}

func (b *CUDA) launch(module, name string, grid, block int, shmem int, args ...any) {
	b.launch2(module, name, cuda.Dim3{X: grid}, block, shmem, args...)
}

func (b *CUDA) launch2(module, name string, grid cuda.Dim3, block int, shmem int, args ...any) {
	if b.kernel != nil {
		must(b.kernel(module, name, grid, cuda.Dim3{X: block}, shmem, args...))
		return
	}
	f := b.fn(module, name)
	if shmem > 48<<10 {
		must(b.dev.SetMaxDynamicShared(f, shmem))
	}
	defer b.timed(name)()
	must(b.dev.Launch(f, grid, cuda.Dim3{X: block}, shmem, args...))
}

// cudaProf records an event pair around every kernel and GEMM.
type cudaProf struct {
	phase   string // what the model is doing (Model.setPhase): prefixes the names
	pending []profRec
	ms      map[string]float64
	calls   map[string]int
}

type profRec struct {
	name string
	a, b *cuda.Event
}

// profFold is how many timed launches wait for their events to be read:
// a whole rollout times millions, and each holds two driver events.
const profFold = 8192

func (b *CUDA) timed(name string) func() {
	p := b.prof
	if p == nil {
		return func() {}
	}
	if p.phase != "" {
		name = p.phase + " " + name
	}
	e0, err := b.dev.Record()
	must(err)
	return func() {
		e1, err := b.dev.Record()
		must(err)
		p.pending = append(p.pending, profRec{name, e0, e1})
		if len(p.pending) >= profFold {
			b.foldProfile(p)
		}
	}
}

// foldProfile waits for the pending launches and adds their times up.
func (b *CUDA) foldProfile(p *cudaProf) {
	must(b.dev.Sync())
	for _, r := range p.pending {
		t, err := b.dev.Elapsed(r.a, r.b)
		must(err)
		p.ms[r.name] += t
		p.calls[r.name]++
		r.a.Destroy()
		r.b.Destroy()
	}
	p.pending = p.pending[:0]
}

// StartProfile times every kernel and GEMM from now on (with events, so the
// queue is synchronized only every few thousand launches).
func (b *CUDA) StartProfile() {
	b.prof = &cudaProf{ms: map[string]float64{}, calls: map[string]int{}}
}

// SetProfilePhase prefixes the names of the launches timed from now on
// with phase ("" for none).
func (b *CUDA) SetProfilePhase(phase string) {
	if b.prof != nil {
		b.prof.phase = phase
	}
}

// StopProfile stops timing and returns milliseconds and calls per kernel name
// (GEMMs are "gemm"), each prefixed with the phase it ran in, if any.
func (b *CUDA) StopProfile() (ms map[string]float64, calls map[string]int) {
	p := b.prof
	b.prof = nil
	if p == nil {
		return map[string]float64{}, map[string]int{}
	}
	b.foldProfile(p)
	return p.ms, p.calls
}

// gridFor is a grid-stride grid for n elements.
func (b *CUDA) gridFor(n int64, block int) int {
	g := (n + int64(block) - 1) / int64(block)
	return int(min(max(g, 1), int64(b.sms*32)))
}

func (b *CUDA) uploadInts(v []int) cuda.Ptr {
	tmp := make([]int32, max(len(v), 1))
	for i, x := range v {
		tmp[i] = int32(x)
	}
	p, err := b.ops.Upload(unsafe.Pointer(&tmp[0]), 4*len(v))
	must(err)
	runtime.KeepAlive(tmp)
	return p
}

// uploadMemo is the last array uploaded under a key, reused while its
// contents and the upload ring's generation are unchanged.
type uploadMemo struct {
	gen  uint64
	vals []int
	p    cuda.Ptr
}

// uploadIntsMemo is uploadInts for arrays that repeat from call to call: the
// positions, tile lists and cache rows of one forward are the same for every
// layer, so a decoding step uploads them once instead of once per layer.
func (b *CUDA) uploadIntsMemo(key string, v []int) cuda.Ptr {
	gen := b.ops.UploadGen()
	if m := b.memo[key]; m != nil && m.gen == gen && slices.Equal(m.vals, v) {
		return m.p
	}
	p := b.uploadInts(v)
	if b.memo == nil {
		b.memo = map[string]*uploadMemo{}
	}
	// The generation after the upload: a wrap inside it leaves p valid.
	b.memo[key] = &uploadMemo{gen: b.ops.UploadGen(), vals: slices.Clone(v), p: p}
	return p
}

func (b *CUDA) uploadF32(v []float32) cuda.Ptr {
	if len(v) == 0 {
		v = []float32{0}
	}
	p, err := b.ops.Upload(unsafe.Pointer(&v[0]), 4*len(v))
	must(err)
	runtime.KeepAlive(v)
	return p
}

func (b *CUDA) uploadF64(v []float64) cuda.Ptr {
	if len(v) == 0 {
		v = []float64{0}
	}
	p, err := b.ops.Upload(unsafe.Pointer(&v[0]), 8*len(v))
	must(err)
	runtime.KeepAlive(v)
	return p
}

// ---- ops ----

func (b *CUDA) GatherRows(dst, src Tensor, rows []int) {
	d, s := gt(dst), gt(src)
	if d.c != s.c || d.r != len(rows) {
		panic("model: GatherRows shape mismatch")
	}
	b.wrote(d)
	for _, r := range rows {
		if r < 0 || r >= s.r {
			panic(fmt.Sprintf("model: GatherRows row %d of %d", r, s.r))
		}
	}
	if len(rows) == 0 {
		return
	}
	idx := b.uploadIntsMemo("gather", rows) // the same rows for a layer's keys and values
	b.launch("model", "gather_rows_f32", min(len(rows), 65535), 256, 0, d.ptr(), s.ptr(), idx, len(rows), d.c)
}

func (b *CUDA) ScatterRows(dst, src Tensor, rows []int) {
	d, s := gt(dst), gt(src)
	if d.c != s.c || s.r != len(rows) {
		panic("model: ScatterRows shape mismatch")
	}
	b.wrote(d)
	for _, r := range rows {
		if r < 0 || r >= d.r {
			panic(fmt.Sprintf("model: ScatterRows row %d of %d", r, d.r))
		}
	}
	if len(rows) == 0 {
		return
	}
	idx := b.uploadIntsMemo("scatter", rows)
	b.launch("model", "scatter_rows_f32", min(len(rows), 65535), 256, 0, d.ptr(), s.ptr(), idx, len(rows), d.c)
}

// runLists uploads runs for model.cu's copy_runs_f32 and cast_runs_bf16:
// [nrun][2] {first destination row, first source row} and the runs'
// starting offsets (nrun + 1 entries, the last the rows in all), as one
// array under key (two memoized uploads could see the ring wrap between
// them and the first be overwritten).
func (b *CUDA) runLists(key string, runs []rowCopy) (rp, sp cuda.Ptr, total int) {
	v := make([]int, 2*len(runs), 3*len(runs)+1)
	for i, r := range runs {
		v[2*i], v[2*i+1] = r.dst, r.src
		v = append(v, total)
		total += r.n
	}
	v = append(v, total)
	p := b.uploadIntsMemo(key, v)
	return p, p + cuda.Ptr(4*2*len(runs)), total
}

// runGrid is the grid of the row-run kernels: a warp a row, 8 a block.
func (b *CUDA) runGrid(rows int) int { return max(1, min((rows+7)/8, b.sms*16)) }

// CopyRuns moves runs of rows within t (model's resolved KV-cache copies:
// no run reads rows another writes) in one launch.
func (b *CUDA) CopyRuns(t Tensor, runs []rowCopy) {
	d := gt(t)
	b.wrote(d)
	for _, r := range runs {
		if r.n < 0 || r.dst < 0 || r.src < 0 || r.dst+r.n > d.r || r.src+r.n > d.r {
			panic(fmt.Sprintf("model: CopyRuns run %+v outside %d rows", r, d.r))
		}
	}
	rp, sp, total := b.runLists("copy", runs)
	if total == 0 {
		return
	}
	b.launch("model", "copy_runs_f32", b.runGrid(total), 256, 0, d.ptr(), rp, sp, len(runs), int64(total), d.c)
}

func (b *CUDA) MatMul(c, a, bb Tensor, transA, transB bool, alpha, beta float32) {
	C, A, B := gtAny(c), gtAny(a), gtAny(bb)
	// A ProductOnly output in bf16 mode: the product writes only its bf16
	// rounding (and with beta ≠ 0 adds to the rounding an earlier product
	// wrote there).
	c16 := b.bf16 && C.buf.productOnly && C.whole()
	if !c16 {
		C = gt(c)
	} else if beta != 0 && !(C.buf.f32stale && C.buf.w16ok) {
		panic("model: MatMul adding into a ProductOnly tensor no product wrote")
	}
	m, k := A.r, A.c
	if transA {
		m, k = k, m
	}
	kb, n := B.r, B.c
	if transB {
		kb, n = n, kb
	}
	if kb != k || C.r != m || C.c != n {
		panic(fmt.Sprintf("model: MatMul %d×%d (t=%v) by %d×%d (t=%v) into %d×%d", A.r, A.c, transA, B.r, B.c, transB, C.r, C.c))
	}
	if k == 0 {
		if beta != 1 {
			// C = beta·C: through the GEMM with a zero inner size cuBLAS
			// may do nothing; scale explicitly.
			tmp := b.Zeros(C.r, C.c)
			if beta != 0 {
				b.Copy(tmp, C)
			}
			b.Copy(C, tmp)
			b.Free(tmp)
		}
		return
	}
	if c16 {
		a16, b16 := b.bf16Operand(A), b.bf16Operand(B)
		p := b.dual(C)
		b.wrote(C)
		func() {
			defer b.timed("gemm_bf16")()
			must(b.ops.Gemm(transA, transB, m, n, k, alpha, a16, cuda.BF16, A.c, b16, cuda.BF16, B.c, beta, p, cuda.BF16, C.c))
		}()
		b.dualDone(C, p)
		return
	}
	b.wrote(C)
	if b.bf16 {
		a16, b16 := b.bf16Operand(A), b.bf16Operand(B)
		func() {
			defer b.timed("gemm_bf16")()
			must(b.ops.Gemm(transA, transB, m, n, k, alpha, a16, cuda.BF16, A.c, b16, cuda.BF16, B.c, beta, C.ptr(), cuda.F32, C.c))
		}()
		return
	}
	defer b.timed("gemm")()
	must(b.ops.Gemm(transA, transB, m, n, k, alpha, A.ptr(), cuda.F32, A.c, B.ptr(), cuda.F32, B.c, beta, C.ptr(), cuda.F32, C.c))
}

// castBF16 returns a new device buffer holding t rounded to bf16 and its
// pooled size (the caller gives it back with rawFree).
func (b *CUDA) castBF16(t *cudaTensor) (cuda.Ptr, int) {
	n := int64(t.n())
	p, size := b.rawAlloc(int(2*n + 16))
	b.launch("model", "cast_bf16", b.gridFor(n, 256), 256, 0, p, t.ptr(), n)
	return p, size
}

func (b *CUDA) Add(dst, src Tensor) {
	d, s := gt(dst), gt(src)
	sameShapeG("Add", d, s)
	b.wrote(d)
	n := int64(d.n())
	b.launch("model", "add_f32", b.gridFor(n, 256), 256, 0, d.ptr(), s.ptr(), n)
}

func (b *CUDA) AddBias(x, bias Tensor) {
	X, B := gt(x), gt(bias)
	if B.n() != X.c {
		panic("model: AddBias width mismatch")
	}
	b.wrote(X)
	n := int64(X.n())
	x16 := b.dual(X)
	b.launch("model", "add_bias_f32", b.gridFor(n, 256), 256, 0, X.ptr(), B.ptr(), n, X.c, x16)
	b.dualDone(X, x16)
}

func (b *CUDA) SumRows(dst, x Tensor) {
	d, X := gt(dst), gt(x)
	if d.n() != X.c {
		panic("model: SumRows width mismatch")
	}
	b.wrote(d)
	if X.r == 0 {
		return
	}
	const chunk = 64
	g := cuda.Dim3{X: (X.c + 255) / 256, Y: (X.r + chunk - 1) / chunk}
	b.launch2("model", "sum_rows_f32", g, 256, 0, d.ptr(), X.ptr(), X.r, X.c, chunk)
}

func (b *CUDA) Embedding(out, table Tensor, ids []int) {
	o, t := gt(out), gtAny(table)
	if o.r != len(ids) || o.c != t.c {
		panic("model: Embedding shape mismatch")
	}
	if t.buf.frozen {
		b.gatherBF16(o, t, ids)
		return
	}
	b.GatherRows(out, table, ids)
}

func (b *CUDA) EmbeddingBackward(dTable, dOut Tensor, ids []int) {
	t, o := gt(dTable), gt(dOut)
	if o.r != len(ids) || o.c != t.c {
		panic("model: EmbeddingBackward shape mismatch")
	}
	b.wrote(t)
	if len(ids) == 0 {
		return
	}
	idx := b.uploadInts(ids)
	b.launch("model", "embedding_bwd_f32", min(len(ids), 65535), 256, 0, t.ptr(), o.ptr(), idx, len(ids), t.c)
}

func normBlock(dim int) int { return min(1024, max(32, (dim+31)/32*32)) }

// normLaunch is the threads rmsnorm_f32 and rmsnorm_bwd_dx_f32 run with over
// rows of dim: normBlock's layout, whose order the row sums follow, played
// by a G-th of its threads (each taking G of them; model.cu's
// norm_vthreads) for the smallest G ≤ 8 that leaves at most 8 whole warps.
// The bits are those of a normBlock launch; a multiprocessor holds four
// times the rows (the 1,536-wide rows of a 1.5B training step ran at a
// third of the memory's bandwidth with 1,024 threads a row).
func normLaunch(dim int) int {
	vt := normBlock(dim)
	w := vt / 32
	for g := 1; g <= 8; g++ {
		if w%g == 0 && w/g <= 8 {
			return vt / g
		}
	}
	return vt
}

func (b *CUDA) RMSNorm(out, rstd, x, w Tensor, eps float32) {
	o, s, X, W := gt(out), gt(rstd), gt(x), gt(w)
	dim := W.n()
	n := X.n() / dim
	if X.c%dim != 0 || s.n() != n {
		panic(fmt.Sprintf("model: RMSNorm of %d×%d by %d with rstd %d×%d", X.r, X.c, dim, s.r, s.c))
	}
	sameShapeG("RMSNorm", o, X)
	b.wrote(o, s)
	if n == 0 {
		return
	}
	o16 := b.dual(o)
	b.launch("model", "rmsnorm_f32", min(n, 65535*4), normLaunch(dim), 0, b.f32Out(o, o16), s.ptr(), X.ptr(), W.ptr(), n, dim, eps, o16)
	b.dualDone(o, o16)
}

// The CUDA backend fuses what the model asks of fusedOps.
var _ fusedOps = (*CUDA)(nil)

// AddRMSNorm is Add(x, d) then RMSNorm(out, rstd, x, w, eps) over whole
// rows (len(w) = cols) in one launch, add_rmsnorm_f32: the same bits as the
// two, the rows read once (Model.addNorm).
func (b *CUDA) AddRMSNorm(out, rstd, x, d, w Tensor, eps float32) {
	if b.fuseOff {
		b.Add(x, d)
		b.RMSNorm(out, rstd, x, w, eps)
		return
	}
	o, s, X, D, W := gt(out), gt(rstd), gt(x), gt(d), gt(w)
	dim, n := W.n(), X.r
	if X.c != dim || s.n() != n {
		panic(fmt.Sprintf("model: AddRMSNorm of %d×%d by %d with rstd %d×%d", X.r, X.c, dim, s.r, s.c))
	}
	sameShapeG("AddRMSNorm", D, X)
	sameShapeG("AddRMSNorm", o, X)
	b.wrote(X, o, s)
	if n == 0 {
		return
	}
	o16 := b.dual(o)
	b.launch("model", "add_rmsnorm_f32", min(n, 65535*4), normLaunch(dim), 0, b.f32Out(o, o16), s.ptr(), X.ptr(), D.ptr(), W.ptr(), n, dim, eps, o16)
	b.dualDone(o, o16)
}

func (b *CUDA) RMSNormBackward(dx, dw, dy, x, w, rstd Tensor) {
	b.rmsNormBackward(dx, dw, dy, x, w, rstd, nil)
}

// RMSNormBackwardAdd is RMSNormBackward then Add(dx, res) (the residual
// path's gradient) with the sum made in the dx launch: the same bits as the
// two (Model.normBackwardAdd). res must not alias dx.
func (b *CUDA) RMSNormBackwardAdd(dx, dw, dy, x, w, rstd, res Tensor) {
	if b.fuseOff {
		b.RMSNormBackward(dx, dw, dy, x, w, rstd)
		b.Add(dx, res)
		return
	}
	b.rmsNormBackward(dx, dw, dy, x, w, rstd, res)
}

func (b *CUDA) rmsNormBackward(dx, dw, dy, x, w, rstd, res Tensor) {
	DX, DW, DY, X, W, S := gt(dx), gt(dw), gt(dy), gt(x), gt(w), gt(rstd)
	dim := W.n()
	n := X.n() / dim
	sameShapeG("RMSNormBackward", DY, X)
	sameShapeG("RMSNormBackward", DX, X)
	var rp cuda.Ptr
	if res != nil {
		R := gt(res)
		sameShapeG("RMSNormBackwardAdd", R, X)
		if R.ptr() == DX.ptr() {
			panic("model: RMSNormBackwardAdd: res aliases dx")
		}
		rp = R.ptr()
	}
	b.wrote(DX, DW)
	if n == 0 {
		return
	}
	const chunk = 64
	g := cuda.Dim3{X: (dim + 255) / 256, Y: (n + chunk - 1) / chunk}
	// dw first: dx may overwrite dy.
	b.launch2("model", "rmsnorm_bwd_dw_f32", g, 256, 0, DW.ptr(), DY.ptr(), X.ptr(), S.ptr(), n, dim, chunk)
	dx16 := b.dual(DX)
	b.launch("model", "rmsnorm_bwd_dx_f32", min(n, 65535*4), normLaunch(dim), 0, DX.ptr(), DY.ptr(), X.ptr(), W.ptr(), S.ptr(), n, dim, rp, dx16)
	b.dualDone(DX, dx16)
}

// ropeTable returns device cos/sin tables [position][headDim/2] covering
// maxPos, computed by the CPU backend's code and uploaded once per growth.
func (b *CUDA) ropeTable(headDim int, theta float64, maxPos int) *cudaRope {
	b.ropeMu.Lock()
	defer b.ropeMu.Unlock()
	k := ropeKey{headDim, theta}
	if t := b.rope[k]; t != nil && t.n > maxPos {
		return t
	}
	n := max(maxPos+1, 4096)
	if t := b.rope[k]; t != nil {
		n = max(n, 2*t.n)
	}
	tab := b.cpu.ropeRows(headDim, theta, n-1)
	half := headDim / 2
	cs, sn := make([]float32, n*half), make([]float32, n*half)
	for p := 0; p < n; p++ {
		copy(cs[p*half:], tab.cos[p])
		copy(sn[p*half:], tab.sin[p])
	}
	ct, st := b.FromHost(cs, n, half).(*cudaTensor), b.FromHost(sn, n, half).(*cudaTensor)
	t := &cudaRope{n: n, cos: ct.ptr(), sin: st.ptr(), cosBuf: ct.buf, sinBuf: st.buf}
	b.rope[k] = t
	return t
}

func (b *CUDA) RoPE(x Tensor, pos []int, headDim int, theta float64, inverse bool) {
	b.ropeLaunch(x, nil, pos, headDim, theta, inverse)
}

// BiasRoPE is AddBias(x, bias) then RoPE(x, …) in one launch, the same bits
// as the two (Model.biasRoPE).
func (b *CUDA) BiasRoPE(x, bias Tensor, pos []int, headDim int, theta float64) {
	if b.fuseOff {
		b.AddBias(x, bias)
		b.RoPE(x, pos, headDim, theta, false)
		return
	}
	b.ropeLaunch(x, bias, pos, headDim, theta, false)
}

// ropeArgs is what a kernel applying RoPE reads: the rows' positions and
// the cos/sin tables.
type ropeArgs struct {
	pos cuda.Ptr
	tab *cudaRope
}

// ropeArgsFor uploads pos (one position a row of X) and makes the tables
// cover them.
func (b *CUDA) ropeArgsFor(X *cudaTensor, pos []int, headDim int, theta float64) *ropeArgs {
	if len(pos) != X.r || X.c%headDim != 0 {
		panic("model: RoPE shape mismatch")
	}
	maxPos := 0
	for _, p := range pos {
		if p < 0 {
			panic("model: RoPE negative position")
		}
		maxPos = max(maxPos, p)
	}
	return &ropeArgs{pos: b.uploadIntsMemo("rope", pos), tab: b.ropeTable(headDim, theta, maxPos)}
}

// ropeLaunch is RoPE, with the 1×cols bias added first when bias is not nil.
func (b *CUDA) ropeLaunch(x, bias Tensor, pos []int, headDim int, theta float64, inverse bool) {
	X := gt(x)
	ra := b.ropeArgsFor(X, pos, headDim, theta)
	var bp cuda.Ptr
	if bias != nil {
		B := gt(bias)
		if B.n() != X.c {
			panic("model: BiasRoPE width mismatch")
		}
		bp = B.ptr()
	}
	b.wrote(X)
	if X.r == 0 {
		return
	}
	inv := 0
	if inverse {
		inv = 1
	}
	pairs := int64(X.r) * int64(X.c/2)
	// The forward's q and k go on to attention, the backward's dq and dk to
	// the products (past the bias gradient, which only reads them; with
	// per-head norms the norm's backward rewrites them and the rounding goes
	// unused).
	x16 := b.dual(X)
	b.launch("model", "rope_f32", b.gridFor(pairs, 256), 256, 0, X.ptr(), ra.pos, ra.tab.cos, ra.tab.sin, X.r, X.c, headDim, inv, x16, bp)
	b.dualDone(X, x16)
}

// elemIn is where SwiGLU and SwiGLUBackward read an input: its fp32 values
// (p32), or (p16) the bf16 rounding a product wrote into a ProductOnly
// tensor, whose fp32 values were never written.
func elemIn(t Tensor) (c *cudaTensor, p32, p16 cuda.Ptr) {
	c = gtAny(t)
	if c.buf.f32stale && c.whole() && c.buf.w16ok {
		return c, 0, c.buf.w16
	}
	c = gt(t)
	return c, c.ptr(), 0
}

func (b *CUDA) SwiGLU(out, gate, up Tensor) {
	o := gt(out)
	g, g32, g16 := elemIn(gate)
	u, u32, u16 := elemIn(up)
	sameShapeG("SwiGLU", o, g)
	sameShapeG("SwiGLU", o, u)
	b.wrote(o)
	n := int64(o.n())
	o16 := b.dual(o)
	o32 := b.f32Out(o, o16)
	if o32 == 0 && g16 != 0 && u16 != 0 && n%8 == 0 {
		b.launch("model", "swiglu_bf16x8", b.gridFor(n/8, 256), 256, 0, o16, g16, u16, n/8)
	} else {
		name, items, args := swigluLaunch(o32, g32, u32, n, o16, g16, u16)
		b.launch("model", name, b.gridFor(items, 256), 256, 0, args...)
	}
	b.dualDone(o, o16)
}

// swigluLaunch is model.cu's SwiGLU over n elements from fp32 gate and up
// (or their bf16 roundings g16, u16) into o32 and/or o16 (0: not written):
// swiglu_f32x4 where the inputs are fp32 and n and every pointer allow
// 16-byte vectors (the same bits), swiglu_f32 otherwise. It returns the
// kernel, the items its grid covers and its arguments.
func swigluLaunch(o32, g32, u32 cuda.Ptr, n int64, o16, g16, u16 cuda.Ptr) (name string, items int64, args []any) {
	if g16 == 0 && u16 == 0 && n%4 == 0 && aligned16(o32, o16, g32, u32) {
		return "swiglu_f32x4", n / 4, []any{o32, g32, u32, n / 4, o16}
	}
	return "swiglu_f32", n, []any{o32, g32, u32, n, o16, g16, u16}
}

// aligned16 says whether every pointer is 16-byte aligned (0 counts as
// aligned): the vectorized kernels' condition.
func aligned16(ps ...cuda.Ptr) bool {
	for _, p := range ps {
		if p%16 != 0 {
			return false
		}
	}
	return true
}

func (b *CUDA) SwiGLUBackward(dgate, dup, dout, gate, up Tensor) {
	dg, du := gt(dgate), gt(dup)
	do, do32, do16 := elemIn(dout)
	g, g32, g16 := elemIn(gate)
	u, u32, u16 := elemIn(up)
	sameShapeG("SwiGLUBackward", dg, g)
	sameShapeG("SwiGLUBackward", du, u)
	sameShapeG("SwiGLUBackward", do, g)
	b.wrote(dg, du)
	n := int64(g.n())
	dg16, du16 := b.dual(dg), b.dual(du)
	dg32, du32 := b.f32Out(dg, dg16), b.f32Out(du, du16)
	if dg32 == 0 && du32 == 0 && do16 != 0 && g16 != 0 && u16 != 0 && n%8 == 0 {
		b.launch("model", "swiglu_bwd_bf16x8", b.gridFor(n/8, 256), 256, 0, dg16, du16, do16, g16, u16, n/8)
	} else {
		b.launch("model", "swiglu_bwd_f32", b.gridFor(n, 256), 256, 0, dg32, du32, do32, g32, u32, n, dg16, du16, do16, g16, u16)
	}
	b.dualDone(dg, dg16)
	b.dualDone(du, du16)
}

func (b *CUDA) TokenLogProbs(lp, lse, logits Tensor, targets []int) {
	L, S, Z := gt(lp), gt(lse), gt(logits)
	if len(targets) != Z.r || L.n() != Z.r || S.n() != Z.r {
		panic("model: TokenLogProbs shape mismatch")
	}
	b.wrote(L, S)
	if Z.r == 0 {
		return
	}
	tg := b.uploadInts(targets)
	b.launch("model", "token_logprobs_f32", min(Z.r, 65535*4), 1024, 0, L.ptr(), S.ptr(), Z.ptr(), tg, Z.r, int64(Z.c))
}

func (b *CUDA) TokenLogProbsBackward(dlogits, logits, lse Tensor, targets []int, dlp []float32) {
	D, Z, S := gt(dlogits), gt(logits), gt(lse)
	sameShapeG("TokenLogProbsBackward", D, Z)
	b.wrote(D)
	if len(targets) != Z.r || len(dlp) < Z.r || S.n() != Z.r {
		panic("model: TokenLogProbsBackward shape mismatch")
	}
	if Z.r == 0 {
		return
	}
	tg := b.uploadInts(targets)
	g := b.uploadF32(dlp[:Z.r])
	d16 := b.dual(D)
	b.launch("model", "token_logprobs_bwd_f32", min(Z.r, 65535*4), 1024, 0, b.f32Out(D, d16), Z.ptr(), S.ptr(), tg, g, Z.r, int64(Z.c), d16)
	b.dualDone(D, d16)
}

// Attention tiles: 16 query rows (forward, dq) or keys (dk, dv) per block.
const attnTile = 16

func attnNT(hd int) (int, error) {
	switch {
	case hd <= 32:
		return 1, nil
	case hd <= 64:
		return 2, nil
	case hd <= 128:
		return 4, nil
	case hd <= 256:
		return 8, nil
	}
	return 0, fmt.Errorf("model: CUDA attention supports head dims up to 256, got %d", hd)
}

// attnWork uploads the sequence table and a tile list (sequence, first row)
// covering each sequence's N rows in tiles of tile rows, for the kernels
// named by key (the uploads are memoized under it).
func (b *CUDA) attnWork(seqs []AttnSeq, tile int, key string) (tiles, st cuda.Ptr, ntiles int) {
	tv, sv := attnLists(seqs, tile)
	if len(tv) == 0 {
		return 0, 0, 0
	}
	return b.uploadIntsMemo(key+"-tiles", tv), b.uploadIntsMemo(key+"-seqs", sv), len(tv) / 2
}

// attnLists is the attention kernels' work: the tile list [ntiles][2] =
// {sequence, first row} and the sequence table [nseq][4] = {Q, N, K, Past}.
func attnLists(seqs []AttnSeq, tile int) (tiles, table []int) {
	table = make([]int, 0, 4*len(seqs))
	for i, s := range seqs {
		table = append(table, s.Q, s.N, s.K, s.Past)
		for r := 0; r < s.N; r += tile {
			tiles = append(tiles, i, r)
		}
	}
	return tiles, table
}

// attnShmem is the dynamic shared memory of attention2.cu's kernels
// (forward, dq, dk/dv) for head dim hd: a tile of attnTile rows and tiles of
// 32 keys (or queries), each row hd rounded up to a multiple of 4 floats, the
// 32-row tiles padded by 4 more, and 64 floats of row statistics in dk/dv.
func attnShmem(hd int) (fwd, dq, dkv int) {
	hd4 := (hd + 3) &^ 3
	fwd = 4 * (attnTile*hd4 + 32*(hd4+4) + 32*hd4)
	dq = 4 * (2*attnTile*hd4 + 2*32*(hd4+4))
	return fwd, dq, dq + 4*64
}

func (b *CUDA) Attention(out, lse, q, k, v Tensor, seqs []AttnSeq, sh AttnShape) {
	O, LSE, Q, K, V := gt(out), gt(lse), gt(q), gt(k), gt(v)
	hd := sh.HeadDim
	if Q.c != sh.Heads*hd || K.c != sh.KVHeads*hd || V.c != K.c || O.c != Q.c || LSE.c != sh.Heads || sh.Heads%sh.KVHeads != 0 {
		panic("model: Attention shape mismatch")
	}
	for _, s := range seqs {
		s.checkPrefix()
		if s.Q < 0 || s.Q+s.N > Q.r || s.K < 0 || s.K+s.Past+s.N > K.r || s.P+s.PN > K.r {
			panic(fmt.Sprintf("model: Attention sequence %+v outside q (%d rows) or k (%d rows)", s, Q.r, K.r))
		}
	}
	b.wrote(O, LSE)
	sp := b.splitAttn(seqs, sh, true)
	if len(sp.mma) > 0 {
		b.attentionMMA(O, LSE, Q, K, V, sp.mma, sh)
	}
	if len(sp.gemm) > 0 {
		b.attentionGemm(O, LSE, Q, K, V, sp.gemm, sh)
	}
	if len(sp.dec) > 0 {
		b.attentionDecode(O, LSE, Q, K, V, sp.dec, sh)
	}
	if len(sp.packed) > 0 {
		b.attentionPacked(O, LSE, Q, K, V, sp.packed, sh)
	}
	nt, err := attnNT(hd)
	must(err)
	tiles, st, n := b.attnWork(sp.kern, attnTile, "attn")
	if n == 0 {
		return
	}
	shmem, _, _ := attnShmem(hd)
	b.launch2("attention2", fmt.Sprintf("attn2_fwd_%d", nt), cuda.Dim3{X: n, Y: sh.Heads}, 128, shmem,
		O.ptr(), LSE.ptr(), Q.ptr(), K.ptr(), V.ptr(), tiles, st, sh.Heads, sh.KVHeads, hd, sh.Scale)
}

func (b *CUDA) AttentionBackward(dq, dk, dv, dout, q, k, v, out, lse Tensor, seqs []AttnSeq, sh AttnShape) {
	b.attentionBackward(dq, dk, dv, dout, q, k, v, out, lse, seqs, sh, nil)
}

// AttentionBackwardRoPE is AttentionBackward, then RoPE's backward on dq and
// dk (Model.attentionBackwardRoPE). When attnmma.cu takes every sequence
// (bf16 mode, head dims 64 and 128), its dQ kernel rotates dq's rows as it
// stores them and writes their bf16 rounding: no pass over dq of its own.
// rope_f32's arithmetic, so the same values up to the compiler's fused
// multiply-adds.
func (b *CUDA) AttentionBackwardRoPE(dq, dk, dv, dout, q, k, v, out, lse Tensor, seqs []AttnSeq, sh AttnShape, pos []int, theta float64) {
	var rope *ropeArgs
	if !b.fuseOff && b.useAttnMMA(sh) {
		rope = b.ropeArgsFor(gt(dq), pos, sh.HeadDim, theta)
	}
	b.attentionBackward(dq, dk, dv, dout, q, k, v, out, lse, seqs, sh, rope)
	if rope == nil {
		b.RoPE(dq, pos, sh.HeadDim, theta, true)
	}
	b.RoPE(dk, pos, sh.HeadDim, theta, true)
}

func (b *CUDA) attentionBackward(dq, dk, dv, dout, q, k, v, out, lse Tensor, seqs []AttnSeq, sh AttnShape, rope *ropeArgs) {
	DQ, DK, DV, DO, Q, K, V, O, LSE := gt(dq), gt(dk), gt(dv), gt(dout), gt(q), gt(k), gt(v), gt(out), gt(lse)
	hd := sh.HeadDim
	for _, s := range seqs {
		if s.Past != 0 {
			panic("model: AttentionBackward with a KV cache")
		}
	}
	b.wrote(DQ, DK, DV)
	nt, err := attnNT(hd)
	must(err)
	sp := b.splitAttn(seqs, sh, false)
	if len(sp.mma)+len(sp.gemm)+len(sp.kern) == 0 {
		return
	}
	D := b.newTensor(Q.r, sh.Heads)
	defer b.Free(D)
	warps := int64(Q.r) * int64(sh.Heads)
	// attnmma.cu's kernels read dO rounded to bf16: the row sums' pass
	// writes it (dO is not written here, so its rounding stays valid).
	var do16 cuda.Ptr
	if len(sp.mma) > 0 && !DO.buf.w16ok {
		do16 = b.dual(DO)
	}
	b.launch("model", "attn_bwd_dsum", int((warps*32+255)/256), 256, 0, D.ptr(), DO.ptr(), O.ptr(), Q.r, sh.Heads, hd, do16)
	b.dualDone(DO, do16)
	if len(sp.mma) > 0 {
		b.attentionMMABackward(DQ, DK, DV, DO, Q, K, V, LSE, D, sp.mma, sh, rope)
	}
	if len(sp.gemm) > 0 {
		b.attentionGemmBackward(DQ, DK, DV, DO, Q, K, V, LSE, D, sp.gemm, sh)
	}
	tiles, st, n := b.attnWork(sp.kern, attnTile, "attn")
	if n == 0 {
		return
	}
	_, shq, shk := attnShmem(hd)
	b.launch2("attention2", fmt.Sprintf("attn2_bwd_dq_%d", nt), cuda.Dim3{X: n, Y: sh.Heads}, 128, shq,
		DQ.ptr(), DO.ptr(), Q.ptr(), K.ptr(), V.ptr(), LSE.ptr(), D.ptr(), tiles, st, sh.Heads, sh.KVHeads, hd, sh.Scale)
	b.launch2("attention2", fmt.Sprintf("attn2_bwd_dkv_%d", nt), cuda.Dim3{X: n, Y: sh.KVHeads}, 128, shk,
		DK.ptr(), DV.ptr(), DO.ptr(), Q.ptr(), K.ptr(), V.ptr(), LSE.ptr(), D.ptr(), tiles, st, sh.Heads, sh.KVHeads, hd, sh.Scale)
}

// Sample draws every row on the device (sample.cu): greedy and plain
// temperature rows with sample_f32, rows with top-k or top-p with
// sample_filtered_f32, which follows the CPU backend's sampleRow exactly.
// A filtered row whose candidate set is too large for the device sort (a
// nearly flat distribution) is drawn on the host by sampleRow over its
// copied logits.
func (b *CUDA) Sample(logits Tensor, params []SampleParams, u []float64) []Sampled {
	Z := gt(logits)
	out := make([]Sampled, Z.r)
	if Z.r == 0 {
		return out
	}
	if len(params) < Z.r || len(u) < Z.r {
		panic("model: Sample needs params and u for every row")
	}
	invT := make([]float64, Z.r)
	topK := make([]int, Z.r)
	topP := make([]float64, Z.r)
	var filtered []int
	for r := 0; r < Z.r; r++ {
		p := params[r]
		if p.Temperature > 0 {
			invT[r] = 1 / p.Temperature
			if (p.TopK > 0 && p.TopK < Z.c) || (p.TopP > 0 && p.TopP < 1) {
				filtered = append(filtered, r)
				topK[r], topP[r] = p.TopK, p.TopP
			}
		}
	}
	// ids, log-probs and sample log-probs in one buffer: one copy back.
	res := b.newTensor(3, Z.r)
	ids, lp, slp := res.ptr(), res.ptr()+cuda.Ptr(4*Z.r), res.ptr()+cuda.Ptr(8*Z.r)
	invTp, up := b.uploadF64(invT), b.uploadF64(u[:Z.r])
	b.launch("sample", "sample_f32", Z.r, 1024, 0, ids, lp, slp, Z.ptr(), int64(Z.c), invTp, up)
	if len(filtered) > 0 {
		b.launch("sample", "sample_filtered_f32", len(filtered), 1024, 0, ids, lp, slp, Z.ptr(), int64(Z.c),
			b.uploadInts(filtered), invTp, b.uploadInts(topK), b.uploadF64(topP), up)
	}
	v := b.ToHost(res, nil)
	idv, lpv, slpv := v[:Z.r], v[Z.r:2*Z.r], v[2*Z.r:]
	b.Free(res)
	var row []float32
	for r := range out {
		id := int(int32(math.Float32bits(idv[r])))
		if id < 0 {
			if row == nil {
				row = make([]float32, Z.c)
			}
			must(b.ops.DtoH(unsafe.Pointer(&row[0]), Z.ptr()+cuda.Ptr(4*r*Z.c), 4*Z.c))
			out[r] = sampleRow(row, params[r], u[r])
			b.hostSamples++
			continue
		}
		out[r] = Sampled{ID: id, LogProb: lpv[r], SampleLogProb: slpv[r]}
	}
	return out
}

// Sync waits for every queued operation (for timing).
func (b *CUDA) Sync() { must(b.ops.Sync()) }

var _ Backend = (*CUDA)(nil)
