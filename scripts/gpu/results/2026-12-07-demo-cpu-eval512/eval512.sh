#!/usr/bin/env bash
# The CPU's twelve runs at the shipped PRESET=gpu (cold starts of seeds 4-7,
# three RL runs each: ../2026-12-07-demo-cpu-seed6, -seed7) evaluated again on
# 512 test tasks per k instead of 128 (run.sh EVAL_ONLY=1; the first 128 are
# the same tasks), with the binaries the runs were made with. Each seed's
# first run evaluates SFT, MemPO-RL, GRPO-RL and ReAct, the other two runs
# MemPO-RL and GRPO-RL (check.sh takes SFT and ReAct from the first). The
# 128-task evaluation moves to eval-128/ (scores-128.jsonl, summary-128.md).
# Two runs at a time.
#   usage: E=/tmp/cs BIN=… bash eval512.sh   (from the repository root)
set -u
E=${E:-/tmp/cs} N=${EVAL_TASKS:-512}
jobs_list=()
for s in 4 5 6 7; do jobs_list+=("$s seed$s sft mempo grpo react"); done
for s in 4 5 6 7; do
	rl="seed$s-rl2 seed$s-rl3"; [ $s = 4 ] && rl="seed4-rl1 seed4-rl2"
	for d in $rl; do jobs_list+=("$s $d mempo grpo"); done
done
one() {
	local s=$1 d=$2; shift 2
	local o=$E/$d
	if [ ! -d "$o/eval-128" ]; then
		mv "$o/eval" "$o/eval-128"
		cp "$o/scores.jsonl" "$o/scores-128.jsonl"; cp "$o/summary.md" "$o/summary-128.md"
	fi
	EVAL_ONLY=1 PRESET=gpu SEED=$s WORLD=$E/seed$s/world OUT=$o EVAL_TASKS=$N EVAL_MODELS="$*" \
		bash scripts/demo/run.sh > "$o-eval$N.log" 2>&1
	echo "$d rc $? $(date +%T)"
}
i=0
for j in "${jobs_list[@]}"; do
	one $j &
	i=$((i + 1)); [ $((i % 2)) = 0 ] && wait
done
wait
