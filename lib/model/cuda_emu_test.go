package model

// The flash-style attention kernels (attention.cu, and attention2.cu for the
// head dims attnKernels gives it: forward, attn_bwd_dsum, dq, dk/dv) run on
// the CPU through lib/cuda/cudaemu, on every `go test`: the same source
// NVRTC compiles on a GPU, with the module choice of attnKernels, the work
// lists of attnLists and the shared memory of attnShmem, against the CPU
// backend's Attention and AttentionBackward. TestCUDAAttention runs the same
// comparison through the CUDA backend on a GPU.

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"unsafe"

	"github.com/mempo/mempo/lib/cuda"
	"github.com/mempo/mempo/lib/cuda/cudaemu"
)

type attnEmu struct {
	t *testing.T
	d *cudaemu.Device
}

// put copies bytes at p to a new device buffer, or returns an unwritten
// (poisoned) one when p is nil.
func (e attnEmu) put(p unsafe.Pointer, bytes int) cuda.Ptr {
	e.t.Helper()
	var q cuda.Ptr
	var err error
	if p == nil {
		q, err = e.d.Alloc(bytes)
	} else {
		q, err = e.d.Upload(p, bytes)
	}
	if err != nil {
		e.t.Fatal(err)
	}
	return q
}

func (e attnEmu) f32(v []float32) cuda.Ptr { return e.put(unsafe.Pointer(&v[0]), 4*len(v)) }

func (e attnEmu) ints(v []int) cuda.Ptr {
	w := make([]int32, len(v))
	for i, x := range v {
		w[i] = int32(x)
	}
	return e.put(unsafe.Pointer(&w[0]), 4*len(w))
}

func (e attnEmu) get(p cuda.Ptr, n int) []float32 {
	e.t.Helper()
	v := make([]float32, n)
	if err := e.d.DtoH(unsafe.Pointer(&v[0]), p, 4*n); err != nil {
		e.t.Fatal(err)
	}
	return v
}

func (e attnEmu) run(name string, grid cuda.Dim3, block, shmem int, args ...any) {
	e.t.Helper()
	if err := e.d.Kernel(name, grid, cuda.Dim3{X: block}, shmem, args...); err != nil {
		e.t.Fatal(err)
	}
}

func TestEmuAttention(t *testing.T) {
	if ok, why := cudaemu.Available(); !ok {
		t.Skipf("no kernel emulation: %s", why)
	}
	for _, v1 := range []bool{true, false} {
		want, _, _ := (&CUDA{attnV1: v1}).attnKernels(4)
		d, err := cudaemu.NewModule(t.TempDir(), want, 0)
		if err != nil {
			t.Fatal(err)
		}
		t.Run(want, func(t *testing.T) { emuAttention(t, d, v1) })
	}
}

