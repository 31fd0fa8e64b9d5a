"""Writes torch_adamw.json: an oracle for lib/optim from PyTorch and transformers.

Six optimizer steps of torch.optim.AdamW (single-tensor path, foreach=False, CPU,
float32) on three small named parameters, with torch.nn.utils.clip_grad_norm_
(max_norm 1.0) before every step and the learning rate from transformers'
get_cosine_with_min_lr_schedule_with_warmup (warmup 2, total 6, min_lr_rate 0.1,
peak 0.05), stepped after each optimizer step as the HF Trainer does. Parameter
"c" has no gradient at step index 2 (torch skips it). Gradients are scaled so
that some steps clip and others do not.

Run where torch and transformers are installed:
    python3 lib/optim/testdata/torch_adamw.py lib/optim/testdata/torch_adamw.json
"""
import json
import sys

import torch
import transformers
from transformers import get_cosine_with_min_lr_schedule_with_warmup

torch.manual_seed(0)
shapes = {"a": 5, "b": 4, "c": 3}
params = {n: torch.nn.Parameter(torch.randn(k, dtype=torch.float32)) for n, k in shapes.items()}
order = ["a", "b", "c"]
plist = [params[n] for n in order]
cfg = dict(lr=0.05, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)
opt = torch.optim.AdamW(plist, foreach=False, **cfg)
sched = get_cosine_with_min_lr_schedule_with_warmup(opt, num_warmup_steps=2, num_training_steps=6, min_lr_rate=0.1)

out = {
    "torch": torch.__version__,
    "transformers": transformers.__version__,
    "config": {"peak_lr": 0.05, "beta1": 0.9, "beta2": 0.999, "eps": 1e-8, "weight_decay": 0.01,
               "max_norm": 1.0, "warmup": 2, "total": 6, "min_ratio": 0.1},
    "init": {n: params[n].detach().tolist() for n in order},
    "steps": [],
}
scales = [0.2, 3.0, 0.05, 1.5, 0.4, 10.0]
for s, scale in enumerate(scales):
    grads = {}
    for n in order:
        if n == "c" and s == 2:
            params[n].grad = None
            continue
        g = torch.randn(shapes[n], dtype=torch.float32) * scale
        params[n].grad = g.clone()
        grads[n] = g.tolist()
    norm = torch.nn.utils.clip_grad_norm_(plist, max_norm=1.0, foreach=False)
    lr = opt.param_groups[0]["lr"]
    opt.step()
    sched.step()
    st = opt.state
    out["steps"].append({
        "grads": grads,
        "lr": lr,
        "norm": float(norm),
        "params": {n: params[n].detach().tolist() for n in order},
        "exp_avg": {n: st[params[n]]["exp_avg"].tolist() for n in order if params[n] in st},
        "exp_avg_sq": {n: st[params[n]]["exp_avg_sq"].tolist() for n in order if params[n] in st},
        "step": {n: float(st[params[n]]["step"]) for n in order if params[n] in st},
    })
    for p in plist:
        p.grad = None

with open(sys.argv[1], "w") as f:
    json.dump(out, f, indent=1)
    f.write("\n")
