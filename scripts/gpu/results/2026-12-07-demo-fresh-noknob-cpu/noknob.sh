#!/usr/bin/env bash
# Issue 18 on the CPU: is --mem-skip-answer or the cold start behind MemPO's
# result on the fresh seeds 4 and 5? MemPO without the knob
# (MEM_FLAGS="--mem-pool step", PRESET=gpu otherwise) from the cold starts of
# ../2026-12-07-demo-new-preset-cpu (E=/tmp/fresh: seedS/ holds sft/,
# sft-react/, reader/) with the same three RL seeds (S, 100·S + 2, 100·S + 3).
# MemPO only: run.sh is stopped when GRPO starts (its GRPO would equal the
# earlier run's bit for bit: the knob does not touch GRPO's updates), then
# MemPO is evaluated greedily at k = 2, 4, 8 on the earlier run's own test
# tasks. Two runs at a time, one OpenBLAS thread each; commands built at
# dbe979b (.work/mempool8/bin). With RUNS ("S:R …", two chains taking them in
# turn) and MEM_FLAGS set it runs other MemPO variants from other cold starts
# and skips the pooled scores: --alpha 0.5 on seeds 6 and 7 ran as
#   RUNS="6:6 7:703" E=/tmp/fresh67 N=/tmp/alpha05 \
#   MEM_FLAGS="--mem-pool step --mem-skip-answer --alpha 0.5" noknob.sh
cd "$(dirname "$0")/../../../.."
export OPENBLAS_CORETYPE=Zen OPENBLAS_NUM_THREADS=1
export BIN=${BIN:-$PWD/bin} PRESET=gpu DEVICE=cpu EVAL_K="2 4 8" MEM_FLAGS=${MEM_FLAGS:---mem-pool step}
E=${E:-/tmp/fresh} N=${N:-/tmp/noknob}; mkdir -p $N
. scripts/demo/mempo-only.sh
if [ -n "${RUNS:-}" ]; then
	read -r -a runs <<< "$RUNS"
	for c in 0 1; do ( for ((i = c; i < ${#runs[@]}; i += 2)); do mempo_only ${runs[i]%:*} ${runs[i]#*:}; done ) & done
	wait
	exit 0
fi
( mempo_only 4 4; mempo_only 4 402; mempo_only 4 403 ) &
( mempo_only 5 5; mempo_only 5 502; mempo_only 5 503 ) &
wait
# Pooled over the six runs: noknob = MemPO here, knob = MemPO of the earlier
# runs (same cold starts and RL seeds), grpo and sft from the earlier runs.
a=()
for s in 4 5; do for r in $s $((100 * s + 2)) $((100 * s + 3)); do
	d=$(run_dir $E $s $r)
	for k in 2 4 8; do a+=(--rollouts $N/seed$s-$r/eval-mempo-k$k.parquet --label noknob
		--rollouts $d/eval/mempo-k$k.parquet --label knob --rollouts $d/eval/grpo-k$k.parquet --label grpo); done
	done
	for k in 2 4 8; do a+=(--rollouts $E/seed$s/eval/sft-k$k.parquet --label sft); done
done
$BIN/mempo-score "${a[@]}" --out scripts/gpu/results/2026-12-07-demo-fresh-noknob-cpu/pooled-scores.jsonl
