#!/usr/bin/env bash
# Issue 18 on the GPU: make demo-check at the shipped PRESET=gpu on three seeds
# no GPU run has used (8, 9, 10; the CPU's cold starts were 4 to 7), from
# scratch, three RL runs per method and seed (scripts/demo/check.sh RL_RUNS=3
# PARALLEL=1, its verdict in check.txt; per run, memdrops on MemPO's and
# GRPO's training rollouts; done.txt has the wall times).
#   carry: .work/dm.tar.xz (the commands and memdrops of the commit the call
#   runs from, with their libraries: scripts/gpu/pack.sh dm cmds)
#   usage: command.sh [start|wait]   (scripts/gpu/longjob.sh)
set -uo pipefail
R=/tmp/rr LIMIT=${LIMIT:-560} SEEDS=${SEEDS:-8 9 10} RUNS=${RUNS:-3}
B=/tmp/dm; [ -x $B/bin/mempo-rollout ] || tar -xJf .work/dm.tar.xz -C /tmp
. scripts/gpu/env.sh
. scripts/gpu/longjob.sh
gpu_env $B/lib
export BIN=$B/bin DEVICE=${DEVICE:-cuda} PRESET=gpu EVAL_K="2 4 8"
PACK_EXCLUDE=('*.parquet' '*.safetensors' 'iter[0-9]*' init '*-init' index variants sft-world 'rl-world-k*' world test-world
	'*tasks*.jsonl' 'tokenizer*.json' '*.html' '*.png' 'demos*' '*rows*.jsonl' 'answers*')

job() {
	SEEDS="$SEEDS" OUT=$R RL_RUNS=$RUNS PARALLEL=1 bash scripts/demo/check.sh > $R/check.txt 2>&1
	echo "check rc $? at $(longjob_elapsed)s" >> $R/done.txt
	grep -H "demo finished" $R/seed*.log >> $R/done.txt
	local d
	for d in $R/seed*/; do [ -d $d/mempo ] || continue
		$BIN/memdrops $(ls $d/mempo/rollouts-*.parquet | sort -V) > ${d%/}-memdrops-mempo.txt 2>&1
		$BIN/memdrops $(ls $d/grpo/rollouts-*.parquet | sort -V) > ${d%/}-memdrops-grpo.txt 2>&1
	done
}

longjob "$0" "${1:-start}"; rc=$?
cat $R/done.txt 2>/dev/null
if [ $rc = 0 ]; then
	(cd $R && tar czf $OUT/evals.tgz seed*/eval/*.parquet seed*/report seed*.log 2>/dev/null)
	tail -70 $R/check.txt
fi
exit 0
