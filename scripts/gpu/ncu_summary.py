#!/usr/bin/env python3
"""Sums an ncu CSV of gpu__time_duration.sum (ncu --csv --metrics gpu__time_duration.sum, the details page) by forward
pass and kind of kernel: lib/encoder's TestCUDAEncoderProfile runs forwards that each begin with bert_embed_ln_*, so
the kernels are split there. Kinds: GEMM (cuBLAS), attention (bert_attn_f16, the softmax, the head split/merge),
LayerNorm (embeddings, add + LayerNorm), GELU, pooling, other.
    usage: python3 scripts/gpu/ncu_summary.py encoder-ncu.csv [labels...]
"""
import csv, sys
from collections import defaultdict

UNIT = {"nsecond": 1e-3, "ns": 1e-3, "usecond": 1.0, "us": 1.0, "msecond": 1e3, "ms": 1e3, "second": 1e6, "s": 1e6}


def kind(name):
    n = name.lower()
    if n.startswith("bert_attn") or "softmax" in n or "split_heads" in n or "merge_heads" in n:
        return "attention"
    if "embed_ln" in n or "add_ln" in n:
        return "layernorm"
    if "gelu" in n:
        return "gelu"
    if "bert_pool" in n:
        return "pool"
    if "gemm" in n or "sm90" in n or "cutlass" in n or "xmma" in n or "sm80" in n or "cublas" in n:
        return "gemm"
    return "other"


def main():
    rows = []
    with open(sys.argv[1], newline="") as f:
        lines = [l for l in f if l.startswith('"')]  # ncu's own messages are not CSV
    for r in csv.DictReader(lines):
        if r.get("Metric Name") != "gpu__time_duration.sum":
            continue
        v = float(r["Metric Value"].replace(",", "")) * UNIT.get(r.get("Metric Unit", "nsecond"), 1e-3)
        rows.append((r["Kernel Name"], v))
    passes, cur = [], None
    for name, us in rows:
        if name.startswith("bert_embed_ln"):
            cur = defaultdict(float)
            cur["_kernels"] = 0
            passes.append(cur)
        if cur is None:
            continue
        cur[kind(name)] += us
        cur["_kernels"] += 1
        cur["k:" + name.split("(")[0][:60]] += us
    labels = sys.argv[2:]
    for i, p in enumerate(passes):
        total = sum(v for k, v in p.items() if not k.startswith("_") and not k.startswith("k:"))
        label = labels[i] if i < len(labels) else f"forward {i}"
        print(f"NCU {label}: {p['_kernels']} kernels, {total / 1000:.2f} ms of kernel time")
        for k in ("gemm", "attention", "layernorm", "gelu", "pool", "other"):
            print(f"NCU   {k:10s} {p[k] / 1000:8.2f} ms  {100 * p[k] / max(total, 1e-9):5.1f}%")
        top = sorted(((v, k[2:]) for k, v in p.items() if k.startswith("k:")), reverse=True)[:8]
        for v, k in top:
            print(f"NCU     {v / 1000:8.2f} ms  {k}")


main()
