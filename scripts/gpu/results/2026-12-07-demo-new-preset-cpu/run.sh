#!/usr/bin/env bash
# Issue 18 on the CPU: the new PRESET=gpu (both-rows reader, per-objective R^M,
# --mem-pool step --mem-skip-answer) from scratch on two fresh seeds, 4 and 5,
# one OpenBLAS thread each, the two in parallel; then a second and a third RL
# run from each cold start (RL seeds 100·S + 2, 100·S + 3). Commands built at
# dbe979b (.work/mempool8/bin), scripts at 44f7ab7. SEEDS (default 4 5) and
# RES (where the pooled scores go; default this folder, as for seeds 4 and 5)
# let it run again on other seeds: seeds 6 and 7 ran as
#   SEEDS="6 7" E=/tmp/fresh67 RES=<this folder>/seeds6-7 run.sh
cd "$(dirname "$0")/../../../.."
export OPENBLAS_CORETYPE=Zen OPENBLAS_NUM_THREADS=1
export BIN=${BIN:-$PWD/bin} PRESET=gpu DEVICE=cpu EVAL_K="2 4 8"
E=${E:-/tmp/fresh} SEEDS=${SEEDS:-4 5} RES=${RES:-scripts/gpu/results/2026-12-07-demo-new-preset-cpu}; mkdir -p $E $RES
run() { local s=$1
	SEED=$s OUT=$E/seed$s bash scripts/demo/run.sh > $E/seed$s.log 2>&1 &&
	for r in 2 3; do
		SEED=$s RL_SEED=$((100 * s + r)) FROM_SFT=$E/seed$s OUT=$E/seed$s-rl$r bash scripts/demo/run.sh > $E/seed$s-rl$r.log 2>&1
	done; }
for s in $SEEDS; do run $s & done; wait
a=()
for s in $SEEDS; do for d in $E/seed$s $E/seed$s-rl2 $E/seed$s-rl3; do for k in 2 4 8; do
	a+=(--rollouts $d/eval/mempo-k$k.parquet --label mempo --rollouts $d/eval/grpo-k$k.parquet --label grpo); done; done
	for k in 2 4 8; do a+=(--rollouts $E/seed$s/eval/sft-k$k.parquet --label sft); done; done
$BIN/mempo-score "${a[@]}" --out $RES/pooled-scores.jsonl
b=()
for s in $SEEDS; do for d in $E/seed$s $E/seed$s-rl2 $E/seed$s-rl3; do for i in $(seq 1 12); do
	b+=(--rollouts $d/mempo/rollouts-$i.parquet --label mempo-$i --rollouts $d/grpo/rollouts-$i.parquet --label grpo-$i); done; done; done
$BIN/mempo-score "${b[@]}" --out $RES/pooled-train.jsonl
