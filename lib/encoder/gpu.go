package encoder

// The GPU forward: the same BertModel as forward() in encoder.go, with the
// weights on the device, every projection a cuBLAS GEMM (fp32 accumulation),
// attention as two strided-batched GEMMs per chunk of sequences (one T×T
// score matrix per sequence and head) around a masked softmax, and the rest
// in kernels/bert.cu of lib/cuda.
//
// Precision fp16 (the default on a GPU) keeps the GEMM weights and the
// embedding tables in IEEE half and rounds every GEMM operand (activations,
// attention probabilities) to half, as Search-R1's retriever does with
// use_fp16 (model.half()); GEMMs accumulate in fp32 and write half (their
// bias is added in fp32 by the next kernel); the residual stream is stored
// in half between kernels, as transformers' fp16 model stores it (hidden
// sizes up to 1024), while LayerNorm, softmax, GELU and pooling compute in
// fp32 registers. With head dim 64 (every
// BERT-base and -large model) the attention is one fused kernel
// (bert_attn_f16: flash attention on the tensor cores, from the QKV
// projection to the merged heads, no score matrix in memory); other head
// dims take the two strided-batched GEMMs around a softmax kernel, with
// fp32 scores. Precision fp32 keeps everything fp32 (no TF32) and matches
// the CPU forward to ~1e-6.

import (
	"fmt"
	"math"
	"runtime"
	"sync"
	"unsafe"

	"github.com/mempo/mempo/lib/cuda"
	"github.com/mempo/mempo/lib/tensor/half"
)

// Precision is the number format of the GPU forward's weights and GEMM
// operands.
type Precision string

const (
	FP16 Precision = "fp16" // half weights and GEMM operands, fp32 accumulation and everything else
	FP32 Precision = "fp32" // fp32 throughout (exactness tests)
)

// gpuDevice is what the GPU forward needs of a device: lib/cuda's Device, or
// the CPU emulation of the kernels and GEMMs (lib/cuda/cudaemu) that the
// tests run where no GPU is. Pointers are device addresses; Gemm and
// GemmStridedBatched have lib/cuda's row-major semantics.
type gpuDevice interface {
	Alloc(bytes int) (cuda.Ptr, error)
	Free(p cuda.Ptr) error
	HtoD(dst cuda.Ptr, src unsafe.Pointer, bytes int) error
	DtoH(dst unsafe.Pointer, src cuda.Ptr, bytes int) error
	Upload(src unsafe.Pointer, bytes int) (cuda.Ptr, error)
	Gemm(transA, transB bool, m, n, k int, alpha float32, a cuda.Ptr, at cuda.DataType, lda int, b cuda.Ptr, bt cuda.DataType, ldb int, beta float32, c cuda.Ptr, ct cuda.DataType, ldc int) error
	GemmStridedBatched(transA, transB bool, m, n, k int, alpha float32, a cuda.Ptr, at cuda.DataType, lda int, strideA int64, b cuda.Ptr, bt cuda.DataType, ldb int, strideB int64, beta float32, c cuda.Ptr, ct cuda.DataType, ldc int, strideC int64, batch int) error
	// Kernel launches a kernel of kernels/bert.cu.
	Kernel(name string, grid, block cuda.Dim3, shmem int, args ...any) error
	// RowThreads is the block size of the one-block-per-row kernels (a
	// power of two, at most 256).
	RowThreads() int
	// Lock serializes every user of the device in this process.
	Lock() sync.Locker
	String() string
}

// cudaDevice is a lib/cuda device as a gpuDevice.
type cudaDevice struct{ *cuda.Device }

func (d cudaDevice) Kernel(name string, grid, block cuda.Dim3, shmem int, args ...any) error {
	f, err := d.Func("bert", name)
	if err != nil {
		return err
	}
	if shmem > 48<<10 {
		if err := d.SetMaxDynamicShared(f, shmem); err != nil {
			return err
		}
	}
	return d.Launch(f, grid, block, shmem, args...)
}

