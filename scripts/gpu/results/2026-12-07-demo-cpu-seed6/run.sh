#!/usr/bin/env bash
# Issue 18 on the CPU: a third cold start from scratch at the shipped
# PRESET=gpu (seed 6; commands built at 45afd0b into .work/w12/bin), its MemPO
# and GRPO at RL seed 6, then at RL seeds 602 and 603 from the same cold start
# (run.sh FROM_SFT, two at a time, one BLAS thread each). The cold starts of
# seeds 4 and 5 are ../2026-12-07-demo-per-objective-cpu's.
#   usage: E=/tmp/cs bash run.sh   (from the repository root)
set -u
E=${E:-/tmp/cs}
export PRESET=gpu EVAL_K="2 4 8" BIN=${BIN:-.work/w12/bin}
t=$(date +%s)
SEED=6 OUT=$E/seed6 bash scripts/demo/run.sh > $E/seed6.log 2>&1
echo "cold start seed 6 rc $? wall $(( $(date +%s) - t ))s" >> $E/done6.txt
t=$(date +%s)
for r in 2 3; do
	(export OPENBLAS_NUM_THREADS=1
	 SEED=6 RL_SEED=60$r FROM_SFT=$E/seed6 OUT=$E/seed6-rl$r bash scripts/demo/run.sh > $E/seed6-rl$r.log 2>&1
	 echo "seed6 rl60$r rc $? wall $(( $(date +%s) - t ))s" >> $E/done6.txt) &
done
wait
