#!/usr/bin/env python3
"""Writes synthetic one-step rollouts (the rollouts JSONL schema of docs/formats.md)
with long contexts, to measure the update's memory and speed at a context length
that a random-weight policy never reaches by itself: random ids, every output token's
stored log-prob -log(vocab) (a random model's is near that), rewards alternating
within each group so that the advantages are not zero.

usage: make_long_rollouts.py OUT.jsonl [--tasks 2] [--group 8] [--context 4000]
       [--output 96] [--vocab 151643] [--seed 1]
"""
import argparse
import json
import math
import random


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--tasks", type=int, default=2)
    ap.add_argument("--group", type=int, default=8)
    ap.add_argument("--context", type=int, default=4000)
    ap.add_argument("--output", type=int, default=96)
    ap.add_argument("--vocab", type=int, default=151643)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    r = random.Random(a.seed)
    lp = -math.log(a.vocab)
    with open(a.out, "w") as f:
        for t in range(a.tasks):
            for g in range(a.group):
                ctx = [r.randrange(a.vocab) for _ in range(a.context)]
                out = [r.randrange(a.vocab) for _ in range(a.output)]
                step = {"index": 0, "context_ids": ctx, "output_ids": out, "logprobs": [lp] * len(out),
                        "mem_start": -1, "mem_end": -1, "action": "answer", "doc_ids": [], "finish": "length",
                        "context_tokens": len(ctx), "output_tokens": len(out),
                        "p_gold_mem": None, "p_gold_hist": None, "r_mem": None}
                row = {"task_id": f"long{t}", "data_source": "synthetic", "k": 1, "questions": ["q"], "golds": [["x"]],
                       "group": t, "sample": g, "policy": "synthetic", "keep": "1", "seed": a.seed,
                       "temperature": 1.0, "top_p": 1.0, "top_k": 0, "steps": [step], "answer": "", "answers": [],
                       "format_ok": False, "reward_task": float((t + g) % 2), "em": [0.0], "f1": [0.0],
                       "turns": 1, "total_tokens": len(ctx) + len(out), "peak_tokens": len(ctx) + len(out), "wall_s": 0.0}
                f.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
