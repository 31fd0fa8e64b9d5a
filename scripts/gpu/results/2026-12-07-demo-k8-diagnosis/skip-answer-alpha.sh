#!/usr/bin/env bash
# MemPO alone under --mem-skip-answer plus the flags X (here --alpha 2), from
# seed S's GPU cold start (.work/sScold) with RL seed S, stopped when GRPO
# starts and evaluated at k = 2, 4, 8 on the test tasks of skip-answer.sh
# (TW); two at a time, one OpenBLAS thread each, commands built at dbe979b.
# Files: seedS-skip-answer-alpha2-S-scores.jsonl.
cd "$(dirname "$0")/../../../.."
export OPENBLAS_CORETYPE=Zen OPENBLAS_NUM_THREADS=1
export BIN=${BIN:-$PWD/bin} PRESET=gpu SCORE_READER=1 READER_MEMORY=both SCORE_PER_OBJECTIVE=1 GRPO_RM=1 EVAL_K="2 4 8"
X=${X:---alpha 2} N=${N:-alpha2}
one() { local S=$1 r=$2; local t=$(date +%s) O=/tmp/$N/s$1-$2 TW=/tmp/skip$1/tw; [ $1 = 3 ] && TW=/tmp/skip/tw; mkdir -p /tmp/$N
	env SEED=$S RL_SEED=$r FROM_SFT=$PWD/.work/s${S}cold OUT=$O MEM_FLAGS="--mem-pool step --mem-skip-answer $X" bash scripts/demo/run.sh > $O.log 2>&1 &
	local pid=$!
	until grep -q "== grpo iteration 1/" $O.log || ! kill -0 $pid 2>/dev/null; do sleep 3; done
	pkill -P $pid; kill $pid; sleep 2; pkill -f "$O/grpo"
	for k in 2 4 8; do head -n 128 $TW/test-k$k.jsonl > $O/test-k$k.jsonl
		$BIN/mempo-rollout --model $O/mempo/final --tasks $O/test-k$k.jsonl --index $O/index --out $O/eval-mempo-k$k.parquet \
			--max-step-tokens 96 --topk 2 --hint=false --score-gold-numbered --score-lead-in "<think>all {k} answers are known</think><answer>" \
			--score-layout turn --score-per-objective --batch 128 --overwrite --group 1 --temperature 0 --keep 1 --no-memory-reward > /dev/null 2>&1
	done
	$BIN/mempo-score --rollouts $O/eval-mempo-k2.parquet --label mempo --rollouts $O/eval-mempo-k4.parquet --label mempo --rollouts $O/eval-mempo-k8.parquet --label mempo --out $O/scores.jsonl > /dev/null 2>&1
	$BIN/memdrops $(ls $O/mempo/rollouts-*.parquet | sort -V) > $O/memdrops-mempo.txt 2>&1
	echo "$N $S $r wall $(( $(date +%s) - t ))s" >> /tmp/$N/done.txt; }
( one 1 1; one 2 2 ) &
( one 3 3 ) &
wait
