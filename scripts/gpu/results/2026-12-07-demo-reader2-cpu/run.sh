#!/usr/bin/env bash
# Issue 18 on the CPU: the current preset (α = 0.5) with a reader trained two
# epochs instead of one (NEW_READER=1 SCORE_READER=2: from each cold start's
# SFT model, on the same 48,000 answer rows of both kinds), MemPO only, from
# the fresh cold starts and RL seeds of ../2026-12-07-demo-alpha-half-cpu
# (noknob.sh, two runs at a time, one OpenBLAS thread each): first 6:602 and
# 7:7 (picked: MemPO trailed GRPO at k = 8 there with the one-epoch reader),
# then 4:4, 5:5, 4:402, 5:502 (not picked). Then pooled against the same runs'
# one-epoch MemPO (label alpha05: /tmp/alpha05) and GRPO; POOL_RUNS picks runs.
cd "$(dirname "$0")/../../../.."
export BIN=${BIN:-$PWD/.work/mempool8/bin} MEM_FLAGS="--mem-pool step --mem-skip-answer --alpha 0.5" NEW_READER=1 SCORE_READER=2
R=${R:-/tmp/reader2}
if [ "${1:-}" != pool ]; then
	RUNS="6:602 7:7" E=/tmp/fresh67 N=$R bash scripts/gpu/results/2026-12-07-demo-fresh-noknob-cpu/noknob.sh
	RUNS="4:4 5:5 4:402 5:502" E=/tmp/fresh N=$R bash scripts/gpu/results/2026-12-07-demo-fresh-noknob-cpu/noknob.sh
fi
. scripts/demo/mempo-only.sh
# shellcheck disable=SC2086 # POOL_RUNS is a list of runs
pool_fresh reader2 $R scripts/gpu/results/2026-12-07-demo-reader2-cpu/pooled-scores.jsonl ${POOL_RUNS:-6:602 7:7 4:4 5:5 4:402 5:502}
