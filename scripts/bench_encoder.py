#!/usr/bin/env python3
"""transformers' side of the dense-encoder benchmark (docs/BENCHMARKS.md, "Dense encoder"): passages/s of a
base-sized BertModel (768 hidden, 12 layers, 12 heads, 3072 intermediate, random weights: e5-base-v2's shape) on
texts of exactly 256 tokens, as Search-R1 encodes passages (max_length 256), with no pooling or tokenization cost.

Compare with Go's lib/encoder on the same machine:
    go test -run '^$' -bench BaseCPU -benchtime 1x ./lib/encoder/

Usage (on the GPU machine, transformers 5.x and torch installed):
    python3 scripts/bench_encoder.py --device cpu  --threads 16 --batch 8  --iters 3
    python3 scripts/bench_encoder.py --device cuda --batch 512 --iters 5            # fp32
    python3 scripts/bench_encoder.py --device cuda --batch 512 --iters 5 --fp16     # Search-R1's use_fp16
Prints one JSON line per run.
"""
import argparse, json, time
import torch
from transformers import BertConfig, BertModel

ap = argparse.ArgumentParser()
ap.add_argument("--device", default="cpu")
ap.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: torch's default)")
ap.add_argument("--batch", type=int, default=8)
ap.add_argument("--length", type=int, default=256)
ap.add_argument("--iters", type=int, default=3)
ap.add_argument("--fp16", action="store_true")
a = ap.parse_args()
if a.threads:
    torch.set_num_threads(a.threads)
torch.manual_seed(0)
cfg = BertConfig(vocab_size=30522, hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072,
                 max_position_embeddings=512, type_vocab_size=2, hidden_act="gelu")
model = BertModel(cfg, add_pooling_layer=False).eval().to(a.device)
if a.fp16:
    model = model.half()
ids = torch.randint(1000, 29000, (a.batch, a.length), device=a.device)
mask = torch.ones_like(ids)

def run():
    with torch.no_grad():
        h = model(input_ids=ids, attention_mask=mask).last_hidden_state
        e = torch.nn.functional.normalize((h * mask[..., None]).sum(1) / mask.sum(1, keepdim=True), dim=-1)
    if a.device.startswith("cuda"):
        torch.cuda.synchronize()
    return e

run()  # warm-up
t0 = time.perf_counter()
for _ in range(a.iters):
    run()
secs = time.perf_counter() - t0
n = a.batch * a.iters
print(json.dumps({"device": a.device, "gpu": torch.cuda.get_device_name() if a.device.startswith("cuda") else None,
                  "threads": torch.get_num_threads(), "fp16": a.fp16, "batch": a.batch, "length": a.length,
                  "passages": n, "seconds": round(secs, 3), "passages_per_s": round(n / secs, 2),
                  "torch": torch.__version__}))
