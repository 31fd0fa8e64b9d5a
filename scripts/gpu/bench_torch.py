#!/usr/bin/env python3
"""PyTorch reference for the CUDA backend's benchmarks (docs/BENCHMARKS.md).

Random-weight Qwen2.5 shapes through transformers (SDPA attention), in bf16
and fp32 (TF32 off): a training step (forward + backward of the summed token
log-probs, batch of sequences of 2048), prefill (forward + log-probs) and
greedy generate at batch 1, 32, 256 (prompts of 128, 128 new tokens).
MEMPO_TORCH_PARTS (train,prefill,decode) picks what runs; MEMPO_TORCH_TRAIN
the training steps (comma list, default full): full (the whole logits tensor,
as a plain model call gives it), chunked (the LM head and log-softmax in
chunks of 2048 rows, each chunk's gradient made in the forward, the way fused
linear cross-entropy kernels do it: no logits tensor kept, as mempo's LM head)
and compiled (chunked with the transformer body under torch.compile). Before
the chunked steps, their gradients are checked against full's on a small
case. MEMPO_TORCH_PROFILE=1 then profiles one step of each training variant
and prints its CUDA time by kernel family (GEMM, attention, Triton fusions,
elementwise, reductions) and its largest kernels.
Lines starting with BENCH are the results; run by scripts/gpu/run.sh.
"""
import os, sys, time
import torch
import transformers
from transformers import Qwen2Config, Qwen2ForCausalLM

SHAPES = {
    "qwen2.5-0.5b": dict(hidden_size=896, intermediate_size=4864, num_hidden_layers=24, num_attention_heads=14, num_key_value_heads=2),
    "qwen2.5-1.5b": dict(hidden_size=1536, intermediate_size=8960, num_hidden_layers=28, num_attention_heads=12, num_key_value_heads=2),
    "qwen2.5-7b": dict(hidden_size=3584, intermediate_size=18944, num_hidden_layers=28, num_attention_heads=28, num_key_value_heads=4,
                       vocab_size=152064, tie_word_embeddings=False),
}

def sync():
    torch.cuda.synchronize()

def timed(fn, reps=2):
    fn(); sync()
    best = None
    for _ in range(reps):
        t = time.perf_counter(); fn(); sync(); d = time.perf_counter() - t
        best = d if best is None else min(best, d)
    return best

class ChunkedLogProb(torch.autograd.Function):
    """Σ log softmax(h·Wᵀ)[target] over rows of h, C rows at a time; the gradients of h and W are made chunk by
    chunk in the forward (d/dz = onehot − softmax), so no logits tensor outlives its chunk."""

    @staticmethod
    def forward(ctx, h, W, tgt, C):
        gh = torch.empty_like(h)
        gW = torch.zeros(W.shape, device=W.device, dtype=torch.float32)
        total = torch.zeros((), device=h.device, dtype=torch.float32)
        for i in range(0, h.shape[0], C):
            hc, tc = h[i:i + C], tgt[i:i + C, None]
            z = (hc @ W.t()).float()
            lse = torch.logsumexp(z, -1, keepdim=True)
            total += (z.gather(-1, tc) - lse).sum()
            g = torch.exp(z - lse).neg_()
            g.scatter_add_(-1, tc, torch.ones_like(tc, dtype=g.dtype))
            g = g.to(h.dtype)
            gh[i:i + C] = g @ W
            gW += (g.t() @ hc).float()
        ctx.save_for_backward(gh, gW.to(W.dtype))
        return total

    @staticmethod
    def backward(ctx, go):
        gh, gW = ctx.saved_tensors
        return gh * go.to(gh.dtype), gW * go.to(gW.dtype), None, None


