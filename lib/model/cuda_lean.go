package model

import (
	"fmt"
	"unsafe"

	"github.com/mempo/mempo/lib/cuda"
)

// bf16-only weights, for the memory-lean full-parameter update
// (lib/update's 8-bit device optimizer): a weight matrix's bf16 copy, which
// the products read in bf16 mode, becomes its only values on the device and
// its fp32 buffer is freed (the frozen buffer of FromHostFrozen, cuda_lora.go,
// made from a loaded weight; here the optimizer writes it). The optimizer keeps the rest of the fp32 master
// weight (a 16-bit remainder) and writes the bf16 weight in place after each
// step. Only MatMul and Embedding read such a weight; any other op that would
// read its fp32 values panics.

// DropF32 makes the bf16 copy of the weight t its only values and frees its
// fp32 buffer; it returns the bf16 buffer (rows×cols uint16, row major). The
// copy is made first (round to nearest even) if t has none; the caller
// rewrites it (lib/cuda's SplitMaster) before the fp32 buffer goes. t must
// be a whole weight (MarkWeight) of a backend in bf16 mode.
func (b *CUDA) DropF32(t Tensor, rewrite func(f32, bf16 cuda.Ptr) error) (cuda.Ptr, error) {
	s := gt(t)
	buf := s.buf
	if !b.bf16 || !buf.weight || !s.whole() || !s.own {
		return 0, fmt.Errorf("model: DropF32 needs a whole weight of a bf16-mode backend")
	}
	p16 := b.bf16Operand(s)
	if rewrite != nil {
		if err := rewrite(buf.p, p16); err != nil {
			return 0, err
		}
	}
	buf.dropF32()
	buf.frozen, buf.f32stale, buf.w16ok = true, true, true
	b.live.Add(int64(buf.w16sz))
	return p16, nil
}

// BF16Only reports whether t's fp32 values were dropped (DropF32).
func (b *CUDA) BF16Only(t Tensor) bool { return gtAny(t).buf.frozen }

// DevicePtr is where t's fp32 values are, for kernels of other packages.
func (b *CUDA) DevicePtr(t Tensor) cuda.Ptr { return gt(t).ptr() }

// Bytes returns a zeroed device buffer of at least n bytes (a tensor of
// n/4 floats, rounded up, freed by Free) and its address.
func (b *CUDA) Bytes(n int) (Tensor, cuda.Ptr) {
	t := b.Zeros(max((n+3)/4, 1), 1)
	return t, gt(t).ptr()
}

// CopyToHost copies n bytes from device address p to dst.
func (b *CUDA) CopyToHost(dst unsafe.Pointer, p cuda.Ptr, n int) {
	if n > 0 {
		must(b.dev.DtoH(dst, p, n))
	}
}

// CopyFromHost copies n bytes from src to device address p.
func (b *CUDA) CopyFromHost(p cuda.Ptr, src unsafe.Pointer, n int) {
	if n > 0 {
		must(b.dev.HtoD(p, src, n))
	}
}

// gatherBF16 is GatherRows from a bf16-only table.
func (b *CUDA) gatherBF16(d, s *cudaTensor, rows []int) {
	for _, r := range rows {
		if r < 0 || r >= s.r {
			panic(fmt.Sprintf("model: Embedding row %d of %d", r, s.r))
		}
	}
	b.wrote(d)
	if len(rows) == 0 {
		return
	}
	idx := b.uploadInts(rows)
	n := int64(len(rows)) * int64(d.c)
	b.launch("adamw", "gather_rows_bf16", b.gridFor(n, 256), 256, 0, d.ptr(), s.buf.w16, idx, len(rows), d.c)
}

// PeakBytes is the most device memory in use (the driver's total − free,
// all processes) seen at any allocation from the driver since the backend
// started or ResetPeak; the pool makes every growth of use such an
// allocation.
func (b *CUDA) PeakBytes() int64 { return b.peak.Load() }

// ResetPeak starts PeakBytes over from the memory in use now.
func (b *CUDA) ResetPeak() {
	b.peak.Store(0)
	b.notePeak()
}

// FreeBytes is the driver's free device memory plus what the pool holds
// (which the backend hands out before asking the driver).
func (b *CUDA) FreeBytes() int64 {
	free, _, err := b.dev.MemInfo()
	must(err)
	_, _, pooled := b.PoolStats()
	return free + pooled
}

func (b *CUDA) notePeak() {
	if b.dev == nil {
		return // the emulation of the tests
	}
	free, total, err := b.dev.MemInfo()
	if err != nil {
		return
	}
	used := total - free
	for {
		p := b.peak.Load()
		if used <= p || b.peak.CompareAndSwap(p, used) {
			return
		}
	}
}

// FlushPool gives the buffers the backend's pool holds back to the driver
// (after DropF32 of every weight, so that the freed fp32 weights count as
// free memory).
func (b *CUDA) FlushPool() { b.flushPool() }

// Touch marks t's kept bf16 copy stale after a kernel of another package
// wrote its fp32 values.
func (b *CUDA) Touch(t Tensor) { b.wrote(gt(t)) }
