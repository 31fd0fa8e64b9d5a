#!/usr/bin/env bash
# Issue 18 on the GPU: MemPO under `--mem-pool step --mem-skip-answer` (the
# memory written with the answer, which no later step reads, gets no memory
# advantage) from the cold starts of ../2026-12-06-demo-both-reader (seeds 1,
# 2, 3: its sft/ and both-rows reader/, brought back in its models.tgz; sft-react/
# a copy of sft/, so ReAct's rows here mean nothing) with that job's RL seeds
# (S, 100·S + 2, 100·S + 3): nine whole run.sh runs in parallel at PRESET=gpu
# (MemPO under the knob, GRPO again, evaluation at k = 2, 4, 8), memdrops per
# run, then the pooled scores. Against that job's MemPO without the knob on
# the same cold starts and RL seeds, and against GRPO rerun here.
#   carry: .work/mempool8.tar.xz (commands and memdrops built at dbe979b),
#          .work/s1cold .work/s2cold .work/s3cold
#   usage: command.sh [start|wait]   (scripts/gpu/longjob.sh)
set -uo pipefail
R=/tmp/rr LIMIT=${LIMIT:-560}
B=/tmp/mempool8; [ -x $B/bin/mempo-rollout ] || tar -xJf .work/mempool8.tar.xz -C /tmp
. scripts/gpu/env.sh
. scripts/gpu/longjob.sh
gpu_env $B/lib
export BIN=$B/bin DEVICE=${DEVICE:-cuda} PRESET=gpu SCORE_READER=1 READER_MEMORY=both SCORE_PER_OBJECTIVE=1 GRPO_RM=1 EVAL_K="2 4 8"
export MEM_FLAGS=${MEM_FLAGS:---mem-pool step --mem-skip-answer}   # MEM_FLAGS="… --alpha 0.5" ran too
PACK_EXCLUDE=('*.parquet' '*.safetensors' 'iter[0-9]*' init '*-init' index variants sft-world 'rl-world-k*' world test-world
	'*tasks*.jsonl' 'tokenizer*.json' '*.html' '*.png' 'demos*' '*rows*.jsonl' 'answers*')
RUNS=${RUNS:-1:1 1:102 1:103 2:2 2:202 2:203 3:3 3:302 3:303}

job() {
	for sr in $RUNS; do s=${sr%:*} r=${sr#*:}
		( env SEED=$s RL_SEED=$r FROM_SFT=$PWD/.work/s${s}cold OUT=$R/s$s-$r bash scripts/demo/run.sh > $R/s$s-$r.log 2>&1
		  echo "seed $s RL seed $r rc $? at $(longjob_elapsed)s" >> $R/done.txt ) &
	done
	wait
	a=()
	for sr in $RUNS; do s=${sr%:*} r=${sr#*:} d=$R/s${sr/:/-}
		$BIN/memdrops $d/mempo/rollouts-*.parquet > $d-memdrops-mempo.txt 2>&1
		$BIN/memdrops $d/grpo/rollouts-*.parquet > $d-memdrops-grpo.txt 2>&1
		for k in 2 4 8; do a+=(--rollouts $d/eval/mempo-k$k.parquet --label mempo --rollouts $d/eval/grpo-k$k.parquet --label grpo); done
	done
	for s in 1 2 3; do for k in 2 4 8; do a+=(--rollouts $R/s$s-$s/eval/sft-k$k.parquet --label sft); done; done
	$BIN/mempo-score "${a[@]}" --out $R/pooled-scores.jsonl > $R/pooled.txt 2>&1
	echo "pooled at $(longjob_elapsed)s" >> $R/done.txt
}

longjob "$0" "${1:-start}"; rc=$?
cat $R/done.txt 2>/dev/null
[ $rc = 0 ] && grep -E '"metric":"(f1|loops)"' $R/pooled-scores.jsonl | grep -v '"run":"react\|expert'
exit 0