def check_chunked():
    """ChunkedLogProb against autograd over the whole logits, fp32, a small case."""
    torch.manual_seed(1)
    h = torch.randn(300, 64, device="cuda", dtype=torch.float64, requires_grad=True)
    W = torch.randn(1000, 64, device="cuda", dtype=torch.float64, requires_grad=True)
    tgt = torch.randint(0, 1000, (300,), device="cuda")
    ref = torch.log_softmax(h @ W.t(), -1).gather(-1, tgt[:, None]).sum()
    rh, rW = torch.autograd.grad(ref, (h, W))
    got = ChunkedLogProb.apply(h, W, tgt, 128)
    gh, gW = torch.autograd.grad(got, (h, W))
    err = max((got - ref).abs().item() / ref.abs().item(), ((gh - rh).abs().max() / rh.abs().max()).item(),
              ((gW - rW).abs().max() / rW.abs().max()).item())
    print(f"BENCH torch chunked log-prob check: relative error {err:.2e} against the whole logits", flush=True)
    if not err < 1e-4:
        sys.exit(f"chunked log-prob gradients differ from the whole logits' by {err:.2e}")


def kernel_family(name):
    n = name.lower()
    if any(k in n for k in ("gemm", "nvjet", "cutlass", "sm90_xmma", "cublas", "splitk")):
        return "GEMM"
    if any(k in n for k in ("flash", "fmha", "attention", "sdpa", "efficient")):
        return "attention"
    if n.startswith("triton"):
        return "Triton fusion"
    if "reduce" in n or "softmax" in n or "norm" in n:
        return "reduction/softmax/norm"
    if "elementwise" in n or "vectorized" in n or "copy" in n or "fill" in n or "cast" in n:
        return "elementwise/copy"
    return "other"


def profile(label, fn):
    """One step of fn under the profiler: CUDA time by kernel family and the largest kernels."""
    from torch.profiler import profile as prof, ProfilerActivity
    fn(); sync()
    with prof(activities=[ProfilerActivity.CUDA]) as p:
        fn(); sync()
    fam, top = {}, []
    for e in p.key_averages():
        t = getattr(e, "device_time_total", None)
        if t is None:
            t = e.cuda_time_total
        if t <= 0 or e.key.startswith("ProfilerStep"):
            continue
        f = kernel_family(e.key)
        fam[f] = fam.get(f, 0) + t
        top.append((t, e.count, e.key))
    total = sum(fam.values())
    print(f"BENCH {label} profile: kernels {total/1e3:.1f} ms", flush=True)
    for f, t in sorted(fam.items(), key=lambda x: -x[1]):
        print(f"BENCH {label} family {f:<24} {t/1e3:8.1f} ms {100*t/total:5.1f}%", flush=True)
    for t, c, k in sorted(top, reverse=True)[:25]:
        print(f"BENCH {label} kernel {t/1e3:8.1f} ms {c:5d}x {k[:110]}", flush=True)


