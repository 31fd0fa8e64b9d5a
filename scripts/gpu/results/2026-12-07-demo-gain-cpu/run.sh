#!/usr/bin/env bash
# Issue 18 on the CPU: the memory reward as a gain over the previous memory
# (--mem-baseline previous: R^M = P(gold | q, mem_t) − P(gold | q, mem_t−1),
# per objective) on top of the current preset (α = 0.5), MemPO only, from
# the eight fresh-seed runs' cold starts and RL seeds of
# ../2026-12-07-demo-alpha-half-cpu (noknob.sh, two runs at a time), then
# pooled against those runs' α = 0.5 MemPO (N=/tmp/alpha05) and GRPO.
cd "$(dirname "$0")/../../../.."
export BIN=${BIN:-$PWD/.work/mempool8/bin} MEM_FLAGS="--mem-pool step --mem-skip-answer --alpha 0.5 --mem-baseline previous"
G=${G:-/tmp/gain}
if [ "${1:-}" != pool ]; then
	RUNS="4:4 5:5 4:402 5:502" E=/tmp/fresh N=$G bash scripts/gpu/results/2026-12-07-demo-fresh-noknob-cpu/noknob.sh
	RUNS="6:6 7:7 6:602 7:703" E=/tmp/fresh67 N=$G bash scripts/gpu/results/2026-12-07-demo-fresh-noknob-cpu/noknob.sh
fi
. scripts/demo/mempo-only.sh
pool_fresh gain $G scripts/gpu/results/2026-12-07-demo-gain-cpu/pooled-scores.jsonl 4:4 4:402 5:5 5:502 6:6 6:602 7:7 7:703
