#!/usr/bin/env bash
# One H200 call: the demo (PRESET=small) with the lossy expert (EXPERT_DROP):
# p = 0.5 for seeds 1-3, p = 0.35 for seed 1, all in parallel on CUDA; then
# memdrops (drop rate, R^M at drops) on demonstrations, training and
# evaluation rollouts, and check.sh on the three p = 0.5 seeds.
set -uo pipefail
W=.work/demo18b
tar -C /tmp -xJf $W/gbin.tar.xz
. scripts/gpu/env.sh
gpu_env /tmp/gbin/lib
export GRPO_RM=1 BIN=/tmp/gbin DEVICE=cuda PRESET=small
R=/tmp/r; mkdir -p $R
T0=$(date +%s)
pack() { (cd /tmp && tar czf $OUT/.res.tgz --exclude='*.safetensors' --exclude='*.parquet' --exclude='index' --exclude='variants' --exclude='sft-world' --exclude='*tasks*.jsonl' --exclude='world' --exclude='tokenizer*.json' --exclude='*.html' r 2>/dev/null; mv $OUT/.res.tgz $OUT/results.tgz); }
( while sleep 10; do echo "$(( $(date +%s) - T0 ))s" > $R/elapsed.txt; pack; done ) &
packer=$!
post() { local d=$1 a=() i v f
  for v in mempo grpo; do for i in $(seq 1 20); do [ -f $d/$v/rollouts-$i.parquet ] && a+=(--rollouts $d/$v/rollouts-$i.parquet --label $v-$i); done; done
  $BIN/mempo-score "${a[@]}" --bootstrap 200 --out $d/curve.jsonl > /dev/null 2>&1
  for f in $d/demos.parquet $d/mempo/rollouts-1.parquet $d/mempo/rollouts-6.parquet $d/grpo/rollouts-6.parquet $d/eval/{sft,mempo,grpo}-k{2,4,8}.parquet; do
    [ -f $f ] && $BIN/memdrops $f; done > $d/drops.txt 2>&1; }
js=()
for run in "p05 1 0.5" "p05 2 0.5" "p05 3 0.5" "p035 1 0.35"; do
  set -- $run
  ( mkdir -p $R/$1; EXPERT_DROP=$3 SEED=$2 OUT=$R/$1/seed$2 bash $W/demo/run.sh > $R/$1/seed$2.log 2>&1
    echo "$1 seed $2 rc $? at $(( $(date +%s) - T0 ))s" >> $R/done.txt; post $R/$1/seed$2 ) &
  js+=($!)
done
wait "${js[@]}"
REUSE=1 OUT=$R/p05 bash $W/demo/check.sh > $R/p05/check.txt 2>&1
echo "all done at $(( $(date +%s) - T0 ))s" >> $R/done.txt
kill $packer; pack
