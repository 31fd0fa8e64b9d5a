#!/bin/bash
# replay.sh NAME STEPS [extra mempo-update flags]: iteration 10's update from iter9, STEPS steps, then 128 sampled trajectories of iteration 11's tasks
set -u
cd /work/main
R=runs/rlk-cpu-curriculum/seed1
name=$1 steps=$2; shift 2
o=/tmp/s10/$name
rm -rf $o
nice -n 10 /tmp/mu --model $R/mempo/iter9 --ref $R/sft --rollouts $R/mempo/rollouts-10.parquet --out $o \
  --lr ${LR:-3e-4} --kl-coef 0.001 --mini-batch 16 --seed 1 --metrics $o.metrics.jsonl --device cpu --stop-after $steps "$@" > $o.update.log 2>&1
nice -n 10 runs/rlk-cpu-curriculum/bin/mempo-rollout --model $o --tasks $R/mempo/tasks-11.jsonl --index $R/index --out $o.rollouts.parquet \
  --max-step-tokens 96 --topk 2 --hint=false --score-gold-numbered --score-lead-in "<think>all {k} answers are known</think><answer>" --score-layout turn \
  --batch 128 --overwrite --device cpu --group 8 --temperature 1 --task-reward f1 --seed 1011 --no-memory-reward > $o.rollout.log 2>&1
echo "$name done $(date)" >> /tmp/s10/done.txt
