package update

import (
	"fmt"
	"strings"

	"github.com/mempo/mempo/lib/checkpoint"
	"github.com/mempo/mempo/lib/envconfig"
)

// MemoryPlan is the GPU memory an update needs, estimated from the model's
// shape before anything is loaded, so a run that cannot fit says so before
// it starts.
type MemoryPlan struct {
	Params      int64 // parameters
	StateBytes  int64 // weights, gradients, optimizer state
	ActBytes    int64 // activations of one micro-batch
	SlackBytes  int64 // CUDA context, cuBLAS workspace, kernels, the buffer pool
	Lean, BF16  bool
	Recompute   bool
	MicroTokens int
}

// Total is the estimate in bytes.
func (p MemoryPlan) Total() int64 { return p.StateBytes + p.ActBytes + p.SlackBytes }

// BytesPerParam is what every parameter costs on the device: fp32 weights
// (+ their bf16 copy in bf16 mode), fp32 gradients and two fp32 moments; or,
// lean, bf16 weights (the 16-bit remainders that complete the master
// weights stay in host memory, devopt8.go; fp32 weights in fp32 mode), fp32
// gradients and two 8-bit moments with a scale per 256.
func BytesPerParam(lean, bf16 bool) float64 {
	switch {
	case lean && bf16:
		return 2 + 4 + 2 + 8.0/256
	case lean:
		return 4 + 4 + 2 + 8.0/256
	case bf16:
		return 4 + 2 + 4 + 8
	}
	return 4 + 4 + 8
}

// EstimateMemory estimates the device memory of an update of a model of
// shape cfg (lib/model's training forward and backward; docs/TRAINING.md,
// "Memory and disk", gives the figures for the presets).
// Activations per token and layer, in fp32: the layer input, two norm
// outputs, q, k, v, the attention output, the residual, gate, up and
// SwiGLU's output, plus the bf16 copies the products read; with recompute
// only each layer's input is kept and one layer's activations live at a
// time, plus the backward's gradients of the widest layer.
func EstimateMemory(cfg *checkpoint.Config, lean, bf16, recompute bool, microTokens int) MemoryPlan {
	H, I := int64(cfg.HiddenSize), int64(cfg.IntermediateSize)
	hd := int64(cfg.HeadDim)
	if hd == 0 {
		hd = H / int64(cfg.NumHeads)
	}
	qd, kvd := int64(cfg.NumHeads)*hd, int64(cfg.NumKVHeads)*hd
	L, T := int64(cfg.NumLayers), int64(microTokens)
	layer := 4*(5*H+2*qd+2*kvd+2*I) + 2*(3*H+qd+I)
	back := 4 * (3*I + 2*H + qd + 2*kvd)
	var act int64
	if recompute {
		act = T * (4*H*L + layer + back)
	} else {
		act = T * (layer*L + back)
	}
	// The LM head runs in chunks of about 32 M logits (fp32 + bf16 copy),
	// and the final norm and its gradient span the micro-batch.
	act += 6*(32<<20) + T*4*H*3
	n := cfg.ParamCount()
	// Slack: 1 GiB of context, cuBLAS workspace and kernels, and as much
	// again as the activations, which the backend's buffer pool keeps in
	// size classes the next micro-batch may not reuse (Qwen2.5-7B, 8-bit
	// state, 4096 tokens with --recompute: 81.0 GiB measured on the H200,
	// 80.5 estimated so, with the remainders on the device; its width at 4
	// layers with them on the host: 21.3 GiB measured, 21.8 estimated;
	// docs/BENCHMARKS.md).
	return MemoryPlan{Params: n, StateBytes: int64(BytesPerParam(lean, bf16) * float64(n)), ActBytes: act,
		SlackBytes: 1<<30 + act, Lean: lean, BF16: bf16, Recompute: recompute, MicroTokens: microTokens}
}

// Fits checks the plan against free device bytes and, when it does not
// fit, says so with the flags that would make it fit (in the order tried:
// --optim-state 8bit, --recompute, smaller --micro-tokens).
func (p MemoryPlan) Fits(cfg *checkpoint.Config, free int64) error {
	if p.Total() <= free {
		return nil
	}
	gib := func(b int64) string { return fmt.Sprintf("%.1f GiB", float64(b)/(1<<30)) }
	msg := fmt.Sprintf("the update needs about %s of GPU memory (%.3g B parameters × %.4g B = %s of weights, gradients and optimizer state; %s of activations at --micro-tokens %d%s) and the GPU has %s free",
		gib(p.Total()), float64(p.Params)/1e9, BytesPerParam(p.Lean, p.BF16), gib(p.StateBytes), gib(p.ActBytes), p.MicroTokens,
		map[bool]string{true: " with --recompute", false: ""}[p.Recompute], gib(free))
	var fixes []string
	try := func(q MemoryPlan, flag string) {
		if q.Total() <= free {
			fixes = append(fixes, fmt.Sprintf("%s (about %s)", flag, gib(q.Total())))
		}
	}
	var flags []string
	q := p
	if !q.Lean {
		q = EstimateMemory(cfg, true, q.BF16, q.Recompute, q.MicroTokens)
		flags = append(flags, "--optim-state 8bit")
		try(q, strings.Join(flags, " "))
	}
	if !q.Recompute && len(fixes) == 0 {
		q = EstimateMemory(cfg, q.Lean, q.BF16, true, q.MicroTokens)
		flags = append(flags, "--recompute")
		try(q, strings.Join(flags, " "))
	}
	for mt := q.MicroTokens / 2; mt >= 512 && len(fixes) == 0; mt /= 2 {
		q2 := EstimateMemory(cfg, q.Lean, q.BF16, q.Recompute, mt)
		try(q2, strings.Join(append(flags, fmt.Sprintf("--micro-tokens %d", mt)), " "))
	}
	if len(fixes) == 0 {
		return fmt.Errorf("%s; no flag of mempo-update makes it fit on this GPU", msg)
	}
	if !p.BF16 && p.Lean {
		fixes = append(fixes, "--device cuda-bf16 (bf16 weights)")
	}
	return fmt.Errorf("%s; it would fit with %s (%s=1 runs it anyway)", msg, strings.Join(fixes, ", or "), envconfig.SkipMemCheck.Name)
}
