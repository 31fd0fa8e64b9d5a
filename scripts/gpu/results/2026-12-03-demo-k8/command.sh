#!/usr/bin/env bash
# One H200 call for issue 18: the demo at full's sizes (PRESET=gpu: 12 RL
# iterations, lr 3e-4, GRPO's rollouts scored for R^M) with the lossy expert
# (p = 0.35), the answer-from-memory rows (0.25) and SFT on k up to 8, seeds
# 1-3 in parallel; then the drop counts and per-iteration curves of each seed
# and make demo-check's comparisons on the three seeds pooled. Results are
# packed into $OUT/results.tgz every 10 s, so a run cut by the limit still
# returns what it finished.
set -uo pipefail
B=/tmp/s31; [ -x $B/bin/mempo-rollout ] || tar -xJf .work/s31.tar.xz -C /tmp
. scripts/gpu/env.sh
gpu_env $B/lib
export GRPO_RM=1 BIN=$B/bin DEVICE=cuda PRESET=gpu EXPERT_DROP=0.35 ANSWER_ROWS=0.25 SFT_K="1 2 3 4 1 2 3 4 8" SFT_DEMOS=${SFT_DEMOS:-24000}
R=/tmp/r; mkdir -p $R
T0=$(date +%s)
pack() { (cd /tmp && tar czf $OUT/.res.tgz --exclude='*.safetensors' --exclude='*.parquet' --exclude='index' --exclude='variants' --exclude='sft-world' --exclude='*tasks*.jsonl' --exclude='world' --exclude='tokenizer*.json' --exclude='*.html' --exclude='*.png' r 2>/dev/null; mv $OUT/.res.tgz $OUT/results.tgz); }
( while sleep 10; do echo "$(( $(date +%s) - T0 ))s" > $R/elapsed.txt; pack; done ) &
packer=$!
post() { local d=$1 a=() i v f
  for v in mempo grpo; do for i in $(seq 1 20); do [ -f $d/$v/rollouts-$i.parquet ] && a+=(--rollouts $d/$v/rollouts-$i.parquet --label $v-$i); done; done
  $BIN/mempo-score "${a[@]}" --bootstrap 200 --out $d/curve.jsonl > /dev/null 2>&1
  for f in $d/mempo/rollouts-1.parquet $d/mempo/rollouts-12.parquet $d/grpo/rollouts-12.parquet $d/eval/{sft,mempo,grpo}-k{2,4,8}.parquet; do
    [ -f $f ] && $BIN/memdrops $f; done > $d/drops.txt 2>&1; }
js=()
for s in 1 2 3; do
  ( SEED=$s OUT=$R/seed$s bash scripts/demo/run.sh > $R/seed$s.log 2>&1
    echo "seed $s rc $? at $(( $(date +%s) - T0 ))s" >> $R/done.txt; post $R/seed$s ) &
  js+=($!)
done
wait "${js[@]}"
REUSE=1 OUT=$R bash scripts/demo/check.sh > $R/check.txt 2>&1
echo "all done at $(( $(date +%s) - T0 ))s" >> $R/done.txt
kill $packer; pack
cat $R/done.txt; tail -40 $R/check.txt
