package encoder

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"unsafe"

	"github.com/mempo/mempo/lib/cuda"
	"github.com/mempo/mempo/lib/tensor/half"
)

// flashConfig has head dim 64, so that the fp16 forward takes the fused
// attention (bert_attn_f16, bert_attn128*_f16); 80 positions make two
// 64-row query tiles, the second partial, or one partial 128-row tile, and
// key tiles past the last valid key skipped; 150 make two 128-row tiles and
// three key tiles.
var flashConfig = Config{ModelType: "bert", VocabSize: 97, HiddenSize: 128, NumHiddenLayers: 1, NumAttentionHeads: 2,
	IntermediateSize: 96, MaxPositionEmbeddings: 150, TypeVocabSize: 2, LayerNormEps: 1e-12, HiddenAct: "gelu"}

// fusedVariant is a choice of the fused attention kernel (gpuModel.attn).
type fusedVariant struct {
	name string
	attn int
}

var fusedVariants = []fusedVariant{{"128-row attention", 1}, {"64-row attention", 0}}

// checkFusedAttention runs the fp16 forward of flashConfig with the fused
// attention and half projection outputs, with the residual stream in half
// and in fp32, in each of fusedVariants, against the CPU forward on
// right-padded batches (a sequence of no valid token among them), and
// against the unfused fp16 path (the softmax kernel over fp32 scores, fp32
// residual) on masks the CPU forward does not model (left padding, holes),
// where both GPU paths weigh keys by the mask alone.
func checkFusedAttention(t *testing.T, dev gpuDevice) {
	e := randomEncoder(t, flashConfig, 21)
	onGPU(t, e, dev, FP16)
	if !e.gpu.fusedAttn || !e.gpu.halfOut || !e.gpu.halfRes {
		t.Fatalf("fp16 with head dim 64: fusedAttn %v, halfOut %v, halfRes %v", e.gpu.fusedAttn, e.gpu.halfOut, e.gpu.halfRes)
	}
	r := rand.New(rand.NewPCG(5, 6))
	// fwd runs the forward with the fused attention and half projection
	// outputs (fused) and the half residual stream (hres).
	fwd := func(ids, mask []int, B, T int, fused, hres bool, v fusedVariant) []float32 {
		t.Helper()
		e.gpu.fusedAttn, e.gpu.halfOut, e.gpu.halfRes = fused, fused, hres
		e.gpu.attn = v.attn
		defer func() {
			e.gpu.fusedAttn, e.gpu.halfOut, e.gpu.halfRes = true, true, true
			e.gpu.attn = 1
		}()
		h, err := e.Forward(ids, mask, B, T)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	for _, bt := range [][2]int{{4, 80}, {3, 150}, {3, 65}, {2, 9}, {1, 1}} {
		B, T := bt[0], bt[1]
		ids, mask := randomBatch(r, e, B, T)
		if B > 2 {
			for j := 0; j < T; j++ {
				mask[2*T+j] = 0 // no valid token: every key weighs
			}
		}
		name := fmt.Sprintf("B=%d T=%d", B, T)
		want := e.forward(ids, mask, B, T)
		for _, v := range fusedVariants {
			for _, hres := range []bool{false, true} {
				got := fwd(ids, mask, B, T, true, hres, v)
				if abs, _ := stats(got, want); !(abs <= tolFP16Hidden) {
					t.Errorf("%s %s, half residual %v: fused hidden states max |diff| %.3g vs the CPU (tolerance %g)", name, v.name, hres, abs, tolFP16Hidden)
				} else {
					t.Logf("%s %s, half residual %v: fused hidden states max |diff| %.3g vs the CPU", name, v.name, hres, abs)
				}
			}
		}
		vecs, err := e.EmbedIDs(ids, mask, B, T)
		if err != nil {
			t.Fatal(err)
		}
		ref := Pool(want, mask, B, T, e.Dim(), e.Pooling)
		for b := range vecs {
			if abs, _ := stats(vecs[b], ref[b]); !(abs <= tolFP16Emb) {
				t.Errorf("%s: sequence %d's embedding max |diff| %.3g vs the CPU (tolerance %g)", name, b, abs, tolFP16Emb)
			}
		}
	}
	// Left padding and holes, against the unfused kernels.
	B, T := 3, 80
	ids, mask := randomBatch(r, e, B, T)
	for j := 0; j < T; j++ {
		mask[j] = 0
		if j >= 70 {
			mask[j] = 1 // sequence 0: left-padded, 10 tokens in the last key tile
		}
		if j%3 == 1 {
			mask[T+j] = 0 // sequence 1: every third key missing
		}
		mask[2*T+j] = 1
		if j >= 5 && j < 69 {
			mask[2*T+j] = 0 // sequence 2: a whole key tile without a valid key
		}
	}
	want := fwd(ids, mask, B, T, false, false, fusedVariants[0])
	for _, v := range fusedVariants {
		got := fwd(ids, mask, B, T, true, true, v)
		if abs, _ := stats(got, want); !(abs <= tolFP16Hidden) {
			t.Errorf("masks with holes, %s: fused hidden states max |diff| %.3g vs the unfused path (tolerance %g)", v.name, abs, tolFP16Hidden)
		} else {
			t.Logf("masks with holes, %s: fused hidden states max |diff| %.3g vs the unfused path", v.name, abs)
		}
	}
}

func TestEmuFusedAttention(t *testing.T) {
	d := emuDevice(t, 16)
	checkFusedAttention(t, d)
	checkRan(t, d, "bert_attn_f16", "bert_attn128_f16", "bert_add_ln_hw4_g1", "bert_gelu_v16_f16", "bert_add_ln_h",
		"bert_softmax_warp_f16", "bert_embed_ln_hw", "bert_pool_h")
}

func TestGPUFusedAttention(t *testing.T) { checkFusedAttention(t, requireCUDA(t)) }

// The fp16 path's vectorized kernels give the same bits as the general
// ones: bert_add_ln_hw4_g* as bert_add_ln_hw (hidden sizes a multiple of 8,
// with the fewest groups that hold a row and with more), and
// bert_gelu_v16_f16 as bert_gelu_f16 (counts that leave a partial block).
func TestEmuAddLNAndGELUVariants(t *testing.T) {
	d := emuDevice(t, 16)
	r := rand.New(rand.NewPCG(7, 8))
	halves := func(n int, scale float64) []uint16 {
		h := make([]uint16, n)
		for i := range h {
			h[i] = half.F32ToF16(float32(scale * r.NormFloat64()))
		}
		return h
	}
	floats := func(n int, mean float64) []float32 {
		f := make([]float32, n)
		for i := range f {
			f[i] = float32(mean + 0.3*r.NormFloat64())
		}
		return f
	}
	up := func(p unsafe.Pointer, bytes int) cuda.Ptr {
		q, err := d.Alloc(bytes)
		if err != nil {
			t.Fatal(err)
		}
		if err := d.HtoD(q, p, bytes); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Free(q) })
		return q
	}
	down := func(p cuda.Ptr, n int) []uint16 {
		h := make([]uint16, n)
		if err := d.DtoH(unsafe.Pointer(&h[0]), p, 2*n); err != nil {
			t.Fatal(err)
		}
		return h
	}
	const rows = 11
	for _, c := range []struct{ H, groups int }{{8, 1}, {136, 1}, {256, 1}, {264, 2}, {264, 4}, {768, 3}, {1024, 4}} {
		x, y := halves(rows*c.H, 1), halves(rows*c.H, 2)
		bias, w, b := floats(c.H, 0), floats(c.H, 1), floats(c.H, 0)
		bp, wp, lbp, yp := up(unsafe.Pointer(&bias[0]), 4*c.H), up(unsafe.Pointer(&w[0]), 4*c.H), up(unsafe.Pointer(&b[0]), 4*c.H), up(unsafe.Pointer(&y[0]), 2*len(y))
		var got [2][]uint16
		for i, name := range []string{"bert_add_ln_hw", fmt.Sprintf("bert_add_ln_hw4_g%d", c.groups)} {
			xp := up(unsafe.Pointer(&x[0]), 2*len(x))
			if err := d.Kernel(name, cuda.Dim3{X: (rows + 7) / 8}, cuda.Dim3{X: 256}, 0, xp, yp, bp, wp, lbp, int64(rows), c.H, float32(1e-12)); err != nil {
				t.Fatal(err)
			}
			got[i] = down(xp, len(x))
		}
		if !slices.Equal(got[0], got[1]) {
			t.Errorf("H=%d: bert_add_ln_hw4_g%d differs from bert_add_ln_hw", c.H, c.groups)
		}
	}
	for _, c := range []struct{ rows, cols int }{{3, 8}, {5, 96}, {7, 3072}} {
		n := c.rows * c.cols
		u := halves(n, 2)
		bias := floats(c.cols, 0)
		up16, bp := up(unsafe.Pointer(&u[0]), 2*n), up(unsafe.Pointer(&bias[0]), 4*c.cols)
		var got [2][]uint16
		for i := range got {
			out, err := d.Alloc(2 * n)
			if err != nil {
				t.Fatal(err)
			}
			if i == 0 {
				err = d.Kernel("bert_gelu_f16", cuda.Dim3{X: c.rows}, cuda.Dim3{X: d.RowThreads()}, 0, up16, bp, c.cols, out)
			} else {
				err = d.Kernel("bert_gelu_v16_f16", cuda.Dim3{X: (n/8 + 511) / 512}, cuda.Dim3{X: 256}, 0, up16, bp, c.cols, int64(n), out)
			}
			if err != nil {
				t.Fatal(err)
			}
			got[i] = down(out, n)
			d.Free(out)
		}
		if !slices.Equal(got[0], got[1]) {
			t.Errorf("%d×%d: bert_gelu_v16_f16 differs from bert_gelu_f16", c.rows, c.cols)
		}
	}
}
