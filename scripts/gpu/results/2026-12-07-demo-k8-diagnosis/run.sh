#!/usr/bin/env bash
# Issue 18, CPU: what MemPO's k = 8 loops under the both-rows reader are. In
# ../2026-12-06-demo-both-reader two of seed 3's three MemPO runs (RL seeds
# 302, 303) looped on 63-67% of the k = 8 test tasks while ahead of GRPO at
# k = 4. Here that job's seed 3 cold start (its sft/ and reader/ weights,
# brought back in its models.tgz, with the world's tokenizer files; ReAct's
# model a copy of sft/, unused) runs MemPO's twelve iterations with RL seed
# 302 on the CPU at PRESET=gpu (GRPO's were stopped: the GPU job has three);
# then memdrops per k on MemPO's training rollouts, memscore summary of its
# first rollouts under the reader, and the greedy k = 8 evaluation of SFT and
# MemPO's final policy on the 128 test tasks run.sh draws (as its stage 7).
#   COLD: the cold start (sft/, sft-react/, reader/); BIN: commands built at 9458ace or later
set -euo pipefail
cd "$(dirname "$0")/../../../.."
COLD=${COLD:?the seed 3 cold start} OUT=${OUT:-runs/k8-diagnosis} BIN=${BIN:-bin}
export OPENBLAS_CORETYPE=Zen OPENBLAS_NUM_THREADS=2 BIN
export PRESET=gpu SCORE_READER=1 READER_MEMORY=both SCORE_PER_OBJECTIVE=1 GRPO_RM=1 EVAL_K=8
O=$OUT/seed3-rl2
# Stopped by hand once "== grpo iteration 1/" appeared (MemPO's iterations done).
SEED=3 RL_SEED=302 FROM_SFT="$COLD" OUT=$O bash scripts/demo/run.sh > "$OUT/seed3-rl2.log" 2>&1 || true
"$BIN/memdrops" $(ls "$O"/mempo/rollouts-*.parquet | sort -V) > "$OUT/memdrops-mempo.txt"
go run ./scripts/memscore seqs "$O/mempo/rollouts-1.parquet" "$O/world/tokenizer.json" |
	python3 -c 'import sys, json; [sys.stdout.write(l) for l in sys.stdin if json.loads(l)["ctx"] == "turn"]' > "$OUT/seqs.jsonl"
"$BIN/mempo-score" logprobs --model "$COLD/reader" --in "$OUT/seqs.jsonl" --out "$OUT/lp-reader.jsonl"
go run ./scripts/memscore summary "$OUT/lp-reader.jsonl" "$O/world/tokenizer.json" > "$OUT/memscore-summary-reader.md"
"$BIN/mempo-rollout" world --seed 3 --out "$OUT/tw" --sft-tasks 0 --rl-tasks 0 --test-tasks 128 --test-k 8
head -n 128 "$OUT/tw/test-k8.jsonl" > "$OUT/test-k8.jsonl"
for m in sft mempo; do
	model=$O/mempo/final; [ $m = sft ] && model=$O/sft
	"$BIN/mempo-rollout" --model "$model" --tasks "$OUT/test-k8.jsonl" --index "$O/index" --out "$OUT/eval-$m-k8.parquet" \
		--max-step-tokens 96 --topk 2 --hint=false --score-gold-numbered --score-lead-in "<think>all {k} answers are known</think><answer>" \
		--score-layout turn --score-per-objective --batch 128 --overwrite --group 1 --temperature 0 --keep 1 --no-memory-reward
done
"$BIN/mempo-score" --rollouts "$OUT/eval-sft-k8.parquet" --label sft --rollouts "$OUT/eval-mempo-k8.parquet" --label mempo \
	--out "$OUT/eval-scores.jsonl" --report "$OUT/report" > "$OUT/eval-scores.md"
