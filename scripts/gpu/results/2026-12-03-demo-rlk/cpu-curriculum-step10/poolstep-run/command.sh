#!/usr/bin/env bash
# The CPU curriculum run of ../../cpu-curriculum-seed1 (seed 1) with MemPO's memory advantage z-scored per step
# index (MEM_FLAGS="--mem-pool step"), its SFT and ReAct checkpoints reused (FROM_SFT). BIN: make build (394c1bd,
# the version of the original run's binaries). From the repository root.
set -uo pipefail
R=runs/rlk-cpu-curriculum-poolstep
export GRPO_RM=1 BIN=bin DEVICE=cpu PRESET=gpu EXPERT_DROP=0.35 ANSWER_ROWS=0.25 SFT_K="1 2 3 4 1 2 3 4 8" SFT_DEMOS=24000
export RL_K="2 4 8" RL_ORDER=curriculum FROM_SFT=runs/rlk-cpu-curriculum/seed1 MEM_FLAGS="--mem-pool step"
T0=$(date +%s)
SEED=1 OUT=$R/seed1 bash scripts/demo/run.sh > $R/seed1.log 2>&1
echo "seed 1 rc $? at $(( $(date +%s) - T0 ))s" >> $R/done.txt