func (cudaDevice) RowThreads() int     { return 256 }
func (d cudaDevice) Lock() sync.Locker { return DeviceLock(d.Device) }

var deviceLocks sync.Map // *cuda.Device → *sync.Mutex

// DeviceLock is the lock that every user of d in this process takes around
// its work on it (the GPU encoder, mempo-serve's GPU flat search): a
// cuda.Device serves one caller at a time.
func DeviceLock(d *cuda.Device) *sync.Mutex {
	m, _ := deviceLocks.LoadOrStore(d, new(sync.Mutex))
	return m.(*sync.Mutex)
}

type gpuLayer struct {
	qkvW, oW, upW, downW   cuda.Ptr // half or fp32, torch's [out, in]
	qkvB, oB, upB, downB   cuda.Ptr // fp32
	ln1W, ln1B, ln2W, ln2B cuda.Ptr // fp32
}

// softmaxWarpKeys is SM_WARP_KEYS of bert.cu: rows of attention scores up
// to this length take the warp-per-row softmax (8 rows per 256-thread
// block), longer ones the block-per-row one.
const softmaxWarpKeys = 512

// fusedHeadDim is FA_HD of bert.cu: the head dim of bert_attn_f16;
// fusedTile its FA_TILE (query rows per block), fusedMaxT its FA_MAXT (the
// longest sequence).
const (
	fusedHeadDim = 64
	fusedTile    = 64
	fusedMaxT    = 512
)

// attnKernel is one of bert.cu's fused attention kernels: its name, the
// query rows of a block and the block's threads.
type attnKernel struct {
	name          string
	rows, threads int
}

// attnKernels are the fused attention's choices (gpuModel.attn): 64 rows a
// block (4 warps of one m16 tile), 128 rows (4 warps of two; the faster
// where T is over 64).
var attnKernels = []attnKernel{{"bert_attn_f16", fusedTile, 128}, {"bert_attn128_f16", 2 * fusedTile, 128}}

// gpuModel is an encoder's weights on a device.
type gpuModel struct {
	dev  gpuDevice
	prec Precision
	dt   cuda.DataType // of the GEMM weights and operands
	esz  int           // its size in bytes
	cfg  Config

	word, pos, typ cuda.Ptr // dt
	embLnW, embLnB cuda.Ptr
	layers         []gpuLayer
	owned          []cuda.Ptr

	// scoreBytes bounds the fp32 attention scores of one chunk of
	// sequences.
	scoreBytes int
	// warpSoftmax is the longest row of the warp-per-row softmax
	// (softmaxWarpKeys; tests lower it to run the block-per-row one).
	warpSoftmax int
	// fusedAttn: the attention is bert_attn_f16 (fp16, head dim 64);
	// halfOut: the output and FFN-down projections write half (fp16).
	// Both are on where they apply; tests and the benchmark's A/B turn
	// them off to run the unfused path.
	fusedAttn, halfOut bool
	// halfRes: the residual stream is half between kernels (fp16, hidden
	// sizes up to halfResMaxHidden), its LayerNorms and the GELU
	// vectorized kernels of fp32 registers; off, it is fp32 with a half
	// copy for the GEMMs.
	halfRes bool
	// attn: the index in attnKernels of the fused attention where T is
	// over fusedTile (attnKernels[0] up to it); 1 by default, the tests
	// and the benchmark's A/B set 0.
	attn int
}

// halfResMaxHidden is LNW_MAX of bert.cu: the widest row of its
// warp-per-row LayerNorms.
const halfResMaxHidden = 1024

