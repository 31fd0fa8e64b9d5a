#!/usr/bin/env bash
# The reader of a finished small run S (its sft/, SFT tasks and indexes): one
# answer row per SFT task from a subset of its final memory, the SFT model
# trained 2 epochs on them at lr 1e-3 → S/reader, as run.sh SCORE_READER=2
# does after SFT (here for a run made before that knob existed).
#   S=runs/… bash make-reader.sh   (after make build)
set -euo pipefail
cd "$(dirname "$0")/../../../../.."   # the repository root
S=${S:?the run directory of the cold start (the step-row small run of ../cpu-scorer-copy)}
score=(--score-gold-numbered --score-lead-in "<think>all {k} answers are known</think><answer>" --score-layout turn)
rows=()
for v in 0 1 2 3 4 5 6 7; do
  sfx=; idx=$S/index; [ $v -gt 0 ] && sfx=-v$v idx=$S/variants/v$v/index
  bin/mempo-rollout expert --tasks $S/sft-tasks$sfx.jsonl --index $idx --tokenizer data/world/tokenizer.json --keep 1 \
    --topk 2 --hint=false "${score[@]}" --answer-rows $S/reader-rows$sfx.jsonl --answer-rate 1 --answer-memory subset \
    --out $S/reader-demos$sfx.parquet 2>/dev/null
  rows+=(--data $S/reader-rows$sfx.jsonl)
done
n=$(cat $S/reader-rows*.jsonl | wc -l); steps=$(( (n + 7) / 8 * 2 ))
rm -rf $S/reader-init && cp -r $S/sft $S/reader-init && rm -f $S/reader-init/optimizer.safetensors
bin/mempo-update sft --model $S/reader-init "${rows[@]}" --out $S/reader --epochs 2 --lr 1e-3 --batch-size 8 --seed 1 \
  --schedule cosine --warmup $((steps/20)) --total-steps $steps --min-lr-ratio 0.1 --metrics $S/reader-metrics.jsonl
echo "reader: $n rows, $steps steps"
