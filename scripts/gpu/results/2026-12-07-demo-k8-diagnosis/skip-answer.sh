#!/usr/bin/env bash
# Seed S's GPU cold start (.work/sScold: sft/, sft-react/, reader/ as in run.sh) on the CPU at PRESET=gpu (both reader), RL seed R:
# baseline (MEM_FLAGS="--mem-pool step", full run.sh) and --mem-skip-answer
# (MemPO only: stopped when GRPO starts, GRPO being the baseline's bit for bit;
# then MemPO evaluated at k = 2, 4, 8 on run.sh's test tasks).
# Two runs at a time, one OpenBLAS thread each; ran as S=3 (E=/tmp/skip), then
# S=2 R1=2 R2=203, with commands built at the --mem-skip-answer commit (BIN=/tmp/kbin).
cd "$(dirname "$0")/../../../.."
export OPENBLAS_CORETYPE=Zen OPENBLAS_NUM_THREADS=1
export BIN=${BIN:-$PWD/bin} PRESET=gpu SCORE_READER=1 READER_MEMORY=both SCORE_PER_OBJECTIVE=1 GRPO_RM=1 EVAL_K="2 4 8"
S=${S:-3} E=${E:-/tmp/skip$S}; mkdir -p $E
mkdir -p $E/tw; [ -f $E/tw/test-k8.jsonl ] || $BIN/mempo-rollout world --seed $S --out $E/tw --sft-tasks 0 --rl-tasks 0 --test-tasks 128 --test-k 2,4,8 > /dev/null 2>&1
base() { local r=$1 t=$(date +%s)
	env SEED=$S RL_SEED=$r FROM_SFT=$PWD/.work/s${S}cold OUT=$E/base-$r bash scripts/demo/run.sh > $E/base-$r.log 2>&1
	echo "base $r rc $? wall $(( $(date +%s) - t ))s" >> $E/done.txt; }
skip() { local r=$1; local t=$(date +%s) O=$E/skip-$r
	env SEED=$S RL_SEED=$r FROM_SFT=$PWD/.work/s${S}cold OUT=$O MEM_FLAGS="--mem-pool step --mem-skip-answer" bash scripts/demo/run.sh > $E/skip-$r.log 2>&1 &
	local pid=$!
	until grep -q "== grpo iteration 1/" $E/skip-$r.log || ! kill -0 $pid 2>/dev/null; do sleep 3; done
	pkill -P $pid; kill $pid; sleep 2; pkill -f "$O/grpo"
	for k in 2 4 8; do head -n 128 $E/tw/test-k$k.jsonl > $O/test-k$k.jsonl
		$BIN/mempo-rollout --model $O/mempo/final --tasks $O/test-k$k.jsonl --index $O/index --out $O/eval-mempo-k$k.parquet \
			--max-step-tokens 96 --topk 2 --hint=false --score-gold-numbered --score-lead-in "<think>all {k} answers are known</think><answer>" \
			--score-layout turn --score-per-objective --batch 128 --overwrite --group 1 --temperature 0 --keep 1 --no-memory-reward > /dev/null 2>&1
	done
	$BIN/mempo-score --rollouts $O/eval-mempo-k2.parquet --label mempo --rollouts $O/eval-mempo-k4.parquet --label mempo --rollouts $O/eval-mempo-k8.parquet --label mempo --out $O/scores.jsonl --report $O/report > /dev/null 2>&1
	$BIN/memdrops $(ls $O/mempo/rollouts-*.parquet | sort -V) > $O/memdrops-mempo.txt 2>&1
	echo "skip $r wall $(( $(date +%s) - t ))s" >> $E/done.txt; }
( base ${R1:-302}; base ${R2:-303} ) &
( skip ${R1:-302}; skip ${R2:-303} ) &
wait
