#!/usr/bin/env bash
# Three cold starts, three RL runs each, R^M scored by a reader per objective
# (issue 18, CPU, 2026-12-06): make demo-check at PRESET=small with the lossy
# expert and answer rows, the reader (SCORE_READER=2) and the per-objective
# form, RL and test tasks of k = 2 and 4, three RL runs per method and seed.
# Then, per seed 2 and 3, MemPO with the policy scoring its own memories (the
# joint form, the default) from the same cold start and RL seed as run 1 —
# the ablation beside it. Run from the repository root; about 25 minutes a
# seed on two cores for the cold start and reader, 5 for each RL run.
#   OUT=runs/reader-check bash run.sh
# Seed 1 here was run before check.sh named its further runs: its cold start
# is ../../cpu-scorer-copy's step-row run with make-reader.sh's reader (the
# same stages run.sh runs), and its runs 2 and 3 used RL_SEED 2 and 3 where
# check.sh gives 102 and 103; seeds 2 and 3 are check.sh's own.
set -euo pipefail
cd "$(dirname "$0")/../../../../../.."
OUT=${OUT:-runs/reader-check}
# (PRESET=reader, added after these runs, holds exactly the knobs they were
# made with: small's sizes, EXPERT_DROP=0.35 ANSWER_ROWS=0.25 SCORE_READER=2
# SCORE_PER_OBJECTIVE=1 GRPO_RM=1 RL_K="2 4".)
export PRESET=reader EVAL_K="2 4"
SEEDS="1 2 3" RL_RUNS=3 OUT=$OUT make demo-check || true
for s in 2 3; do   # the policy scoring its own memories in the joint form
	SEED=$s FROM_SFT=$OUT/seed$s WORLD=$OUT/seed$s/world SCORE_READER=0 SCORE_PER_OBJECTIVE=0 OUT=$OUT/seed$s-plain bash scripts/demo/run.sh
done
