#!/usr/bin/env bash
# The CPU curriculum run of ../cpu-curriculum-seed1 (seed 1, RL_ORDER=curriculum,
# RL_K="2 4 8", DEVICE=cpu, PRESET=gpu with the lossy expert and answer rows)
# with every RL update's early stop on: TARGET_KL (mempo-update --target-kl).
# The cold start is that run's (FROM_SFT: sft/ and sft-react/ copied; on the
# CPU the pipeline repeats itself bit for bit, so this is the same SFT the
# original run trained). Then, as there, mempo-score on every iteration's
# training rollouts (curve.jsonl) and memdrops on every iteration's rollouts
# and every evaluation file (drops.txt).
#   BIN: make build, and go build -o $BIN/ ./scripts/memdrops
set -uo pipefail
R=${R:-runs/rlk-cpu-curriculum-guard}; BIN=${BIN:-bin}
TARGET_KL=${TARGET_KL:-0.012}
FROM_SFT=${FROM_SFT:-runs/rlk-cpu-curriculum/seed1}
export GRPO_RM=1 BIN DEVICE=cpu PRESET=gpu EXPERT_DROP=0.35 ANSWER_ROWS=0.25 SFT_K="1 2 3 4 1 2 3 4 8" SFT_DEMOS=24000
export RL_K="2 4 8" RL_ORDER=curriculum TARGET_KL FROM_SFT
mkdir -p $R
T0=$(date +%s)
SEED=1 OUT=$R/seed1 bash scripts/demo/run.sh > $R/seed1.log 2>&1
echo "seed 1 rc $? at $(( $(date +%s) - T0 ))s" >> $R/done.txt
d=$R/seed1 a=()
for v in mempo grpo; do for i in $(seq 1 12); do [ -f $d/$v/rollouts-$i.parquet ] && a+=(--rollouts $d/$v/rollouts-$i.parquet --label $v-$i); done; done
$BIN/mempo-score "${a[@]}" --bootstrap 200 --out $d/curve.jsonl > /dev/null 2>&1
for f in $d/mempo/rollouts-{1..12}.parquet $d/grpo/rollouts-{1..12}.parquet $d/eval/{sft,mempo,grpo}-k{2,4,8}.parquet; do
	[ -f $f ] && $BIN/memdrops $f; done > $d/drops.txt 2>&1
echo "post rc $? at $(( $(date +%s) - T0 ))s" >> $R/done.txt
