#!/usr/bin/env bash
# Pooled scores of MemPO under --alpha 0.5 (the knob on; N=/tmp/alpha05, made by
# ../2026-12-07-demo-fresh-noknob-cpu/noknob.sh with RUNS and MEM_FLAGS, as
# README.md says) against the same cold starts and RL seeds' MemPO at α = 1
# and GRPO (E4=/tmp/fresh for seeds 4, 5; E6=/tmp/fresh67 for seeds 6, 7).
cd "$(dirname "$0")/../../../.."
. scripts/demo/mempo-only.sh
BIN=${BIN:-$PWD/bin} N=${N:-/tmp/alpha05} E4=${E4:-/tmp/fresh} E6=${E6:-/tmp/fresh67}
a=()
for sr in ${RUNS:-4:4 4:402 5:5 5:502 6:6 6:602 7:7 7:703}; do s=${sr%:*} r=${sr#*:}
	E=$E4; [ $s -ge 6 ] && E=$E6
	d=$(run_dir $E $s $r)
	for k in 2 4 8; do a+=(--rollouts $N/seed$s-$r/eval-mempo-k$k.parquet --label alpha05
		--rollouts $d/eval/mempo-k$k.parquet --label alpha1 --rollouts $d/eval/grpo-k$k.parquet --label grpo); done
done
$BIN/mempo-score "${a[@]}" --out scripts/gpu/results/2026-12-07-demo-alpha-half-cpu/pooled-scores.jsonl
