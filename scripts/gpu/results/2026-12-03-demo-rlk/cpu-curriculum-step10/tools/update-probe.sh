#!/bin/bash
# upd.sh NAME STEPS [flags]: iteration 10's update from iter9 (lr $LR), STEPS steps, then probe P(;|<mem>)
cd /work/main; R=runs/rlk-cpu-curriculum/seed1; name=$1 steps=$2; shift 2; o=/tmp/s10/$name; rm -rf $o
nice -n 10 /tmp/mu --model $R/mempo/iter9 --ref $R/sft --rollouts $R/mempo/rollouts-10.parquet --out $o \
  --lr ${LR:-3e-4} --kl-coef 0.001 --mini-batch 16 --seed 1 --metrics $o.metrics.jsonl --device cpu --stop-after $steps "$@" > $o.update.log 2>&1 || { echo "$name: update failed"; tail -3 $o.update.log; exit 1; }
echo "== $name ($steps steps, lr ${LR:-3e-4}, $*)"; /tmp/s10probe/probe $R/mempo/iter9 $o /tmp/diag/r-iter9.parquet | sed -n 2p
