#!/usr/bin/env bash
# Runs 2 and 3 of the PRESET=reader cold starts of seeds 4 and 5 (issue 18,
# CPU, 2026-12-06, fifth session), the paper's R^M, RL seeds 100*S + r, from
# the SFT models and readers of ../three-seeds (FROM_SFT); then check.sh over
# the five cold starts with three runs each (seeds 1-3's runs are
# ../three-seeds'). About 4 minutes a run on two cores. RUNS: the
# three-seeds folder's runs (seedS, seedS-rlR; seed 1's world is data/world).
set -euo pipefail
cd "$(dirname "$0")/../../../../../.."
RUNS=${RUNS:?the runs of ../three-seeds}
for s in 4 5; do for r in 2 3; do
	env PRESET=reader SEED=$s RL_SEED=$(( 100 * s + r )) FROM_SFT="$RUNS/seed$s" WORLD="$RUNS/seed$s/world" \
		OUT="$RUNS/seed$s-rl$r" EVAL_K="2 4" bash scripts/demo/run.sh
done; done
OUT=$RUNS SEEDS="1 2 3 4 5" RL_RUNS=3 EVAL_K="2 4" REUSE=1 bash scripts/demo/check.sh > "$RUNS/check-seeds1-5-3runs.txt" || true
