#!/usr/bin/env bash
# Issue 18's "a seed in ten minutes on one GPU": one PRESET=gpu run from
# scratch (seed 1: world, expert, SFT, reader, MemPO and GRPO, evaluation at
# k = 2, 4, 8), alone on the machine, timed. Detached so that a call cut off
# at its limit leaves it running; waits up to 560 s and keeps the log.
#   carry: .work/mempool8.tar.xz (commands built at dbe979b)
set -uo pipefail
B=/tmp/mempool8; [ -x $B/bin/mempo-rollout ] || tar -xJf .work/mempool8.tar.xz -C /tmp
. scripts/gpu/env.sh
gpu_env $B/lib
export BIN=$B/bin DEVICE=cuda PRESET=gpu EVAL_K="2 4 8"
mkdir -p "$OUT"; rm -f /tmp/lone.done
(setsid nohup bash -c 't=$(date +%s); SEED=1 OUT=/tmp/lone bash scripts/demo/run.sh > /tmp/lone.log 2>&1
	echo "rc $? wall $(( $(date +%s) - t ))s" > /tmp/lone.done' > /dev/null 2>&1 &)
for _ in $(seq 112); do [ -f /tmp/lone.done ] && break; sleep 5; done
cat /tmp/lone.done; cp /tmp/lone.log "$OUT/"
nvidia-smi --query-gpu=name --format=csv
