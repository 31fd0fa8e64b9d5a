#!/usr/bin/env python3
"""PyTorch reference for the CUDA backend's benchmarks (docs/BENCHMARKS.md).

Random-weight Qwen2.5 shapes through transformers (SDPA attention), in bf16
and fp32 (TF32 off): a training step (forward + backward of the summed token
log-probs, batch of sequences of 2048), prefill (forward + log-probs) and
greedy generate at batch 1, 32, 256 (prompts of 128, 128 new tokens).
MEMPO_TORCH_PARTS (train,prefill,decode) picks what runs.
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
            if "train" in parts:
                try:
                    d = timed(step)
                    tf = flops * B / d / 1e12
                    print(f"BENCH {name} torch-{dt} train B={B} T={T}: {B*T/d:.0f} tokens/s ({d:.3f} s/step), {tf:.1f} TFLOP/s = MFU {100*tf/989:.1f}% of 989", flush=True)
                except torch.OutOfMemoryError:
                    print(f"BENCH {name} torch-{dt} train B={B} T={T}: out of memory", flush=True)
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
