#!/usr/bin/env bash
# MemPO at α = 0.5 (the knob on) against GRPO, pooled over every run of the
# day at α = 0.5: the CPU's eight fresh-seed runs (../2026-12-07-demo-alpha-half-cpu:
# N=/tmp/alpha05 with E4=/tmp/fresh, E6=/tmp/fresh67), this folder's nine
# (G=/tmp/gev: its alpha05/seedS-R/ and the demo-check's rr/seedS[-rlR]/eval/,
# as brought back in evals.tgz) and ../2026-12-07-demo-skip-answer's six
# (C=/tmp/gev/cold/rr/sS-R/eval/, from evals-cold.tgz). Each run's GRPO is
# the same machine's, same cold start and RL seed.
cd "$(dirname "$0")/../../../.."
. scripts/demo/mempo-only.sh
BIN=${BIN:-$PWD/bin} N=${N:-/tmp/alpha05} E4=${E4:-/tmp/fresh} E6=${E6:-/tmp/fresh67} G=${G:-/tmp/gev} C=${C:-/tmp/gev/cold/rr}
a=()
pair() { for k in 2 4 8; do a+=(--rollouts $1-k$k.parquet --label alpha05 --rollouts $2-k$k.parquet --label grpo); done; }
for sr in 4:4 4:402 5:5 5:502 6:6 6:602 7:7 7:703; do s=${sr%:*} r=${sr#*:}
	E=$E4; [ $s -ge 6 ] && E=$E6
	d=$(run_dir $E $s $r)
	pair $N/seed$s-$r/eval-mempo $d/eval/grpo
done
for s in 1 2 3; do for r in $s $((100 * s + 2)) $((100 * s + 3)); do
	d=$(run_dir $G/rr $s $r)
	pair $G/alpha05/seed$s-$r/eval-mempo $d/eval/grpo
done; done
for d in $C/s*; do pair $d/eval/mempo $d/eval/grpo; done
$BIN/mempo-score "${a[@]}" --out scripts/gpu/results/2026-12-07-demo-alpha-half-gpu/pooled-23-runs.jsonl
