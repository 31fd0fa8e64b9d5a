#!/usr/bin/env python3
"""Check a LoRA adapter written by `mempo-update --lora-rank` with Hugging Face transformers + peft: run where peft
is installed (the GPU machine: transformers 5.17, PyTorch 2.11, peft), everything float32 on the CPU.

    mempo-update --model base/ --rollouts r.jsonl --out lora/ --lora-rank 4 --golden lora-golden.safetensors ...
    mempo-update merge --model base/ --adapter lora/ --out merged/
    python3 scripts/check_peft.py base/ lora/ lora-golden.safetensors [--merged merged/]

GOLDEN is what `--golden` wrote: int64 "ids.k" [T] and float32 "logits.k" [T, V], the logits mempo's own model
gave with the adapter applied unmerged. Checks, one line each (exit 1 when any fails):
  1. load: PeftModel.from_pretrained(base, lora) loads; the config peft read has our r, lora_alpha, lora_dropout and
     target modules; every targeted module of every layer holds lora_A/lora_B equal (exactly) to the file's tensors,
     and its scaling is lora_alpha/r; the file has no tensor peft did not load;
  2. logits: peft's logits (adapter unmerged) on every ids.k match logits.k within TOL of the largest |logit|
     (TOL = 1e-4: float32 on both sides, only the order of the sums differs; --tol for golden files made in bf16);
  3. adapter effect: the base's logits without the adapter differ from logits.k by more than TOL (an adapter that
     did nothing, or was not applied, fails here);
  4. with --merged: peft's merge_and_unload() weights match our `merge` output's within 1e-6 of each weight's
     largest |value|, and the merged model's logits match logits.k within TOL.
"""
import argparse
import json
import os
import sys

import torch
from safetensors import safe_open
from transformers import AutoModelForCausalLM


def fail(msg):
    print(f"FAIL {msg}")
    return False


def load_base(d):
    return AutoModelForCausalLM.from_pretrained(d, dtype=torch.float32, attn_implementation="eager").eval()


def golden_cases(path):
    out = []
    with safe_open(path, framework="pt") as g:
        k = 0
        while f"ids.{k}" in g.keys():
            out.append((g.get_tensor(f"ids.{k}").long(), g.get_tensor(f"logits.{k}").float()))
            k += 1
    return out


def compare(name, model, cases, tol):
    ok = True
    for k, (ids, want) in enumerate(cases):
        with torch.no_grad():
            got = model(ids[None, :]).logits[0].float()
        diff = (got - want).abs().max().item()
        scale = want.abs().max().item()
        line = f"{name} logits.{k}: {ids.numel()} ids, max |diff| {diff:.3g}, max |logit| {scale:.3g}"
        if diff > tol * max(scale, 1.0):
            ok = fail(line)
        else:
            print(f"ok   {line}")
    return ok


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("base")
    ap.add_argument("adapter")
    ap.add_argument("golden")
    ap.add_argument("--merged")
    ap.add_argument("--tol", type=float, default=1e-4)
    args = ap.parse_args()
    import peft
    from peft import PeftModel

    print(f"torch {torch.__version__}, peft {peft.__version__}")
    cases = golden_cases(args.golden)
    if not cases:
        print(f"FAIL {args.golden}: no ids.0")
        sys.exit(1)
    cfg_file = json.load(open(os.path.join(args.adapter, "adapter_config.json")))
    with safe_open(os.path.join(args.adapter, "adapter_model.safetensors"), framework="pt") as f:
        ours = {k: f.get_tensor(k).float() for k in f.keys()}

    ok = True
    base = load_base(args.base)
    model = PeftModel.from_pretrained(base, args.adapter).eval()
    pc = model.peft_config["default"]
    targets = sorted(pc.target_modules)
    if (pc.r, float(pc.lora_alpha), float(pc.lora_dropout), targets) != (
            cfg_file["r"], float(cfg_file["lora_alpha"]), float(cfg_file["lora_dropout"]), sorted(cfg_file["target_modules"])):
        ok = fail(f"load: peft read r={pc.r} alpha={pc.lora_alpha} dropout={pc.lora_dropout} targets={targets}, "
                  f"the file says {cfg_file}")
    seen = set()
    n_mod = 0
    for name, mod in model.named_modules():
        if not hasattr(mod, "lora_A") or "default" not in getattr(mod, "lora_A", {}):
            continue
        n_mod += 1
        key = name.replace("base_model.model.", "", 1)
        for fac in ("A", "B"):
            fname = f"base_model.model.{key}.lora_{fac}.weight"
            w = getattr(mod, f"lora_{fac}")["default"].weight.detach().float()
            if fname not in ours:
                ok = fail(f"load: peft has {fname}, the file does not")
                continue
            seen.add(fname)
            if w.shape != ours[fname].shape or not torch.equal(w, ours[fname]):
                ok = fail(f"load: {fname} differs from the file (shape {tuple(w.shape)} vs {tuple(ours[fname].shape)})")
        want_scale = cfg_file["lora_alpha"] / cfg_file["r"]
        if abs(mod.scaling["default"] - want_scale) > 1e-12:
            ok = fail(f"load: {name} scaling {mod.scaling['default']}, want {want_scale}")
    extra = set(ours) - seen
    if extra:
        ok = fail(f"load: tensors in the file that peft did not load: {sorted(extra)[:5]}")
    layers = base.config.num_hidden_layers
    if n_mod != layers * len(targets):
        ok = fail(f"load: {n_mod} adapted modules, want {layers} layers × {len(targets)} targets")
    if ok:
        print(f"ok   load: {n_mod} adapted modules ({', '.join(targets)}), r {pc.r}, alpha {pc.lora_alpha}, "
              f"{len(seen)} tensors equal to the file")

    ok &= compare("peft", model, cases, args.tol)

    with model.disable_adapter():
        with torch.no_grad():
            ids, want = cases[0]
            d = (model(ids[None, :]).logits[0].float() - want).abs().max().item()
    if d <= args.tol * max(want.abs().max().item(), 1.0):
        ok = fail(f"effect: the base without the adapter gives the same logits (max |diff| {d:.3g}): the adapter does nothing")
    else:
        print(f"ok   effect: base vs adapted logits differ by {d:.3g}")

    if args.merged:
        pm = model.merge_and_unload()
        ours_m = load_base(args.merged)
        sd_p = pm.state_dict()
        worst = 0.0
        for k, v in ours_m.state_dict().items():
            if k not in sd_p:
                continue
            w = sd_p[k].float()
            rel = (v.float() - w).abs().max().item() / max(w.abs().max().item(), 1e-30)
            worst = max(worst, rel)
        if worst > 1e-6:
            ok = fail(f"merged: our merge differs from peft's merge_and_unload by {worst:.3g} (relative)")
        else:
            print(f"ok   merged: weights equal peft's merge_and_unload within {worst:.3g} (relative)")
        ok &= compare("merged", ours_m, cases, args.tol)
    print("PASS" if ok else "FAIL")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
