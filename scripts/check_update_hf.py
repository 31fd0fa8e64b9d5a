#!/usr/bin/env python3
"""Check a checkpoint written by `mempo-update` (update, apply or sft) in Hugging Face transformers: run on the GPU
machine (transformers 5.17, PyTorch 2.11; everything float32, on the CPU unless --device says otherwise).

Make the inputs on the CPU machine, then copy them over:

    mempo-update --model ckpt/ --ref sft/ --rollouts r.parquet --out next/ --golden next-golden.safetensors
    python3 scripts/check_update_hf.py next/ next-golden.safetensors [--before ckpt/] [--device cuda]

GOLDEN is what `--golden` wrote: for k = 0, 1, … an int64 tensor "ids.k" [T] (a rollout step's context ⊕ output,
cut to 24 ids) and the float32 "logits.k" [T, V] that mempo's own model gave for it after the update.

For DIR it checks, one line each, and exits 1 when any check fails:
  1. load: AutoModelForCausalLM(float32, eager attention) loads with no missing, unexpected or mismatched key;
  2. logits: transformers' logits on every ids.k match logits.k within 1e-4 of the largest |logit| (the same
     tolerance as scripts/check_hf_load.py; float32 in both, only the summation order differs);
  3. optimizer: optimizer.safetensors holds "<param>.exp_avg" and "<param>.exp_avg_sq" for parameters of the model,
     with the parameter's element count, finite, exp_avg_sq ≥ 0, a "<param>.step" ≥ 1 and mempo.global_step in the
     metadata (the format lib/optim and lib/update write); it prints the global step and the plan progress;
  4. metrics: update_metrics.jsonl rows parse, have finite loss and grad norm, and steps increase by one;
  5. with --before DIR0 (the --model of the update): the largest |Δθ| per parameter group, failing when nothing
     moved (an update that silently did nothing) or when a value became non-finite.
"""
import argparse
import json
import math
import os
import sys

import torch
from safetensors import safe_open
from transformers import AutoModelForCausalLM


def fail(msg):
    print(f"FAIL {msg}")
    return False


def stored(d):
    idx = os.path.join(d, "model.safetensors.index.json")
    files = sorted(set(json.load(open(idx))["weight_map"].values())) if os.path.exists(idx) else ["model.safetensors"]
    out = {}
    for f in files:
        with safe_open(os.path.join(d, f), framework="pt") as sf:
            for k in sf.keys():
                out[k] = sf.get_tensor(k).float()
    return out


def check_load(d, device):
    model, info = AutoModelForCausalLM.from_pretrained(d, dtype=torch.float32, attn_implementation="eager",
                                                       output_loading_info=True)
    model.to(device).eval()
    ok = True
    for kind in ("missing_keys", "unexpected_keys", "mismatched_keys", "error_msgs"):
        keys = info.get(kind) or []
        if keys:
            ok = fail(f"load: {kind}: {sorted(map(str, keys))[:10]}")
    if ok:
        print(f"ok   load: {type(model).__name__}, {sum(p.numel() for p in model.parameters())} parameters")
    return model, ok


def check_logits(model, golden, device):
    ok = True
    with safe_open(golden, framework="pt") as g:
        keys = set(g.keys())
        k = 0
        while f"ids.{k}" in keys:
            ids = g.get_tensor(f"ids.{k}").long().to(device)
            want = g.get_tensor(f"logits.{k}").float()
            with torch.no_grad():
                got = model(ids[None, :]).logits[0].float().cpu()
            if got.shape != want.shape:
                ok = fail(f"logits.{k}: shape {tuple(got.shape)}, golden {tuple(want.shape)}")
            else:
                diff = (got - want).abs().max().item()
                scale = want.abs().max().item()
                line = f"logits.{k}: {ids.numel()} ids, max |diff| {diff:.3g}, max |logit| {scale:.3g}"
                if diff > 1e-4 * max(scale, 1.0):
                    ok = fail(line)
                else:
                    print(f"ok   {line}")
            k += 1
        if k == 0:
            ok = fail(f"{golden}: no ids.0")
    return ok


