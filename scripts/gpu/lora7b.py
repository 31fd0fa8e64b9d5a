#!/usr/bin/env python3
"""Helpers of scripts/gpu/lora.sh's Qwen2.5-7B LoRA measurement (run on the GPU machine).

    lora7b.py prompts --out P.jsonl --tasks 8 --len 256 [--lens 128,3968,...] --vocab 152064
        one JSONL row per task: {"task": i, "ids": [...]} with fixed pseudo-random ids (seed 1); --lens gives task i
        the i-th length (cycling) instead of --len.
    lora7b.py rollouts --gen G.jsonl --out R.jsonl
        `mempo-rollout generate --n 16` output -> a rollouts file (records.Rollout JSON): one single-step trajectory
        per generated row, grouped by task, the generator's log-probs as the old log-probs, a <mem> span on the first
        16 output ids, and rewards that differ within each group (a function of task and sample only).
    lora7b.py peft-step --model DIR --rollouts R.jsonl --rank 64 --alpha 128 --mini-batch 64 --micro-tokens 8192
        the same LoRA update step in transformers + peft (bf16 base, fp32 adapter as peft keeps it, SDPA attention,
        gradient checkpointing as mempo's --recompute): for each mini-batch, a no-grad forward for the ratio's
        log-probs, then forward + backward of the weighted token log-probs, then fused AdamW on the adapter; the
        reference pass (adapter disabled, no grad) over all rollouts is timed on its own, as mempo-update does it
        once before the steps. Prints BENCH lines with tokens/s and torch's peak memory.
"""
import argparse
import json
import random
import sys
import time


def prompts(a):
    r = random.Random(1)
    with open(a.out, "w") as f:
        lens = [int(x) for x in a.lens.split(",")] if a.lens else [a.len]
        for t in range(a.tasks):
            lo = min(1000, a.vocab // 4)
            ids = [r.randrange(lo, a.vocab - lo) for _ in range(lens[t % len(lens)])]
            f.write(json.dumps({"task": t, "ids": ids}) + "\n")


def rollouts(a):
    rows = [json.loads(l) for l in open(a.gen) if l.strip()]
    with open(a.out, "w") as f:
        for row in rows:
            t, s = row["task"], row.get("sample", 0)
            ctx, out, lp = row["ids"], row["output_ids"], row["output_logprobs"]
            step = {"index": 0, "context_ids": ctx, "output_ids": out, "logprobs": lp, "mem_start": 0,
                    "mem_end": min(16, len(out)), "action": "answer", "doc_ids": [], "context_tokens": len(ctx),
                    "output_tokens": len(out), "r_mem": ((7 * s + 3 * t) % 5) / 10, "p_gold_mem": None, "p_gold_hist": None}
            ro = {"task_id": f"t{t}", "data_source": "synthetic", "k": 1, "questions": ["q"], "golds": [["x"]],
                  "group": t, "sample": s, "policy": "base", "keep": "1", "seed": 1, "temperature": 1, "top_p": 1,
                  "top_k": 0, "steps": [step], "answer": "x", "answers": ["x"], "format_ok": True,
                  "reward_task": float((s * 5 + t) % 3 == 0), "em": [0], "f1": [0], "turns": 1,
                  "total_tokens": len(ctx) + len(out), "peak_tokens": len(ctx) + len(out), "wall_s": 0}
            f.write(json.dumps(ro) + "\n")
    print(f"{len(rows)} rollouts -> {a.out}")


def peft_step(a):
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    dev = "cuda"
    t0 = time.time()
    model = AutoModelForCausalLM.from_pretrained(a.model, dtype=torch.bfloat16, attn_implementation="sdpa").to(dev)
    cfg = LoraConfig(r=a.rank, lora_alpha=a.alpha, lora_dropout=0.0, task_type="CAUSAL_LM",
                     target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"])
    model = get_peft_model(model, cfg)
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model.config.use_cache = False
    load_s = time.time() - t0
    params = [p for p in model.parameters() if p.requires_grad]
    n_train = sum(p.numel() for p in params)
    opt = torch.optim.AdamW(params, lr=1e-5, weight_decay=0.01, fused=True)
    rows = [json.loads(l) for l in open(a.rollouts) if l.strip()]
    seqs, starts = [], []
    for r in rows:
        st = r["steps"][0]
        seqs.append(st["context_ids"] + st["output_ids"])
        starts.append(len(st["context_ids"]))

    def batches(idx):
        cur, tok = [], 0
        for i in idx:
            if cur and (tok + len(seqs[i]) > a.micro_tokens or len(seqs[i]) != len(seqs[cur[0]])):
                yield cur
                cur, tok = [], 0
            cur.append(i)
            tok += len(seqs[i])
        if cur:
            yield cur

    def logps(mb, grad):
        ids = torch.tensor([seqs[i] for i in mb], device=dev)
        logits = model(input_ids=ids).logits[:, :-1].float()
        lp = torch.log_softmax(logits, -1).gather(-1, ids[:, 1:, None])[..., 0]
        mask = torch.zeros_like(lp)
        for k, i in enumerate(mb):
            mask[k, starts[i] - 1:] = 1
        return lp, mask

    def ref_pass():
        with torch.no_grad(), model.disable_adapter():
            for mb in batches(range(len(seqs))):
                logps(mb, False)

    def step(idx):
        with torch.no_grad():
            for mb in batches(idx):
                logps(mb, False)
        for mb in batches(idx):
            lp, mask = logps(mb, True)
            loss = -(lp * mask).sum() / mask.sum()
            loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)

    torch.cuda.synchronize()
    t0 = time.time()
    ref_pass()
    torch.cuda.synchronize()
    ref_s = time.time() - t0
    mbs = [list(range(i, min(i + a.mini_batch, len(seqs)))) for i in range(0, len(seqs), a.mini_batch)]
    times = []
    for idx in mbs:
        torch.cuda.synchronize()
        t0 = time.time()
        step(idx)
        torch.cuda.synchronize()
        times.append(time.time() - t0)
    tok = [sum(len(seqs[i]) for i in idx) for idx in mbs]
    all_tok = sum(len(s) for s in seqs)
    print(f"BENCH peft load_s {load_s:.1f} trainable {n_train} ref_pass_s {ref_s:.2f} ref_tokens_per_s {all_tok / ref_s:.0f}")
    for k, (t, n) in enumerate(zip(times, tok)):
        print(f"BENCH peft step {k} tokens {n} wall_s {t:.2f} tokens_per_s {n / t:.0f}")
    print(f"BENCH peft peak_allocated_gib {torch.cuda.max_memory_allocated() / 2**30:.1f} "
          f"peak_reserved_gib {torch.cuda.max_memory_reserved() / 2**30:.1f}")


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("prompts")
    p.add_argument("--out", required=True)
    p.add_argument("--tasks", type=int, default=8)
    p.add_argument("--len", type=int, default=256)
    p.add_argument("--lens", default="")
    p.add_argument("--vocab", type=int, default=152064)
    p = sub.add_parser("rollouts")
    p.add_argument("--gen", required=True)
    p.add_argument("--out", required=True)
    p = sub.add_parser("peft-step")
    p.add_argument("--model", required=True)
    p.add_argument("--rollouts", required=True)
    p.add_argument("--rank", type=int, default=64)
    p.add_argument("--alpha", type=float, default=128)
    p.add_argument("--mini-batch", type=int, default=64)
    p.add_argument("--micro-tokens", type=int, default=8192)
    a = ap.parse_args()
    {"prompts": prompts, "rollouts": rollouts, "peft-step": peft_step}[a.cmd](a)


if __name__ == "__main__":
    sys.exit(main())
