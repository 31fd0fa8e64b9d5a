#!/usr/bin/env bash
# curve.sh RUNDIR: mean P(gold | mem), R^M and R^T of each RL iteration's
# training rollouts (128 sampled trajectories), MemPO and GRPO, as a table.
set -euo pipefail
d=$1 BIN=${BIN:-bin} a=()
for v in mempo grpo; do for f in "$d/$v"/rollouts-*.parquet; do i=${f##*/rollouts-} i=${i%.parquet}; a+=(--rollouts "$f" --label "$v-$i"); done; done
"$BIN/mempo-score" "${a[@]}" --bootstrap 10 --out "$d/curve.jsonl" > /dev/null
echo "| iteration | MemPO P(gold \\| mem) | GRPO P(gold \\| mem) | MemPO R^M | GRPO R^M | MemPO R^T | GRPO R^T |"
echo "|---:|---:|---:|---:|---:|---:|---:|"
for i in $(seq 1 "$(ls "$d"/mempo/rollouts-*.parquet | wc -l)"); do
	row="| $i"
	for m in p_gold_mem r_mem reward_task; do for v in mempo grpo; do
		row+=" | $(grep "\"run\":\"$v-$i\"" "$d/curve.jsonl" | grep "\"metric\":\"$m\"" | sed 's/.*"value":\([^,]*\),.*/\1/' | xargs printf '%.4f')"
	done; done
	echo "$row |"
done