// newGPUModel copies e's weights to dev.
func newGPUModel(e *Encoder, dev gpuDevice, prec Precision) (*gpuModel, error) {
	g := &gpuModel{dev: dev, prec: prec, cfg: e.Cfg, scoreBytes: 256 << 20, warpSoftmax: softmaxWarpKeys}
	switch prec {
	case FP16:
		g.dt, g.esz = cuda.F16, 2
	case FP32:
		g.dt, g.esz = cuda.F32, 4
	default:
		return nil, fmt.Errorf("precision %q: want fp16 or fp32", prec)
	}
	if H := e.Cfg.HiddenSize; 4*H > 40<<10 {
		return nil, fmt.Errorf("hidden_size %d is over the GPU forward's %d", H, (40<<10)/4)
	}
	g.halfOut = prec == FP16
	g.halfRes = prec == FP16
	g.fusedAttn = prec == FP16 && e.Cfg.HiddenSize == fusedHeadDim*e.Cfg.NumAttentionHeads
	g.attn = 1
	lk := dev.Lock()
	lk.Lock()
	defer lk.Unlock()
	var err error
	put := func(v []float32, f16 bool) cuda.Ptr {
		if err != nil {
			return 0
		}
		var p cuda.Ptr
		size := 4
		if f16 {
			size = 2
		}
		if p, err = dev.Alloc(max(size*len(v), 4)); err != nil {
			return 0
		}
		g.owned = append(g.owned, p)
		if len(v) == 0 {
			return p
		}
		if f16 {
			h := make([]uint16, len(v))
			for i, x := range v {
				h[i] = half.F32ToF16(x)
			}
			err = dev.HtoD(p, unsafe.Pointer(&h[0]), 2*len(h))
			runtime.KeepAlive(h)
		} else {
			err = dev.HtoD(p, unsafe.Pointer(&v[0]), 4*len(v))
			runtime.KeepAlive(v)
		}
		return p
	}
	half := prec == FP16
	g.word, g.pos, g.typ = put(e.word, half), put(e.pos, half), put(e.typ, half)
	g.embLnW, g.embLnB = put(e.embLnW, false), put(e.embLnB, false)
	for _, L := range e.layers {
		g.layers = append(g.layers, gpuLayer{
			qkvW: put(L.qkvW, half), qkvB: put(L.qkvB, false), oW: put(L.oW, half), oB: put(L.oB, false),
			ln1W: put(L.ln1W, false), ln1B: put(L.ln1B, false),
			upW: put(L.upW, half), upB: put(L.upB, false), downW: put(L.downW, half), downB: put(L.downB, false),
			ln2W: put(L.ln2W, false), ln2B: put(L.ln2B, false),
		})
	}
	if err != nil {
		g.free()
		return nil, fmt.Errorf("encoder weights to %s: %w", dev, err)
	}
	return g, nil
}

// free releases the weights (under the device lock held by the caller or
// at construction).
func (g *gpuModel) free() {
	for _, p := range g.owned {
		g.dev.Free(p)
	}
	g.owned = nil
}

