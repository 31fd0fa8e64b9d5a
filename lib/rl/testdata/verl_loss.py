"""Writes verl_loss.json: an autograd oracle for lib/rl's Loss.

The functions below restate verl's core_algos formulas (compute_policy_loss_vanilla
with the Δ clamp and dual clip, kl_penalty k1/k2/low_var_kl, agg_loss) as given in
shared/reference/reference-impls.md §4, in float64 torch, and let autograd take
d(loss)/d(logp). Rows are step samples: rows 0-2 are the three steps of trajectory 0,
rows 3-5 those of trajectory 1; columns past a row's length are padding. The Go test
rebuilds the same batch, calls Loss for every (aggregation, KL estimator) pair and
compares loss, per-token coefficients and metrics.

    python3 lib/rl/testdata/verl_loss.py lib/rl/testdata/verl_loss.json
"""
import json
import sys

import torch

torch.manual_seed(1)
B, T = 6, 5
lengths = [2, 5, 3, 1, 4, 5]
traj_of_row = [0, 0, 0, 1, 1, 1]
old = (-0.1 - 3 * torch.rand(B, T)).float()
logp = (old + 0.6 * torch.randn(B, T)).float()
ref = (old + 0.4 * torch.randn(B, T)).float()
adv = torch.randn(B, T).float()
ent = torch.rand(B, T).float()
mask = torch.zeros(B, T)
for r, n in enumerate(lengths):
    mask[r, :n] = (torch.rand(n) > 0.2).float()
    mask[r, 0] = 1.0
# Force the rare branches.
logp[0, 1] = old[0, 1] + 1.5; adv[0, 1] = -1.0; mask[0, 1] = 1         # dual clip (r = 4.48 > 3)
logp[1, 2] = old[1, 2] + 25.0; adv[1, 2] = -0.5; mask[1, 2] = 1  # Δ clamp at 20, then dual clip
logp[4, 0] = old[4, 0] - 0.5; adv[4, 0] = -2.0           # A < 0 below the clip range
ref[2, 1] = logp[2, 1] + 5.0; mask[2, 1] = 1             # k3 above 10: clamped
ref[5, 3] = logp[5, 3] - 30.0; mask[5, 3] = 1            # k = −30 pre-clamped to −20

CLIP, C, BETA, ENT = 0.2, 3.0, 0.1, 0.01


def masked_mean(v, m):
    return (v * m).sum() / (m.sum() + 1e-8)


def policy_loss(old_lp, lp, a, m):
    neg_kl = torch.clamp(lp - old_lp, -20.0, 20.0)
    ratio = torch.exp(neg_kl)
    ppo_kl = masked_mean(-neg_kl, m)
    l1 = -a * ratio
    l2 = -a * torch.clamp(ratio, 1 - CLIP, 1 + CLIP)
    clip1 = torch.maximum(l1, l2)
    clipfrac = masked_mean(torch.gt(l2, l1).double(), m)
    l3 = -a * C
    clip2 = torch.min(l3, clip1)
    lower = masked_mean(torch.gt(clip1, l3).double() * (a < 0).double(), m)
    pg = torch.where(a < 0, clip2, clip1)
    return pg, clipfrac, ppo_kl, lower


def kl_penalty(lp, rf, kind):
    if kind == "k1":
        return lp - rf
    if kind == "k2":
        return 0.5 * (lp - rf) ** 2
    kl = torch.clamp(rf - lp, -20, 20)
    kld = torch.exp(kl) - kl - 1
    return torch.clamp(kld, -10, 10)


def agg(L, M, mode):
    if mode == "token-mean":
        return (L * M).sum() / M.sum()
    if mode in ("seq-mean-token-sum", "seq-mean-token-mean"):
        s = (L * M).sum(-1)
        if mode == "seq-mean-token-mean":
            s = s / (M.sum(-1) + 1e-8)
        keep = M.sum(-1) > 0
        return s[keep].sum() / keep.sum()
    # trajectory (MemPO Eq. 10): mean over each trajectory's tokens across its
    # steps, then mean over trajectories.
    per = []
    for tr in sorted(set(traj_of_row)):
        rows = [r for r, t in enumerate(traj_of_row) if t == tr]
        n = M[rows].sum()
        if n > 0:
            per.append((L[rows] * M[rows]).sum() / n)
    return torch.stack(per).mean()


out = {"torch": torch.__version__, "clip": CLIP, "clip_c": C, "beta": BETA, "entropy_coef": ENT,
       "lengths": lengths, "traj_of_row": traj_of_row,
       "old": old.tolist(), "logp": logp.tolist(), "ref": ref.tolist(), "adv": adv.tolist(),
       "entropy": ent.tolist(), "mask": mask.tolist(), "cases": []}
M = mask.double()
for mode in ["trajectory", "token-mean", "seq-mean-token-sum", "seq-mean-token-mean"]:
    for kind in ["k3", "k1", "k2"]:
        lp = logp.double().clone().requires_grad_(True)
        pg, clipfrac, ppo_kl, lower = policy_loss(old.double(), lp, adv.double(), M)
        pg_loss = agg(pg, M, mode)
        kl_loss = agg(kl_penalty(lp, ref.double(), kind), M, mode)
        ent_loss = agg(ent.double(), M, mode)
        loss = pg_loss + BETA * kl_loss - ENT * ent_loss
        loss.backward()
        out["cases"].append({"agg": mode, "kl": kind, "loss": loss.item(), "pg_loss": pg_loss.item(),
                             "kl_loss": kl_loss.item(), "entropy": ent_loss.item(),
                             "pg_clipfrac": clipfrac.item(), "pg_clipfrac_lower": lower.item(),
                             "ppo_kl": ppo_kl.item(), "grad": lp.grad.tolist()})

with open(sys.argv[1], "w") as f:
    json.dump(out, f, indent=1)
    f.write("\n")
