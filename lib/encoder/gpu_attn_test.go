package encoder

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// flashConfig has head dim 64, so that the fp16 forward takes the fused
// attention (bert_attn_f16); 80 positions make two query tiles, the second
// partial, and key tiles past the last valid key skipped.
var flashConfig = Config{ModelType: "bert", VocabSize: 97, HiddenSize: 128, NumHiddenLayers: 1, NumAttentionHeads: 2,
	IntermediateSize: 96, MaxPositionEmbeddings: 80, TypeVocabSize: 2, LayerNormEps: 1e-12, HiddenAct: "gelu"}

// checkFusedAttention runs the fp16 forward of flashConfig with the fused
// attention and half projection outputs, with the residual stream in half
// and in fp32, against the CPU forward on right-padded batches (a sequence
// of no valid token among them), and against the unfused fp16 path (the
// softmax kernel over fp32 scores, fp32 residual) on masks the CPU forward
// does not model (left padding, holes), where both GPU paths weigh keys by
// the mask alone.
func checkFusedAttention(t *testing.T, dev gpuDevice) {
	e := randomEncoder(t, flashConfig, 21)
	onGPU(t, e, dev, FP16)
	if !e.gpu.fusedAttn || !e.gpu.halfOut || !e.gpu.halfRes {
		t.Fatalf("fp16 with head dim 64: fusedAttn %v, halfOut %v, halfRes %v", e.gpu.fusedAttn, e.gpu.halfOut, e.gpu.halfRes)
	}
	r := rand.New(rand.NewPCG(5, 6))
	// fwd runs the forward with the fused attention and half projection
	// outputs (fused) and the half residual stream (hres).
	fwd := func(ids, mask []int, B, T int, fused, hres bool) []float32 {
		t.Helper()
		e.gpu.fusedAttn, e.gpu.halfOut, e.gpu.halfRes = fused, fused, hres
		defer func() { e.gpu.fusedAttn, e.gpu.halfOut, e.gpu.halfRes = true, true, true }()
		h, err := e.Forward(ids, mask, B, T)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	for _, bt := range [][2]int{{4, 80}, {3, 65}, {2, 9}, {1, 1}} {
		B, T := bt[0], bt[1]
		ids, mask := randomBatch(r, e, B, T)
		if B > 2 {
			for j := 0; j < T; j++ {
				mask[2*T+j] = 0 // no valid token: every key weighs
			}
		}
		name := fmt.Sprintf("B=%d T=%d", B, T)
		want := e.forward(ids, mask, B, T)
		for _, hres := range []bool{false, true} {
			got := fwd(ids, mask, B, T, true, hres)
			if abs, _ := stats(got, want); !(abs <= tolFP16Hidden) {
				t.Errorf("%s half residual %v: fused hidden states max |diff| %.3g vs the CPU (tolerance %g)", name, hres, abs, tolFP16Hidden)
			} else {
				t.Logf("%s half residual %v: fused hidden states max |diff| %.3g vs the CPU", name, hres, abs)
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
	got, want := fwd(ids, mask, B, T, true, true), fwd(ids, mask, B, T, false, false)
	if abs, _ := stats(got, want); !(abs <= tolFP16Hidden) {
		t.Errorf("masks with holes: fused hidden states max |diff| %.3g vs the unfused path (tolerance %g)", abs, tolFP16Hidden)
	} else {
		t.Logf("masks with holes: fused hidden states max |diff| %.3g vs the unfused path", abs)
	}
}

func TestEmuFusedAttention(t *testing.T) {
	d := emuDevice(t, 16)
	checkFusedAttention(t, d)
	checkRan(t, d, "bert_attn_f16", "bert_add_ln_h", "bert_softmax_warp_f16", "bert_embed_ln_hw", "bert_add_ln_hw",
		"bert_gelu_v8_f16", "bert_pool_h")
}

func TestGPUFusedAttention(t *testing.T) { checkFusedAttention(t, requireCUDA(t)) }
