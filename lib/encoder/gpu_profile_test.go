package encoder

import (
	"testing"

	"github.com/mempo/mempo/lib/envconfig"
	"github.com/mempo/mempo/lib/tokenizer"
)

// TestCUDAEncoderProfile runs the base-sized random encoder's fp16 forward
// on one batch of 128 passages of 256 tokens four times: a warm-up, then
// the default path (fused attention of 128-row tiles, half projection
// outputs, half residual stream), then the same with the 64-row attention
// tile, then the unfused path (strided-batched GEMMs around the softmax
// kernel, fp32 projection outputs and residual). It only launches: it is
// meant to run under a kernel profiler (scripts/gpu/run_encoder.sh's
// profile part runs it under ncu), which times each kernel.
// MEMPO_CUDA_PROFILE=1 runs it.
func TestCUDAEncoderProfile(t *testing.T) {
	if envconfig.CUDAProfile.Get() != "1" {
		t.Skip("set MEMPO_CUDA_PROFILE=1 to run the forward to be profiled (on a GPU)")
	}
	dev := requireCUDA(t)
	tok, err := tokenizer.Load(modelDir + "/tokenizer.json")
	if err != nil {
		t.Fatal(err)
	}
	e, err := Random(BaseConfig, tok, 1, Options{Family: "e5", MaxLength: 256})
	if err != nil {
		t.Fatal(err)
	}
	onGPU(t, e, dev, FP16)
	const B, T = 128, 256
	ids, mask := make([]int, B*T), make([]int, B*T)
	for i := range ids {
		ids[i], mask[i] = 1000+(i*7919)%(BaseConfig.VocabSize-1000), 1
	}
	for i, v := range []struct {
		name  string
		fused bool
		attn  int
	}{{"warm-up", true, 1}, {"default", true, 1}, {"64-row attention", true, 0}, {"unfused", false, 1}} {
		e.gpu.fusedAttn, e.gpu.halfOut, e.gpu.halfRes, e.gpu.attn = v.fused, v.fused, v.fused, v.attn
		if _, err := e.EmbedIDs(ids, mask, B, T); err != nil {
			t.Fatal(err)
		}
		t.Logf("forward %d done (%s)", i, v.name)
	}
}
