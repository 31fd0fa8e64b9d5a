#!/usr/bin/env bash
# The two device commands of 2026-12-02 (one H200, the second on the same warm machine a few seconds later),
# from the repository root; .work/lead15/b.tgz held bin/{mempo-update,mempo-rollout,cuda.test,update.test},
# lib/ (OpenBLAS), tokenizer.json, lora7b.py, bench_7b_torch.py and env.sh built from main at 1e8f101.
B=/tmp/b7; mkdir -p $B && tar -xzf .work/lead15/b.tgz -C $B && PART=1 DEADLINE=565 timeout 592 bash scripts/gpu/loop_7b.sh $B
B=/tmp/b7; PART=2 DEADLINE=560 timeout 590 bash scripts/gpu/loop_7b.sh $B
