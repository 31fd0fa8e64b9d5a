#!/usr/bin/env bash
# Issue 18, on the 2-core CPU machine: the per-seed command of
# ../command.sh (PRESET=gpu, lossy expert p = 0.35, answer rows 0.25, SFT on
# k up to 8, RL tasks of k = 2, 4, 8) for seed 1 with RL_ORDER=curriculum
# instead of mix: MemPO's and GRPO's 12 iterations take k = 2 tasks in
# iterations 1-4, k = 4 in 5-8 and k = 8 in 9-12 (16 tasks each). No
# iteration-6 evaluation. Then, as ../command.sh's post(): mempo-score on
# every iteration's training rollouts (curve.jsonl) and memdrops on every
# iteration's rollouts and every evaluation file (drops.txt).
#   BIN: make build, and go build -o $BIN/ ./scripts/memdrops
set -uo pipefail
R=${R:-runs/rlk-cpu-curriculum}; BIN=${BIN:-bin}
export GRPO_RM=1 BIN DEVICE=cpu PRESET=gpu EXPERT_DROP=0.35 ANSWER_ROWS=0.25 SFT_K="1 2 3 4 1 2 3 4 8" SFT_DEMOS=24000
export RL_K="2 4 8" RL_ORDER=curriculum
mkdir -p $R
T0=$(date +%s)
SEED=1 OUT=$R/seed1 bash scripts/demo/run.sh > $R/seed1.log 2>&1
echo "seed 1 rc $? at $(( $(date +%s) - T0 ))s" >> $R/done.txt
d=$R/seed1 a=()
for v in mempo grpo; do for i in $(seq 1 12); do [ -f $d/$v/rollouts-$i.parquet ] && a+=(--rollouts $d/$v/rollouts-$i.parquet --label $v-$i); done; done
$BIN/mempo-score "${a[@]}" --bootstrap 200 --out $d/curve.jsonl > /dev/null 2>&1
for f in $d/mempo/rollouts-{1..12}.parquet $d/grpo/rollouts-{1..12}.parquet $d/eval/{sft,mempo,grpo}-k{2,4,8}.parquet; do
	[ -f $f ] && $BIN/memdrops $f; done > $d/drops.txt 2>&1
