#!/usr/bin/env bash
# --mem-skip-repeats on MemPO's updates (issue 18, CPU, 2026-12-06, fourth
# session): run 1 of each of the five PRESET=reader cold starts of
# ../three-seeds (seeds 1-3) and its seed 4 and 5 runs again, from the same
# SFT model and reader (FROM_SFT) and the same RL seed, with MemPO's steps
# that repeat the step before left out of the memory advantage; GRPO runs
# again as it did (its numbers came out the same, bit for bit on every seed).
# Then runs 2 and 3 of seeds 1-3 with their RL seeds (seed 1: 2 and 3, as
# its runs were made; seeds 2, 3: 100*S + r) and check.sh over the five (run
# 1 each) and over seeds 1-3 with three runs each. About 3.5 minutes a run on
# two cores. RUNS: the three-seeds folder's runs (seedS with sft/,
# sft-react/, reader/ and world/; seed 1's world is data/world).
set -euo pipefail
cd "$(dirname "$0")/../../../../../.."
RUNS=${RUNS:?the runs of ../three-seeds} OUT=${OUT:-runs/skip-repeats}
for s in 1 2 3 4 5; do
	world=(WORLD=$RUNS/seed$s/world); [ $s = 1 ] && world=()
	env PRESET=reader SEED=$s FROM_SFT=$RUNS/seed$s "${world[@]}" OUT=$OUT/seed$s MEM_FLAGS="--mem-skip-repeats" EVAL_K="2 4" \
		bash scripts/demo/run.sh
done
for s in 1 2 3; do
	for r in 2 3; do
		world=(WORLD=$RUNS/seed$s/world) rs=$(( 100 * s + r )); [ $s = 1 ] && world=() rs=$r
		env PRESET=reader SEED=$s RL_SEED=$rs FROM_SFT=$RUNS/seed$s "${world[@]}" OUT=$OUT/seed$s-rl$r MEM_FLAGS="--mem-skip-repeats" \
			EVAL_K="2 4" bash scripts/demo/run.sh
	done
done
OUT=$OUT SEEDS="1 2 3 4 5" RL_RUNS=1 EVAL_K="2 4" REUSE=1 bash scripts/demo/check.sh > $OUT/check-seeds1-5.txt || true
OUT=$OUT SEEDS="1 2 3" RL_RUNS=3 EVAL_K="2 4" REUSE=1 bash scripts/demo/check.sh > $OUT/check-seeds1-3-3runs.txt || true
