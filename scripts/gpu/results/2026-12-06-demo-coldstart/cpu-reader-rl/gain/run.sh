#!/usr/bin/env bash
# --mem-baseline previous on MemPO's updates (issue 18, CPU, 2026-12-06,
# fifth session): R^M pooled as the gain of each memory over the one before
# (a memory written again unchanged scores 0). Run 1 of each of the five
# PRESET=reader cold starts of ../three-seeds, then runs 2 and 3 of seeds
# 1-3 (RL seeds as there: seed 1's 2 and 3, seeds 2 and 3's 100*S + r), from
# the same SFT models and readers (FROM_SFT) with the same RL seeds, so only
# MemPO's updates differ (GRPO came out the same bit for bit in all eleven
# runs); then check.sh over both sets. About 3.5-4.5 minutes a run on two
# cores, one at a time. RUNS: the three-seeds folder's runs (seedS with
# sft/, sft-react/, reader/ and world/; seed 1's world is data/world).
set -euo pipefail
cd "$(dirname "$0")/../../../../../.."
RUNS=${RUNS:?the runs of ../three-seeds} OUT=${OUT:-runs/gain}
one() {
	local s=$1 r=$2 world=(WORLD=$RUNS/seed$1/world) rs=$1 out=$OUT/seed$1
	[ "$s" = 1 ] && world=()
	if [ "$r" != 1 ]; then rs=$(( 100 * s + r )); [ "$s" = 1 ] && rs=$r; out=$OUT/seed$s-rl$r; fi
	env PRESET=reader SEED="$s" RL_SEED=$rs FROM_SFT="$RUNS/seed$s" "${world[@]}" OUT="$out" \
		MEM_FLAGS="--mem-baseline previous" EVAL_K="2 4" bash scripts/demo/run.sh
}
for s in 4 1 2 3 5; do one $s 1; done
for s in 1 2 3; do for r in 2 3; do one $s $r; done; done
OUT=$OUT SEEDS="1 2 3" RL_RUNS=3 EVAL_K="2 4" REUSE=1 bash scripts/demo/check.sh > "$OUT/check-seeds1-3-3runs.txt" || true
OUT=$OUT SEEDS="1 2 3 4 5" RL_RUNS=1 EVAL_K="2 4" REUSE=1 bash scripts/demo/check.sh > "$OUT/check-seeds1-5.txt" || true
