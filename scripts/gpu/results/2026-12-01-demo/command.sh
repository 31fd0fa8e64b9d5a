#!/usr/bin/env bash
# One H200 call: the demo (PRESET=small, the make demo settings) for seeds 1-3
# in parallel on CUDA, and two MemPO ablations on seed 1's cold start.
set -uo pipefail
W=.work/demo18
tar -C /tmp -xJf $W/gbin.tar.xz
. scripts/gpu/env.sh
gpu_env /tmp/gbin/lib
export GRPO_RM=1 BIN=/tmp/gbin DEVICE=${DEVICE:-cuda} PRESET=${PRESET:-small}
R=/tmp/r; mkdir -p $R
nvidia-smi --query-gpu=name,memory.used --format=csv > $R/gpu.txt 2>&1
T0=$(date +%s)
pack() { (cd /tmp && tar czf $OUT/.res.tgz --exclude='*.safetensors' --exclude='*.parquet' --exclude='index' --exclude='variants' --exclude='sft-world' --exclude='*tasks*.jsonl' --exclude='world' --exclude='tokenizer*.json' r 2>/dev/null; mv $OUT/.res.tgz $OUT/results.tgz); }
( while sleep 10; do echo "$(( $(date +%s) - T0 ))s" > $R/elapsed.txt; pack; done ) &
packer=$!
# curve DIR: the training rollouts scored one iteration at a time (R^M, P(gold | mem) per iteration).
curve() { local a=() i v; for v in mempo grpo; do for i in $(seq 1 20); do [ -f $1/$v/rollouts-$i.parquet ] && a+=(--rollouts $1/$v/rollouts-$i.parquet --label $v-$i); done; done
  $BIN/mempo-score "${a[@]}" --bootstrap 200 --out $1/curve.jsonl > /dev/null 2>&1; }
jobs_=()
for s in 1 2 3; do
  ( SEED=$s OUT=$R/s$s bash $W/demo/run.sh > $R/s$s.log 2>&1; echo "seed $s rc $? at $(( $(date +%s) - T0 ))s" >> $R/done.txt; curve $R/s$s ) &
  jobs_+=($!)
done
# Ablations: RL only, from seed 1's cold start, once it exists.
( while [ ! -f $R/s1/sft-react/config.json ] && ! grep -q "seed 1 " $R/done.txt 2>/dev/null; do sleep 2; done; sleep 3
  for v in "step:--mem-pool step" "alpha3:--alpha 3"; do
    n=${v%%:*} f=${v#*:}
    ( SEED=1 FROM_SFT=$R/s1 MEM_FLAGS="$f" OUT=$R/a-$n bash $W/demo/run.sh > $R/a-$n.log 2>&1; echo "ablation $n rc $? at $(( $(date +%s) - T0 ))s" >> $R/done.txt; curve $R/a-$n ) &
  done; wait ) &
jobs_+=($!)
wait "${jobs_[@]}"
kill $packer
echo "all done at $(( $(date +%s) - T0 ))s" >> $R/done.txt
pack