def check_optimizer(d, model):
    path = os.path.join(d, "optimizer.safetensors")
    if not os.path.exists(path):
        return fail(f"optimizer: {path} missing")
    numel = {n: p.numel() for n, p in model.named_parameters()}
    if model.config.tie_word_embeddings:
        numel.pop("lm_head.weight", None)
    ok = True
    with safe_open(path, framework="pt") as f:
        meta = f.metadata() or {}
        seen = set()
        for k in f.keys():
            t = f.get_tensor(k).float()
            for suf in (".exp_avg_sq", ".exp_avg"):
                if k.endswith(suf):
                    name = k[: -len(suf)]
                    break
            else:
                ok = fail(f"optimizer: tensor {k} is neither .exp_avg nor .exp_avg_sq")
                continue
            seen.add(name)
            if name not in numel:
                ok = fail(f"optimizer: {k} names no parameter of the model")
            elif t.numel() != numel[name]:
                ok = fail(f"optimizer: {k} has {t.numel()} values, the parameter {numel[name]}")
            if not torch.isfinite(t).all():
                ok = fail(f"optimizer: {k} is not finite")
            if suf == ".exp_avg_sq" and (t < 0).any():
                ok = fail(f"optimizer: {k} has negative values")
            if int(meta.get(name + ".step", "0")) < 1:
                ok = fail(f"optimizer: metadata {name}.step missing or < 1")
        missing = set(numel) - seen
        if missing:
            ok = fail(f"optimizer: no state for {sorted(missing)[:5]}")
        if "mempo.global_step" not in meta:
            ok = fail("optimizer: metadata mempo.global_step missing")
        if ok:
            print(f"ok   optimizer: {len(seen)} parameters, global step {meta['mempo.global_step']}, "
                  f"plan step {meta.get('mempo.plan_step')}/{meta.get('mempo.plan_steps')}")
    return ok


def check_metrics(d):
    path = os.path.join(d, "update_metrics.jsonl")
    if not os.path.exists(path):
        return fail(f"metrics: {path} missing")
    rows = [json.loads(line) for line in open(path) if line.strip()]
    ok = True
    for i, r in enumerate(rows):
        for key in ("loss", "grad_norm", "lr"):
            if not math.isfinite(r.get(key, float("nan"))):
                ok = fail(f"metrics: row {i + 1}: {key} = {r.get(key)}")
        if i and r["step"] != rows[i - 1]["step"] + 1:
            ok = fail(f"metrics: row {i + 1}: step {r['step']} after {rows[i - 1]['step']}")
    if ok and rows:
        last = rows[-1]
        print(f"ok   metrics: {len(rows)} rows; last step {last['step']} loss {last['loss']:.6g} "
              f"clipfrac {last.get('pg_clipfrac', 0):.3g} kl {last.get('kl', 0):.3g} grad norm {last['grad_norm']:.4g} "
              f"drift mean/max {last.get('logprob_drift_mean', 0):.3g}/{last.get('logprob_drift_max', 0):.3g}")
    return ok


def check_moved(d, before):
    a, b = stored(before), stored(d)
    ok = True
    worst, total = {}, 0.0
    for name, t in b.items():
        if name not in a:
            continue
        if not torch.isfinite(t).all():
            ok = fail(f"moved: {name} is not finite")
        diff = (t - a[name]).abs().max().item()
        group = name.split(".layers.")[0] if ".layers." not in name else "layers." + name.rsplit(".", 2)[-2]
        worst[group] = max(worst.get(group, 0.0), diff)
        total = max(total, diff)
    if total == 0:
        ok = fail(f"moved: no parameter of {d} differs from {before}")
    elif ok:
        print("ok   moved: max |Δθ| " + ", ".join(f"{g} {v:.3g}" for g, v in sorted(worst.items())))
    return ok


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dir")
    ap.add_argument("golden")
    ap.add_argument("--before", help="the checkpoint the update started from")
    ap.add_argument("--device", default="cpu")
    args = ap.parse_args()
    torch.manual_seed(0)
    model, ok = check_load(args.dir, args.device)
    ok &= check_logits(model, args.golden, args.device)
    ok &= check_optimizer(args.dir, model)
    ok &= check_metrics(args.dir)
    if args.before:
        ok &= check_moved(args.dir, args.before)
    print("PASS" if ok else "FAIL")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
