#!/usr/bin/env bash
# mempo-update --mem-per-objective on the CPU (PRESET=gpu, the shipped
# MEM_FLAGS plus the knob), MemPO alone from a fresh cold start (seed 4,
# made by `PRESET=gpu SEED=4 EVAL_K="2 4 8" bash scripts/demo/run.sh` at
# 6c913a7 into $E/seed4, its MemPO and GRPO at RL seed 4 the reference):
# without a floor (f0) and with --mem-std-floor 0.05 (f05), two at a time.
# Then, with RL seed 401, the same cold start's MemPO and GRPO (run.sh
# FROM_SFT) beside per-objective MemPO with the floor; then the same with RL
# seed 402 (the next session, commands built at 8ceac36); then a second cold
# start from scratch (seed 5, the shipped preset's MemPO and GRPO) with
# per-objective MemPO beside its RL from the moment its reader is trained
# (commands built at 85d987c, whose forward gives the same bits; the cold
# start with run.sh's own BLAS threads, 2).
#   usage: E=/tmp/cs BIN=… bash run.sh  (from the repository root)
set -u
. scripts/demo/mempo-only.sh
export PRESET=gpu EVAL_K="2 4 8" OPENBLAS_NUM_THREADS=1
base="--mem-pool step --mem-skip-answer --alpha 0.5 --mem-per-objective"
mkdir -p /tmp/po/f0 /tmp/po/f05
(N=/tmp/po/f0 MEM_FLAGS="$base" mempo_only 4 4) &
(N=/tmp/po/f05 MEM_FLAGS="$base --mem-std-floor 0.05" mempo_only 4 4) &
wait
(SEED=4 RL_SEED=401 FROM_SFT=$E/seed4 OUT=$E/seed4-rl1 bash scripts/demo/run.sh > $E/seed4-rl1.log 2>&1) &
(N=/tmp/po/f05 MEM_FLAGS="$base --mem-std-floor 0.05" mempo_only 4 401) &
wait
(SEED=4 RL_SEED=402 FROM_SFT=$E/seed4 OUT=$E/seed4-rl2 bash scripts/demo/run.sh > $E/seed4-rl2.log 2>&1) &
(N=/tmp/po/f05 MEM_FLAGS="$base --mem-std-floor 0.05" mempo_only 4 402) &
wait
t=$(date +%s)
(unset OPENBLAS_NUM_THREADS; SEED=5 OUT=$E/seed5 bash scripts/demo/run.sh > $E/seed5.log 2>&1; echo "cold start seed 5 rc $? wall $(( $(date +%s) - t ))s" >> /tmp/po/f05/done.txt) &
until grep -q "== mempo iteration 1/" $E/seed5.log 2>/dev/null; do sleep 10; done
(N=/tmp/po/f05 MEM_FLAGS="$base --mem-std-floor 0.05" mempo_only 5 5) &
wait
# Seed 5's shipped MemPO and GRPO at two more RL seeds, from its cold start.
for r in 2 3; do
	(SEED=5 RL_SEED=50$r FROM_SFT=$E/seed5 OUT=$E/seed5-rl$r bash scripts/demo/run.sh > $E/seed5-rl$r.log 2>&1) &
done
wait
