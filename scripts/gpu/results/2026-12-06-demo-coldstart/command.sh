#!/usr/bin/env bash
# One GPU call for issue 18: a PRESET=gpu cold start (seed 1) and one RL
# iteration of each method, brought back whole (the tiny checkpoints, the
# RL rollouts and the evaluation rollouts), so that the memory reward's
# scorer can be examined on the CPU (scripts/memscore) on the cold start
# the GPU runs used.
#   carry: .work/mempool.tar.xz (as ../2026-12-06-demo-mempool)
set -uo pipefail
B=/tmp/mempool; [ -x $B/bin/mempo-rollout ] || tar -xJf .work/mempool.tar.xz -C /tmp
. scripts/gpu/env.sh
gpu_env $B/lib
export BIN=$B/bin DEVICE=${DEVICE:-cuda} PRESET=gpu SEED=1 ITERS=${ITERS:-2} EVAL_TASKS=${EVAL_TASKS:-32}
R=/tmp/r; mkdir -p $R
time OUT=$R bash scripts/demo/run.sh > $R/run.log 2>&1; echo "rc $?"
cd $R && tar czf $OUT/coldstart.tgz --exclude='optimizer.safetensors' sft sft-react mempo/rollouts-*.parquet grpo/rollouts-*.parquet eval/*.parquet eval/*.jsonl summary.md run.log
ls -la $OUT; tail -3 $R/run.log
