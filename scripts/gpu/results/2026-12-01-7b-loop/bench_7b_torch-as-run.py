#!/usr/bin/env python3
"""PyTorch reference for the 7B full-parameter update step (docs/BENCHMARKS.md):
transformers' Qwen2ForCausalLM at the Qwen2.5-7B shape, random bf16 weights, SDPA
attention, gradient checkpointing, torch.optim.AdamW(fused=True) on every parameter
(bf16 weights with bf16 moments: the whole model fits that way). One step does what
mempo-update's step does: a no-grad pass for the output tokens' log-probs (the ratio's
recompute), then forward + backward of the summed output log-probs in micro-batches,
then the optimizer step. The batch is the long-context one of make_long_rollouts.py:
SEQS sequences of CTX + OUTLEN ids, micro-batches of MICRO sequences; or, with LENS
set, the batch of scripts/gpu/loop_7b.sh: TASKS tasks of G sequences each, task t's
prompt LENS[t mod n] ids followed by OUTLEN ids, micro-batches of equal-length
sequences of at most MICRO_TOKENS ids.

env: SEQS (16), CTX (4000), OUTLEN (96), MICRO (1), STEPS (2, the first is warm-up),
     LENS (unset; e.g. 3840,1792,768,256), TASKS (8), G (16), MICRO_TOKENS (4096)
"""
import os
import time

import torch
from transformers import Qwen2Config, Qwen2ForCausalLM

seqs, ctx, out = int(os.environ.get("SEQS", 16)), int(os.environ.get("CTX", 4000)), int(os.environ.get("OUTLEN", 96))
micro, steps = int(os.environ.get("MICRO", 1)), int(os.environ.get("STEPS", 2))
cfg = Qwen2Config(vocab_size=152064, hidden_size=3584, intermediate_size=18944, num_hidden_layers=28,
                  num_attention_heads=28, num_key_value_heads=4, max_position_embeddings=32768, rope_theta=1e6,
                  rms_norm_eps=1e-6, tie_word_embeddings=False, use_cache=False)
cfg._attn_implementation = "sdpa"
t0 = time.time()
torch.manual_seed(0)
with torch.device("cuda"):
    model = Qwen2ForCausalLM(cfg).to(torch.bfloat16)
model.gradient_checkpointing_enable()
model.train()
opt = torch.optim.AdamW(model.parameters(), lr=1e-6, weight_decay=0.01, fused=True)
n = sum(p.numel() for p in model.parameters())
print(f"torch {torch.__version__}: {n/1e9:.3f} B parameters on the GPU in {time.time()-t0:.1f} s", flush=True)
g = torch.Generator(device="cuda").manual_seed(1)
if os.environ.get("LENS"):
    lens = [int(x) for x in os.environ["LENS"].split(",")]
    tasks, grp, mt = int(os.environ.get("TASKS", 8)), int(os.environ.get("G", 16)), int(os.environ.get("MICRO_TOKENS", 4096))
    batches = []
    for t in range(tasks):
        n = lens[t % len(lens)] + out
        per = max(1, mt // n)
        for i in range(0, grp, per):
            batches.append(torch.randint(0, 151643, (min(per, grp - i), n), device="cuda", generator=g))
else:
    ids = torch.randint(0, 151643, (seqs, ctx + out), device="cuda", generator=g)
    batches = [ids[i:i + micro] for i in range(0, seqs, micro)]
ntraj = sum(b.shape[0] for b in batches)


def out_logprobs(x):
    logits = model(input_ids=x, logits_to_keep=out + 1).logits[:, :-1].float()
    return torch.log_softmax(logits, -1).gather(-1, x[:, -out:, None]).squeeze(-1)


for s in range(steps):
    torch.cuda.synchronize()
    t = time.time()
    with torch.no_grad():
        for b in batches:
            out_logprobs(b)
    torch.cuda.synchronize()
    t1 = time.time()
    for b in batches:
        loss = -out_logprobs(b).sum() / (ntraj * out)
        loss.backward()
    torch.cuda.synchronize()
    t2 = time.time()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    opt.zero_grad(set_to_none=True)
    torch.cuda.synchronize()
    t3 = time.time()
    tok = sum(b.numel() for b in batches)
    print(f"BENCH torch-7b step {s}: {tok} tokens in {t3-t:.2f} s = {tok/(t3-t):.0f} tokens/s "
          f"(log-prob pass {t1-t:.2f} s, fwd+bwd {t2-t1:.2f} s, clip+AdamW {t3-t2:.2f} s); "
          f"peak allocated {torch.cuda.max_memory_allocated()/2**30:.1f} GiB, reserved {torch.cuda.max_memory_reserved()/2**30:.1f} GiB", flush=True)