// run is the forward pass of B sequences of T ids (right-padded, mask 1 =
// token): the last hidden states [B, T, H] when hidden, else the pooled,
// L2-normalized embeddings [B, H].
func (g *gpuModel) run(ids, mask []int, B, T int, pool Pooling, hidden bool) ([]float32, error) {
	c := g.cfg
	H, I, nh := c.HiddenSize, c.IntermediateSize, c.NumAttentionHeads
	hd := H / nh
	N := B * T
	if N == 0 {
		return nil, nil
	}
	d := g.dev
	lk := d.Lock()
	lk.Lock()
	defer lk.Unlock()
	rt := d.RowThreads()
	row := cuda.Dim3{X: rt}
	eps := float32(c.LayerNormEps)
	dt, esz := g.dt, g.esz
	half := g.prec == FP16

	ids32 := make([]int32, N)
	mask32 := make([]int32, N)
	for i := range ids32 {
		ids32[i], mask32[i] = int32(ids[i]), int32(mask[i])
	}
	idsP, err := d.Upload(unsafe.Pointer(&ids32[0]), 4*N)
	if err != nil {
		return nil, err
	}
	maskP, err := d.Upload(unsafe.Pointer(&mask32[0]), 4*N)
	if err != nil {
		return nil, err
	}
	runtime.KeepAlive(ids32)
	runtime.KeepAlive(mask32)

	// Workspace, freed stream-ordered on return.
	var bufs []cuda.Ptr
	defer func() {
		for _, p := range bufs {
			d.Free(p)
		}
	}()
	alloc := func(bytes int) cuda.Ptr {
		if err != nil {
			return 0
		}
		var p cuda.Ptr
		if p, err = d.Alloc(max(bytes, 256)); err == nil {
			bufs = append(bufs, p)
		}
		return p
	}
	wide := max(3*H, I)
	// Sequences per attention chunk: their fp32 scores fit scoreBytes.
	bc := min(B, max(1, g.scoreBytes/(4*nh*T*T)))
	hres := half && g.halfOut && g.halfRes && H <= halfResMaxHidden
	var x cuda.Ptr
	if !hres {
		x = alloc(4 * N * H) // residual stream, fp32
	}
	big := alloc(esz * N * wide) // QKV and FFN GEMM outputs (half in fp16 mode)
	hb := alloc(esz * N * wide)  // Q, K, V per head, then the GELU output (half)
	tmp := alloc(4 * N * H)      // attention per head, then the H-wide GEMM outputs, fp32
	ctx := alloc(esz * N * H)    // merged heads: the output projection's operand
	fused := g.fusedAttn && half && hd == fusedHeadDim && T <= fusedMaxT
	var scores cuda.Ptr
	if !fused {
		scores = alloc(4 * bc * nh * T * T)
	}
	in, probs, act := x, scores, big // GEMM operands in fp32 mode
	var xh cuda.Ptr
	if half {
		xh = alloc(2 * N * H)
		if !fused {
			probs = alloc(2 * bc * nh * T * T)
		}
		in, act = xh, hb
	}
	// The H-wide projections' outputs (tmp) and the kernel that adds them
	// to the residual stream.
	yt, addLN := cuda.F32, "bert_add_ln"
	if half && g.halfOut {
		yt, addLN = cuda.F16, "bert_add_ln_h"
	}

	if err != nil {
		return nil, fmt.Errorf("encoder on %s: batch %d×%d: %w", d, B, T, err)
	}
	sfx := "_f32"
	if half {
		sfx = "_f16"
	}
	launch := func(name string, grid, block cuda.Dim3, shmem int, args ...any) {
		if err == nil {
			err = d.Kernel(name, grid, block, shmem, args...)
		}
	}
	gemmT := func(m, n, k int, a cuda.Ptr, lda int, w cuda.Ptr, out cuda.Ptr, ot cuda.DataType) {
		// out[m×n] = a[m×k] · wᵀ, w torch's [n, k].
		if err == nil {
			err = d.Gemm(false, true, m, n, k, 1, a, dt, lda, w, dt, k, 0, out, ot, n)
		}
	}
	rows := cuda.Dim3{X: N} // one block per row of activations
	scale := float32(1 / math.Sqrt(float64(hd)))
	q, k, v := hb, hb+cuda.Ptr(esz*N*H), hb+cuda.Ptr(2*esz*N*H)
	// With the residual stream in half (hres) xh is all of it, and its
	// LayerNorms run one warp per row (8 rows a block).
	wrows, wblock := cuda.Dim3{X: (N + 7) / 8}, cuda.Dim3{X: 256}
	addNorm := func(y, bias, lnw, lnb cuda.Ptr) {
		if hres {
			name := "bert_add_ln_hw"
			if H%8 == 0 {
				name = fmt.Sprintf("bert_add_ln_hw4_g%d", (H+255)/256)
			}
			launch(name, wrows, wblock, 0, xh, y, bias, lnw, lnb, int64(N), H, eps)
		} else {
			launch(addLN, rows, row, 4*H, x, y, bias, lnw, lnb, H, eps, xh)
		}
	}
	gelu := func(upB cuda.Ptr) {
		if hres && I%8 == 0 && N*I/8 < 1<<31 {
			launch("bert_gelu_v16_f16", cuda.Dim3{X: (N*I/8 + 511) / 512}, wblock, 0, big, upB, I, int64(N*I), act)
		} else {
			launch("bert_gelu"+sfx, rows, row, 0, big, upB, I, act)
		}
	}

	if hres {
		launch("bert_embed_ln_hw", wrows, wblock, 0, idsP, g.word, g.pos, g.typ, g.embLnW, g.embLnB, int64(N), T, H, eps, xh)
	} else {
		launch("bert_embed_ln"+sfx, rows, row, 4*H, idsP, g.word, g.pos, g.typ, g.embLnW, g.embLnB, T, H, eps, x, xh)
	}
	for _, L := range g.layers {
		gemmT(N, 3*H, H, in, H, L.qkvW, big, dt)
		if fused {
			ak := attnKernels[0]
			if T > fusedTile {
				ak = attnKernels[g.attn]
			}
			launch(ak.name, cuda.Dim3{X: (T + ak.rows - 1) / ak.rows, Y: nh, Z: B}, cuda.Dim3{X: ak.threads}, 0,
				big, L.qkvB, maskP, T, nh, scale, ctx)
		} else {
			launch("bert_split_heads"+sfx, rows, row, 0, big, L.qkvB, T, nh, hd, q, k, v)
			for b0 := 0; b0 < B && err == nil; b0 += bc {
				nb := min(bc, B-b0)
				off := cuda.Ptr(b0 * nh * T * hd) // elements
				st := int64(T * hd)
				err = d.GemmStridedBatched(false, true, T, T, hd, scale, q+off*cuda.Ptr(esz), dt, hd, st, k+off*cuda.Ptr(esz), dt, hd, st,
					0, scores, cuda.F32, T, int64(T*T), nb*nh)
				if srows := nb * nh * T; T <= g.warpSoftmax {
					launch("bert_softmax_warp"+sfx, cuda.Dim3{X: (srows + 7) / 8}, cuda.Dim3{X: 256}, 0, scores, maskP+cuda.Ptr(4*b0*T), int64(srows), T, nh, probs)
				} else {
					launch("bert_softmax"+sfx, cuda.Dim3{X: srows}, row, 0, scores, maskP+cuda.Ptr(4*b0*T), T, nh, probs)
				}
				if err == nil {
					err = d.GemmStridedBatched(false, false, T, hd, T, 1, probs, dt, T, int64(T*T), v+off*cuda.Ptr(esz), dt, hd, st,
						0, tmp+off*4, cuda.F32, hd, st, nb*nh)
				}
			}
			launch("bert_merge_heads"+sfx, rows, row, 0, tmp, T, nh, hd, ctx)
		}
		gemmT(N, H, H, ctx, H, L.oW, tmp, yt)
		addNorm(tmp, L.oB, L.ln1W, L.ln1B)
		gemmT(N, I, H, in, H, L.upW, big, dt)
		gelu(L.upB)
		gemmT(N, H, I, act, I, L.downW, tmp, yt)
		addNorm(tmp, L.downB, L.ln2W, L.ln2B)
	}
	var out []float32
	if hidden && hres {
		h := make([]uint16, N*H)
		if err == nil {
			err = d.DtoH(unsafe.Pointer(&h[0]), xh, 2*N*H)
		}
		out = f16ToF32(h)
	} else if hidden {
		out = make([]float32, N*H)
		if err == nil {
			err = d.DtoH(unsafe.Pointer(&out[0]), x, 4*N*H)
		}
	} else {
		pooled := alloc(4 * B * H)
		cls := 0
		if pool == PoolCLS {
			cls = 1
		}
		if hres {
			launch("bert_pool_h", cuda.Dim3{X: B}, row, 0, xh, maskP, T, H, cls, pooled)
		} else {
			launch("bert_pool", cuda.Dim3{X: B}, row, 0, x, maskP, T, H, cls, pooled)
		}
		out = make([]float32, B*H)
		if err == nil {
			err = d.DtoH(unsafe.Pointer(&out[0]), pooled, 4*B*H)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("encoder on %s: batch %d×%d: %w", d, B, T, err)
	}
	return out, nil
}

// f16ToF32 widens IEEE half bits.
func f16ToF32(h []uint16) []float32 {
	out := make([]float32, len(h))
	for i, v := range h {
		out[i] = half.F16ToF32(v)
	}
	return out
}
