#!/usr/bin/env bash
# A reader: a cold start (FROM, an sft/ directory) fine-tuned on answer rows
# alone (subset memories, k = 2, 4, 8, from fact-shuffled variants of
# data/world), then scored on SEQS (memscore seqs of the cold start's first
# MemPO iteration's rollouts). Run from the repository root after make build.
#   FROM=…/sft SEQS=…/seqs.jsonl [O=out] [EPOCHS=2] bash reader.sh
set -euo pipefail
B=bin O=${O:-/tmp/rd}; mkdir -p $O
FROM=${FROM:?the cold start to fine-tune (an sft/ directory)} SEQS=${SEQS:?memscore seqs rows to score}
go build -o $O/memscore ./scripts/memscore
score=(--score-gold-numbered --score-lead-in "<think>all {k} answers are known</think><answer>" --score-layout turn)
data=()
for v in 1 2 3 4; do
  d=$O/v$v
  [ -f $d/answers.jsonl ] || {
    $B/mempo-rollout world --seed 1 --fact-seed $((v+10)) --out $d --sft-k 2,4,8 --sft-tasks ${TASKS:-1500} --rl-tasks 0 --test-tasks 0 >/dev/null
    $B/mempo-index --corpus $d/corpus.jsonl --out $d/index >/dev/null
    $B/mempo-rollout expert --tasks $d/train-sft.jsonl --index $d/index --tokenizer data/world/tokenizer.json --keep 1 \
      --topk 2 --hint=false "${score[@]}" --drop-rate 0.35 --drop-seed $((100+v)) \
      --answer-rows $d/answers.jsonl --answer-rate 1 --answer-memory ${MEMORY:-subset} --out $d/demos.parquet
  }
  data+=(--data $d/answers.jsonl)
done
n=$(cat $O/v*/answers.jsonl | wc -l); steps=$(( n * ${EPOCHS:-2} / 8 ))
$B/mempo-update sft --model $FROM "${data[@]}" --out $O/reader --epochs ${EPOCHS:-2} --lr ${LR:-1e-3} \
  --batch-size 8 --seed 1 --schedule cosine --warmup $((steps/20)) --total-steps $steps --min-lr-ratio 0.1 --metrics $O/reader-metrics.jsonl
$B/mempo-score logprobs --model $O/reader --in $SEQS --out $O/lp.jsonl
$O/memscore copy $O/lp.jsonl data/world/tokenizer.json > $O/memscore-copy.md
$O/memscore pairs $O/lp.jsonl > $O/memscore-pairs.md
