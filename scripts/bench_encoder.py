#!/usr/bin/env python3
"""transformers' side of the dense-encoder benchmark (docs/BENCHMARKS.md, "Dense retrieval on the H200"): texts/s of
a base-sized BertModel (768 hidden, 12 layers, 12 heads, 3072 intermediate, random weights: e5-base-v2's shape) on
texts of exactly --length tokens (256: Search-R1's passage max_length), forward + mean pooling + L2 normalization
(as lib/encoder's EmbedIDs), no tokenization. transformers' default attention (SDPA) is used; fp16 is Search-R1's
use_fp16 (model.half()); fp32 runs with TF32 off, as lib/encoder's fp32 mode.

Compare with lib/encoder on the same machine (TestCUDAEncoderBenchmarks, run by scripts/gpu/run_encoder.sh):
    go test -run '^$' -bench BaseCPU -benchtime 1x ./lib/encoder/        # CPU only

Usage (transformers 5.x and torch installed):
    python3 scripts/bench_encoder.py --device cpu  --threads 16 --batch 8  --iters 3
    python3 scripts/bench_encoder.py --device cuda --batch 512 --iters 5 --fp16     # one run
    python3 scripts/bench_encoder.py --runs cpu:fp32:16:256,cuda:fp16:128:256,cuda:fp32:128:256,cuda:fp16:256:24
      (several runs in one process: device:dtype:batch:length each; --seconds bounds each GPU run)
Prints one JSON line per run, prefixed with "BENCH encoder_torch ".
"""
import argparse, json, time
import torch
import transformers
from transformers import BertConfig, BertModel

ap = argparse.ArgumentParser()
ap.add_argument("--device", default="cpu")
ap.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: torch's default)")
ap.add_argument("--batch", type=int, default=8)
ap.add_argument("--length", type=int, default=256)
ap.add_argument("--iters", type=int, default=3, help="at least this many timed batches per run")
ap.add_argument("--seconds", type=float, default=2.0, help="GPU runs repeat for at least this long")
ap.add_argument("--fp16", action="store_true")
ap.add_argument("--runs", default="", help="device:dtype:batch:length,... (overrides --device/--batch/--length/--fp16)")
ap.add_argument("--profile", action="store_true",
                help="after each GPU run, one more call under torch.profiler: GPU time per kernel (the top 25)")
a = ap.parse_args()
if a.threads:
    torch.set_num_threads(a.threads)
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False

runs = []
if a.runs:
    for spec in a.runs.split(","):
        dev, dt, b, t = spec.split(":")
        runs.append((dev, dt, int(b), int(t)))
else:
    runs.append((a.device, "fp16" if a.fp16 else "fp32", a.batch, a.length))

cfg = BertConfig(vocab_size=30522, hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072,
                 max_position_embeddings=512, type_vocab_size=2, hidden_act="gelu")
torch.manual_seed(0)
cpu_model = BertModel(cfg, add_pooling_layer=False).eval()
models = {}

def model_for(dev, dt):
    key = (dev, dt)
    if key not in models:
        m = BertModel(cfg, add_pooling_layer=False).eval()
        m.load_state_dict(cpu_model.state_dict())
        m = m.to(dev)
        if dt == "fp16":
            m = m.half()
        models[key] = m
    return models[key]

for dev, dt, B, T in runs:
    model = model_for(dev, dt)
    ids = torch.randint(1000, 29000, (B, T), device=dev)
    mask = torch.ones_like(ids)

    def run():
        with torch.no_grad():
            h = model(input_ids=ids, attention_mask=mask).last_hidden_state
            m = mask[..., None].to(h.dtype)
            e = torch.nn.functional.normalize((h * m).sum(1) / m.sum(1), dim=-1)
            out = e.float().cpu()
        return out

    run()  # warm-up
    n = 0
    t0 = time.perf_counter()
    while n < a.iters or (dev.startswith("cuda") and time.perf_counter() - t0 < a.seconds):
        run()
        n += 1
    secs = time.perf_counter() - t0
    print("BENCH encoder_torch " + json.dumps({
        "device": dev, "gpu": torch.cuda.get_device_name() if dev.startswith("cuda") else None,
        "threads": torch.get_num_threads(), "dtype": dt, "batch": B, "length": T, "texts": n * B,
        "seconds": round(secs, 3), "per_s": round(n * B / secs, 2), "ms_per_batch": round(1000 * secs / n, 2),
        "attn": getattr(model.config, "_attn_implementation", None),
        "torch": torch.__version__, "transformers": transformers.__version__}), flush=True)
    if a.profile and dev.startswith("cuda"):
        from torch.profiler import profile, ProfilerActivity
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            run()
        print(f"PROFILE encoder_torch {dt} batch={B} length={T}\n" +
              prof.key_averages().table(sort_by="cuda_time_total", row_limit=25, max_name_column_width=90), flush=True)
