#!/usr/bin/env bash
# A reader trained on both kinds of answer rows (issue 18, CPU, 2026-12-06,
# fifth session): the subset rows the reader preset uses (answers from a
# subset of the final memory) and the step rows of READER_MEMORY=step (a drawn
# step's memory, intermediate entities included), one epoch over both (4,000
# steps at batch 8: the steps SCORE_READER=2 takes over one kind), from each
# cold start's SFT model; then MemPO and GRPO from that cold start with it, the
# paper's R^M (run 1's RL seed; seeds 4 and 1 also runs 2 and 3). One run at a time
# on two cores, about 3 minutes a reader and 5 a run.
#   RUNS: the cold starts of ../three-seeds (seedS with sft/, sft-react/,
#   world/, index/, variants/ and sft-tasks*.jsonl, reader-rows*.jsonl: the
#   subset rows); for seed 1, whose three-seeds run took its SFT model from
#   elsewhere, the whole PRESET=reader run (the same SFT model and rows).
set -euo pipefail
cd "$(dirname "$0")/../../../../../.."
RUNS=${RUNS:?the cold starts of ../three-seeds} OUT=${OUT:-runs/mixed-reader}
export OPENBLAS_CORETYPE=Zen OPENBLAS_NUM_THREADS=2   # as scripts/demo/run.sh pins them
step_rows() {   # step_rows SRC DIR: run.sh stage 3's reader rows under READER_MEMORY=step
	local src=$1 dir=$2 v sfx idx; mkdir -p "$dir"
	for v in 0 1 2 3 4 5 6 7; do
		sfx=; idx=$src/index; [ $v -gt 0 ] && sfx=-v$v idx=$src/variants/v$v/index
		bin/mempo-rollout expert --tasks "$src/sft-tasks$sfx.jsonl" --index "$idx" --tokenizer "$src/world/tokenizer.json" \
			--keep 1 --topk 2 --hint=false --score-gold-numbered --score-lead-in "<think>all {k} answers are known</think><answer>" \
			--score-layout turn --score-per-objective --answer-rows "$dir/reader-rows$sfx.jsonl" --answer-rate 1 \
			--answer-memory step --out "$dir/reader-demos$sfx.parquet"
	done
}
one() {   # one SEED RUN
	local s=$1 r=$2 src=$RUNS/seed$1 f=$OUT/from$1 out=$OUT/seed$1 rs=$1 world=(WORLD=$RUNS/seed$1/world)
	[ "$s" = 1 ] && world=()
	if [ ! -f "$f/reader/config.json" ]; then
		mkdir -p "$f" && cp -r "$src/sft" "$src/sft-react" "$f/"
		rm -rf "$f/reader-init" && cp -r "$src/sft" "$f/reader-init" && rm -f "$f/reader-init/optimizer.safetensors"
		step_rows "$src" "$f/step-rows"
		local rows=() n steps x
		for x in "$src"/reader-rows*.jsonl "$f"/step-rows/reader-rows*.jsonl; do rows+=(--data "$x"); done
		n=$(cat "$src"/reader-rows*.jsonl "$f"/step-rows/reader-rows*.jsonl | wc -l) steps=$(( (n + 7) / 8 ))
		bin/mempo-update sft --model "$f/reader-init" "${rows[@]}" --out "$f/reader" --epochs 1 --lr 1e-3 --batch-size 8 \
			--seed "$s" --schedule cosine --warmup $(( steps / 20 )) --total-steps "$steps" --min-lr-ratio 0.1 --metrics "$f/reader-metrics.jsonl"
	fi
	if [ "$r" != 1 ]; then   # seed 1's runs 2 and 3 take RL seeds 2 and 3, as in ../three-seeds
		rs=$(( 100 * s + r )) out=$OUT/seed$s-rl$r; [ "$s" = 1 ] && rs=$r
	fi
	env PRESET=reader SEED="$s" RL_SEED=$rs FROM_SFT="$f" "${world[@]}" OUT="$out" EVAL_K="2 4" bash scripts/demo/run.sh
}
for s in 4 1 2 3 5; do one $s 1; done
for r in 2 3; do one 4 $r; done
for r in 2 3; do one 1 $r; done
OUT=$OUT SEEDS="1 2 3 4 5" RL_RUNS=1 EVAL_K="2 4" REUSE=1 bash scripts/demo/check.sh > "$OUT/check-seeds1-5.txt" || true