func emuAttention(t *testing.T, d *cudaemu.Device, v1 bool) {
	e := attnEmu{t: t, d: d}
	cpu := NewCPU()
	r := rand.New(rand.NewPCG(11, 5))
	rnd := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(r.NormFloat64())
		}
		return v
	}
	host := func(v []float32, rows, cols int) Tensor { return cpu.FromHost(v, rows, cols) }
	ran := 0
	// Head dims 6 and 18 (not multiples of 4) take attention.cu whatever
	// the mode; 40 takes two registers a lane.
	for _, c := range []struct{ heads, kv, hd int }{{2, 1, 6}, {4, 2, 16}, {3, 3, 18}, {2, 1, 40}} {
		mod, pre, pad := (&CUDA{attnV1: v1}).attnKernels(c.hd)
		if !strings.Contains(d.String(), "kernels/"+mod+".cu") {
			continue
		}
		for _, lens := range [][]int{{1}, {5, 17}, {33, 1, 40}} {
			sh := AttnShape{Heads: c.heads, KVHeads: c.kv, HeadDim: c.hd, Scale: float32(1 / math.Sqrt(float64(c.hd)))}
			var seqs []AttnSeq
			R := 0
			for _, n := range lens {
				seqs = append(seqs, AttnSeq{Q: R, N: n, K: R})
				R += n
			}
			name := fmt.Sprintf("h=%d kv=%d hd=%d lens=%v", c.heads, c.kv, c.hd, lens)
			qc, kc := c.heads*c.hd, c.kv*c.hd
			q, k, v, do := rnd(R*qc), rnd(R*kc), rnd(R*kc), rnd(R*qc)
			O, LSE := cpu.Zeros(R, qc), cpu.Zeros(R, c.heads)
			cpu.Attention(O, LSE, host(q, R, qc), host(k, R, kc), host(v, R, kc), seqs, sh)
			dQ, dK, dV := cpu.Zeros(R, qc), cpu.Zeros(R, kc), cpu.Zeros(R, kc)
			cpu.AttentionBackward(dQ, dK, dV, host(do, R, qc), host(q, R, qc), host(k, R, kc), host(v, R, kc), O, LSE, seqs, sh)

			nt, err := attnNT(c.hd)
			if err != nil {
				t.Fatal(err)
			}
			tv, sv := attnLists(seqs, attnTile)
			tiles, st, n := e.ints(tv), e.ints(sv), len(tv)/2
			fwd, shq, shk := attnShmem(c.hd, pad)
			gq, gk, gv, gdo := e.f32(q), e.f32(k), e.f32(v), e.f32(do)
			gO, gL := e.put(nil, 4*R*qc), e.put(nil, 4*R*c.heads)
			e.run(fmt.Sprintf("%s_fwd_%d", pre, nt), cuda.Dim3{X: n, Y: c.heads}, 128, fwd,
				gO, gL, gq, gk, gv, tiles, st, c.heads, c.kv, c.hd, sh.Scale)
			emuCheck(t, "out "+name, e.get(gO, R*qc), cpu.ToHost(O, nil), 1e-5)
			emuCheck(t, "lse "+name, e.get(gL, R*c.heads), cpu.ToHost(LSE, nil), 1e-5)

			// D = Σ dO·O per (row, head): attn_bwd_dsum (attention.cu) where
			// this module has it, else the same sums from here.
			oh := cpu.ToHost(O, nil)
			wantD := make([]float32, R*c.heads)
			for i := 0; i < R; i++ {
				for h := 0; h < c.heads; h++ {
					var s float64
					for j := 0; j < c.hd; j++ {
						s += float64(do[i*qc+h*c.hd+j]) * float64(oh[i*qc+h*c.hd+j])
					}
					wantD[i*c.heads+h] = float32(s)
				}
			}
			var D cuda.Ptr
			if mod == "attention" {
				D = e.put(nil, 4*R*c.heads)
				warps := R * c.heads
				e.run("attn_bwd_dsum", cuda.Dim3{X: (warps*32 + 255) / 256}, 256, 0, D, gdo, gO, R, c.heads, c.hd)
				emuCheck(t, "attn_bwd_dsum "+name, e.get(D, R*c.heads), wantD, 1e-5)
			} else {
				D = e.f32(wantD)
			}

			gdq, gdk, gdv := e.put(nil, 4*R*qc), e.put(nil, 4*R*kc), e.put(nil, 4*R*kc)
			e.run(fmt.Sprintf("%s_bwd_dq_%d", pre, nt), cuda.Dim3{X: n, Y: c.heads}, 128, shq,
				gdq, gdo, gq, gk, gv, gL, D, tiles, st, c.heads, c.kv, c.hd, sh.Scale)
			e.run(fmt.Sprintf("%s_bwd_dkv_%d", pre, nt), cuda.Dim3{X: n, Y: c.kv}, 128, shk,
				gdk, gdv, gdo, gq, gk, gv, gL, D, tiles, st, c.heads, c.kv, c.hd, sh.Scale)
			if R == len(lens) {
				// One token a sequence: dq and dk are exactly 0 and both
				// sides hold rounding noise (as in TestCUDAAttention).
				emuCheckAbs(t, "dq "+name, e.get(gdq, R*qc), cpu.ToHost(dQ, nil), 1e-5)
				emuCheckAbs(t, "dk "+name, e.get(gdk, R*kc), cpu.ToHost(dK, nil), 1e-5)
			} else {
				emuCheck(t, "dq "+name, e.get(gdq, R*qc), cpu.ToHost(dQ, nil), 1e-4)
				emuCheck(t, "dk "+name, e.get(gdk, R*kc), cpu.ToHost(dK, nil), 1e-4)
			}
			emuCheck(t, "dv "+name, e.get(gdv, R*kc), cpu.ToHost(dV, nil), 1e-4)
			ran++
		}
	}
	if ran == 0 {
		t.Fatalf("no configuration ran on %s", d)
	}
	t.Logf("%d shapes on %s", ran, d)
}

// emuCheck compares a kernel's result with the CPU's by maxRelErr (NaN, an
// unwritten element of the emulation's poisoned memory, fails).
func emuCheck(t *testing.T, name string, got, want []float32, tol float64) {
	t.Helper()
	if e := maxRelErr(got, want); e > tol || math.IsNaN(e) {
		t.Errorf("%s: max relative error %.3g > %.1g", name, e, tol)
	}
}

func emuCheckAbs(t *testing.T, name string, got, want []float32, tol float64) {
	t.Helper()
	for i := range got {
		if d := math.Abs(float64(got[i] - want[i])); !(d <= tol) {
			t.Errorf("%s: element %d: %v, want %v", name, i, got[i], want[i])
			return
		}
	}
}
