package encoder

import (
	"testing"

	"github.com/mempo/mempo/lib/envconfig"
	"github.com/mempo/mempo/lib/tokenizer"
)

// TestCUDAEncoderProfile runs the base-sized random encoder's fp16 forward
// on one batch of 128 passages of 256 tokens four times: a warm-up, then
// the default path (fused attention, half projection outputs, half
// residual stream), then the same with an fp32 residual stream, then the
// unfused path (strided-batched GEMMs around the softmax kernel, fp32
// projection outputs and residual). It only launches: it is meant to run
// under a kernel profiler (scripts/gpu/run_encoder.sh's profile part runs
// it under ncu), which times each kernel. MEMPO_CUDA_PROFILE=1 runs it.
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
	for i, v := range [][2]bool{{true, true}, {true, true}, {true, false}, {false, false}} {
		e.gpu.fusedAttn, e.gpu.halfOut, e.gpu.halfRes = v[0], v[0], v[1]
		if _, err := e.EmbedIDs(ids, mask, B, T); err != nil {
			t.Fatal(err)
		}
		t.Logf("forward %d done (fused attention %v, half residual %v)", i, v[0], v[1])
	}
}
