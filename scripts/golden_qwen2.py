#!/usr/bin/env python3
"""Parity fixtures for lib/model from Hugging Face transformers (run on the GPU machine: transformers 5.17,
PyTorch 2.11). Everything is float32 on the CPU with eager attention, so the numbers are exact references.

For each case it writes testdata/models/<case>/ : the model directory as save_pretrained writes it
(config.json, model.safetensors or shards + index, generation_config.json) and golden.safetensors with
  ids.<b>       int64 [T_b]   two sequences of different lengths (b = 0, 1)
  weights.<b>   f32  [T_b]    loss weights; weights[0] is unused (no target at position 0)
  logits.<b>    f32  [T_b,V]  logits of each position (each sequence run alone, no padding)
  logprobs.<b>  f32  [T_b]    log p(ids[t] | ids[:t]); logprobs[0] = 0
  loss          f32  [1]      L = -sum_b sum_{t>=1} weights[b][t] * logprobs[b][t]
  grad.<param>  f32           dL/dparam for every parameter (tied models: embed_tokens only)
  greedy.prompt int64 [8], greedy.output int64 [32], greedy.margin f32 [32] (top-1 minus top-2 logit;
                full recompute each step, no EOS)
"""
import copy, json, os, sys
import torch
import transformers
from transformers import Qwen2Config, Qwen2ForCausalLM, Qwen3Config, Qwen3ForCausalLM
from safetensors.torch import save_file

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
out_root = os.path.join(root, "testdata", "models")
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False

V = 320
cases = {
    # name: (arch, tie, heads, kv_heads, head_dim, attention_bias (qwen3 only), rope_theta, save dtype, shard)
    "qwen2-tied-gqa1": ("qwen2", True, 4, 4, None, None, 10000.0, "f32", False),
    "qwen2-untied-gqa4": ("qwen2", False, 8, 2, None, None, 1000000.0, "f32", True),
    "qwen3-qknorm-nobias": ("qwen3", True, 4, 1, 16, False, 1000000.0, "f32", False),
    "qwen3-qknorm-bias-untied": ("qwen3", False, 4, 2, 16, True, 10000.0, "f32", False),
    "qwen2-bf16": ("qwen2", True, 4, 2, None, None, 10000.0, "bf16", False),
}

def build(arch, tie, heads, kv, head_dim, bias, theta):
    common = dict(vocab_size=V, hidden_size=64, intermediate_size=160, num_hidden_layers=2,
                  num_attention_heads=heads, num_key_value_heads=kv, max_position_embeddings=256,
                  rms_norm_eps=1e-6, tie_word_embeddings=tie, rope_theta=theta,
                  bos_token_id=None, eos_token_id=V - 1, attn_implementation="eager")
    if arch == "qwen2":
        return Qwen2ForCausalLM(Qwen2Config(**common))
    return Qwen3ForCausalLM(Qwen3Config(head_dim=head_dim, attention_bias=bias, **common))

only = set(sys.argv[1:])  # case names to (re)make; all when none are given
for name, (arch, tie, heads, kv, head_dim, bias, theta, dtype, shard) in cases.items():
    if only and name not in only:
        continue
    torch.manual_seed(sum(map(ord, name)))
    model = build(arch, tie, heads, kv, head_dim, bias, theta).float().eval()
    with torch.no_grad():
        for pname, p in model.named_parameters():
            if "norm" in pname:
                p.copy_(1 + 0.1 * torch.randn_like(p))
            elif pname.endswith("bias"):
                p.copy_(0.1 * torch.randn_like(p))
            elif "embed_tokens" in pname:
                p.copy_(torch.randn_like(p))
            else:
                p.copy_(0.15 * torch.randn_like(p))
    d = os.path.join(out_root, name)
    os.makedirs(d, exist_ok=True)
    if dtype == "bf16":
        # Save a bf16 copy, then round only the parameters of the f32 model to bf16: the references
        # come from the bf16-rounded weights computed in f32. Rounding the whole module would also
        # round the rotary inv_freq buffer, which a loader recomputes in full precision.
        copy.deepcopy(model).to(torch.bfloat16).save_pretrained(d, safe_serialization=True)
        with torch.no_grad():
            for p in model.parameters():
                p.copy_(p.to(torch.bfloat16).float())
    else:
        model.save_pretrained(d, safe_serialization=True, max_shard_size="200KB" if shard else "50GB")
    g = {}
    model.zero_grad()
    total = torch.zeros(())
    for b, T in enumerate([17, 9]):
        ids = torch.randint(0, V, (T,))
        w = torch.rand(T)
        logits = model(input_ids=ids[None]).logits[0]
        lp = torch.log_softmax(logits, dim=-1)
        tok_lp = torch.zeros(T)
        tok_lp[1:] = lp[:-1].gather(1, ids[1:, None])[:, 0]
        total = total - (w[1:] * tok_lp[1:]).sum()
        g["ids.%d" % b] = ids
        g["weights.%d" % b] = w
        g["logits.%d" % b] = logits.detach().clone()
        g["logprobs.%d" % b] = tok_lp.detach().clone()
    total.backward()
    g["loss"] = total.detach().reshape(1)
    for pname, p in model.named_parameters():
        g["grad." + pname] = p.grad.detach().clone()
    with torch.no_grad():
        ids = torch.randint(0, V, (8,))
        g["greedy.prompt"] = ids.clone()
        out, margins = [], []
        for _ in range(32):
            logits = model(input_ids=ids[None]).logits[0, -1]
            top = torch.topk(logits, 2)
            out.append(int(top.indices[0]))
            margins.append(float(top.values[0] - top.values[1]))
            ids = torch.cat([ids, top.indices[:1]])
        g["greedy.output"] = torch.tensor(out, dtype=torch.int64)
        g["greedy.margin"] = torch.tensor(margins, dtype=torch.float32)
    save_file({k: v.contiguous() for k, v in g.items()}, os.path.join(d, "golden.safetensors"),
              metadata={"transformers": transformers.__version__, "torch": torch.__version__})
    print(name, "loss", float(total), "min greedy margin", min(margins), file=sys.stderr)