def train_flops(cfg, n_params_no_embed, T):
    w = n_params_no_embed + cfg.vocab_size * cfg.hidden_size
    fwd = 2 * w * T + cfg.num_hidden_layers * 2 * T * T * cfg.num_attention_heads * (cfg.hidden_size // cfg.num_attention_heads)
    return 3 * fwd

def main():
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    models = os.environ.get("MEMPO_CUDA_BENCH_MODELS", "qwen2.5-0.5b,qwen2.5-1.5b").split(",")
    B = int(os.environ.get("MEMPO_CUDA_BENCH_BATCH", "8"))
    dtypes = os.environ.get("MEMPO_TORCH_DTYPES", "bf16,fp32").split(",")
    T = 2048
    print(f"BENCH torch {torch.__version__} transformers {transformers.__version__} {torch.cuda.get_device_name()}", flush=True)
    if set(os.environ.get("MEMPO_TORCH_TRAIN", "full").split(",")) - {"full"}:
        check_chunked()
    for name in models:
        for dt in dtypes:
            dtype = torch.bfloat16 if dt == "bf16" else torch.float32
            shape = dict(vocab_size=151936, tie_word_embeddings=True)
            shape.update(SHAPES[name])
            cfg = Qwen2Config(max_position_embeddings=32768, rope_theta=1e6, rms_norm_eps=1e-6,
                              attn_implementation="sdpa", **shape)
            torch.manual_seed(0)
            with torch.device("cuda"):
                model = Qwen2ForCausalLM(cfg).to(dtype)
            n_no_embed = sum(p.numel() for n, p in model.named_parameters() if p.dim() > 1 and "embed_tokens" not in n)
            flops = train_flops(cfg, n_no_embed, T)
            ids = (torch.arange(T, device="cuda")[None, :] * 7919 + torch.arange(B, device="cuda")[:, None] * 104729) % cfg.vocab_size
            model.train()
            parts = os.environ.get("MEMPO_TORCH_PARTS", "train,prefill,decode").split(",")

            def step():
                model.zero_grad(set_to_none=False)
                logits = model(input_ids=ids).logits.float()
                lp = torch.log_softmax(logits[:, :-1], -1).gather(-1, ids[:, 1:, None]).sum()
                lp.backward()

            def chunked_step(body):
                def run():
                    model.zero_grad(set_to_none=False)
                    h = body(input_ids=ids).last_hidden_state
                    hs = h[:, :-1].reshape(-1, h.shape[-1])
                    lp = ChunkedLogProb.apply(hs, model.lm_head.weight, ids[:, 1:].reshape(-1), 2048)
                    lp.backward()
                return run
            for variant in (os.environ.get("MEMPO_TORCH_TRAIN", "full").split(",") if "train" in parts else ()):
                if variant == "full":
                    fn = step
                elif variant == "chunked":
                    fn = chunked_step(model.model)
                elif variant == "compiled":
                    fn = chunked_step(torch.compile(model.model))
                else:
                    sys.exit(f"MEMPO_TORCH_TRAIN: unknown training step {variant!r} (full, chunked, compiled)")
                label = "train" if variant == "full" else f"train-{variant}"
                try:
                    t0 = time.perf_counter()
                    d = timed(fn)
                    tf = flops * B / d / 1e12
                    print(f"BENCH {name} torch-{dt} {label} B={B} T={T}: {B*T/d:.0f} tokens/s ({d:.3f} s/step), {tf:.1f} TFLOP/s = MFU {100*tf/989:.1f}% of 989 ({time.perf_counter()-t0:.0f} s with warm-up)", flush=True)
                except torch.OutOfMemoryError:
                    print(f"BENCH {name} torch-{dt} {label} B={B} T={T}: out of memory", flush=True)
                    continue
                if os.environ.get("MEMPO_TORCH_PROFILE") == "1":
                    profile(f"{name} torch-{dt} {label}", fn)
            model.zero_grad(set_to_none=True)
            torch.cuda.empty_cache()
            model.eval()

            @torch.no_grad()
            def prefill():
                logits = model(input_ids=ids).logits
                torch.log_softmax(logits[:, :-1].float(), -1).gather(-1, ids[:, 1:, None])
            if "prefill" in parts:
                d = timed(prefill)
                print(f"BENCH {name} torch-{dt} prefill B={B} T={T}: {B*T/d:.0f} tokens/s", flush=True)
            torch.cuda.empty_cache()
            for bs in ((1, 32, 256) if "decode" in parts else ()):
                prompt = (torch.arange(128, device="cuda")[None, :] * 31 + torch.arange(bs, device="cuda")[:, None] * 17 + 1) % cfg.vocab_size
                gen = lambda: model.generate(input_ids=prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=128,
                                             min_new_tokens=128, do_sample=False, pad_token_id=0)
                d = timed(gen, reps=1)
                print(f"BENCH {name} torch-{dt} decode B={bs}: {bs*128/d:.0f} tokens/s (incl. prefill of 128)", flush=True)
            del model
            torch.cuda.empty_cache()

if __name__ == "__main__":
    main()
