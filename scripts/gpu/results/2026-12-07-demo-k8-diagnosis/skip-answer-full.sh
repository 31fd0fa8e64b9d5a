#!/usr/bin/env bash
# The rest of the three-seeds × three-runs table of --mem-skip-answer on the CPU
# (seed 1 RL seeds 102, 103; seed 2 RL seed 202; seed 3 RL seed 3): one whole
# run.sh each from the GPU job's cold start (MemPO under the knob, then GRPO,
# whose updates the knob does not touch, then the evaluation), two at a time,
# one OpenBLAS thread each; commands built at dbe979b
# (.work/mempool8/bin). Run 102's MemPO equals skip-answer.sh's run 102 (which
# was stopped at GRPO) bit for bit. Then the pooled scores over the nine runs
# (below), with the four baselines' MemPO (no knob) beside them.
cd "$(dirname "$0")/../../../.."
export OPENBLAS_CORETYPE=Zen OPENBLAS_NUM_THREADS=1
export BIN=${BIN:-$PWD/bin} PRESET=gpu SCORE_READER=1 READER_MEMORY=both SCORE_PER_OBJECTIVE=1 GRPO_RM=1 EVAL_K="2 4 8"
full() { local S=$1 r=$2; local E=/tmp/skip$1; mkdir -p $E
	env SEED=$S RL_SEED=$r FROM_SFT=$PWD/.work/s${S}cold OUT=$E/full-$r MEM_FLAGS="--mem-pool step --mem-skip-answer" \
		bash scripts/demo/run.sh > $E/full-$r.log 2>&1; }
( full 1 102; full 2 202 ) &
( full 1 103; full 3 3 ) &
wait
# Pooled: skip = MemPO under the knob, base = MemPO without (skip-answer.sh's baselines), grpo, sft (once a seed).
# (skip-answer.sh wrote seed 3's runs under /tmp/skip, the others under /tmp/skipS.)
a=()
for sr in 1:1 1:102 1:103 2:2 2:202 2:203 3:3 3:302 3:303; do s=${sr%:*} r=${sr#*:} E=/tmp/skip$s
	[ $s = 3 ] && [ $r != 3 ] && E=/tmp/skip
	for k in 2 4 8; do
		if [ -d $E/full-$r ]; then a+=(--rollouts $E/full-$r/eval/mempo-k$k.parquet --label skip --rollouts $E/full-$r/eval/grpo-k$k.parquet --label grpo)
		else a+=(--rollouts $E/skip-$r/eval-mempo-k$k.parquet --label skip --rollouts $E/base-$r/eval/grpo-k$k.parquet --label grpo
			--rollouts $E/base-$r/eval/mempo-k$k.parquet --label base); fi
	done
done
for f in /tmp/skip1/base-1 /tmp/skip2/base-2 /tmp/skip/base-302; do for k in 2 4 8; do a+=(--rollouts $f/eval/sft-k$k.parquet --label sft); done; done
$BIN/mempo-score "${a[@]}" --out scripts/gpu/results/2026-12-07-demo-k8-diagnosis/pooled-skip-answer-cpu.jsonl
# Training rollouts per iteration pooled over the nine runs (labels skip-I, grpo-I, base-I over the five baselines):
# mean P(gold | mem), R^M and F1 per iteration, as make demo-check's training table.
a=()
for sr in 1:1 1:102 1:103 2:2 2:202 2:203 3:3 3:302 3:303; do s=${sr%:*} r=${sr#*:} E=/tmp/skip$s
	[ $s = 3 ] && [ $r != 3 ] && E=/tmp/skip
	for i in $(seq 1 12); do
		if [ -d $E/full-$r ]; then a+=(--rollouts $E/full-$r/mempo/rollouts-$i.parquet --label skip-$i --rollouts $E/full-$r/grpo/rollouts-$i.parquet --label grpo-$i)
		else a+=(--rollouts $E/skip-$r/mempo/rollouts-$i.parquet --label skip-$i --rollouts $E/base-$r/grpo/rollouts-$i.parquet --label grpo-$i
			--rollouts $E/base-$r/mempo/rollouts-$i.parquet --label base-$i); fi
	done
done
$BIN/mempo-score "${a[@]}" --out scripts/gpu/results/2026-12-07-demo-k8-diagnosis/pooled-train-skip-answer-cpu.jsonl
