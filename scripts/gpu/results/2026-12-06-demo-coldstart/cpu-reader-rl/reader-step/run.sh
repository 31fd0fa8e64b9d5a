#!/usr/bin/env bash
# The reader trained on answer rows from a drawn step's memory
# (READER_MEMORY=step) instead of subsets of the final memory, seeds 4 and 1,
# whole PRESET=reader runs (issue 18, CPU, 2026-12-06, fourth session; about
# 18 minutes a seed on two cores). The SFT models and GRPO came out bit for
# bit those of ../three-seeds (seed 1) and its seed 4 run. Then memdrops on
# MemPO's training rollouts.
set -euo pipefail
cd "$(dirname "$0")/../../../../../.."
OUT=${OUT:-runs/reader-step}
for s in 4 1; do
	PRESET=reader SEED=$s READER_MEMORY=step OUT=$OUT/seed$s EVAL_K="2 4" bash scripts/demo/run.sh
	go run ./scripts/memdrops $OUT/seed$s/mempo/rollouts-{1,2,3,4,5,6}.parquet > $OUT/seed$s-memdrops-mempo.txt
done
