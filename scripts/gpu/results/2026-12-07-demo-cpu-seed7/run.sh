#!/usr/bin/env bash
# Issue 18 on the CPU: a fourth cold start from scratch at the shipped
# PRESET=gpu (seed 7; commands built at 45afd0b into .work/w12/bin), its MemPO
# and GRPO at RL seed 7, and at RL seeds 702 and 703 from the same cold start,
# started as soon as the cold start's own RL began (its sft/ and reader/
# written; the three pipelines then share the two cores, the further ones on
# one BLAS thread each). Decided before any of its numbers: make demo-check's
# comparisons on seeds 4–7 pooled and on 5, 6, 7 (../2026-12-07-demo-cpu-seed6/check.sh).
#   usage: E=/tmp/cs bash run.sh   (from the repository root)
set -u
E=${E:-/tmp/cs}
export PRESET=gpu EVAL_K="2 4 8" BIN=${BIN:-.work/w12/bin}
SEED=7 OUT=$E/seed7 bash scripts/demo/run.sh > $E/seed7.log 2>&1 &
until grep -q "^== mempo iteration 1/" $E/seed7.log 2>/dev/null; do sleep 10; done
t=$(date +%s)
for r in 2 3; do
	(export OPENBLAS_NUM_THREADS=1
	 SEED=7 RL_SEED=70$r FROM_SFT=$E/seed7 OUT=$E/seed7-rl$r bash scripts/demo/run.sh > $E/seed7-rl$r.log 2>&1
	 echo "seed7 rl70$r rc $? wall $(( $(date +%s) - t ))s" >> $E/done7.txt) &
done
wait
