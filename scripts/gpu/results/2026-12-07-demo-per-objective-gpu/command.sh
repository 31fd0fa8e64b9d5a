#!/usr/bin/env bash
# Issue 18 on the GPU: make demo-check's three seeds from scratch at PRESET=gpu
# with MemPO's advantage per objective (the shipped MEM_FLAGS plus
# --mem-per-objective --mem-std-floor 0.05, the knob of
# ../2026-12-07-demo-per-objective-cpu), three RL runs per method and seed:
# scripts/demo/check.sh RL_RUNS=3 PARALLEL=1, its verdict in check.txt. Per
# run, memdrops on MemPO's and GRPO's training rollouts; done.txt has each
# run's wall time (nine pipelines sharing the GPU). Then the shipped MemPO
# (MEM_FLAGS of PRESET=gpu, α = 0.5, no per-objective form) from the same nine
# cold starts and RL seeds, MemPO alone (scripts/demo/mempo-only.sh), into
# $R/shipped: the two forms compared on the same cold starts (WITH_SHIPPED=0:
# not run).
#   carry: .work/w11.tar.xz (the commands and memdrops built with ../2026-12-07-fuse's change, which gives the same bits)
#   usage: command.sh [start|wait]   (scripts/gpu/longjob.sh)
set -uo pipefail
R=/tmp/rr LIMIT=${LIMIT:-560} SEEDS=${SEEDS:-1 2 3} RUNS=${RUNS:-3}
B=/tmp/w11; [ -x $B/bin/mempo-rollout ] || tar -xJf .work/w11.tar.xz -C /tmp
. scripts/gpu/env.sh
. scripts/gpu/longjob.sh
gpu_env $B/lib
export BIN=$B/bin DEVICE=${DEVICE:-cuda} PRESET=gpu EVAL_K="2 4 8"
SHIPPED="--mem-pool step --mem-skip-answer --alpha 0.5"
export MEM_FLAGS="$SHIPPED --mem-per-objective --mem-std-floor 0.05"
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
	[ "${WITH_SHIPPED:-1}" = 1 ] || return 0
	. scripts/demo/mempo-only.sh
	local s r
	mkdir -p $R/shipped
	for s in $SEEDS; do for r in $s $((100 * s + 2)) $((100 * s + 3)); do
		(E=$R N=$R/shipped MEM_FLAGS="$SHIPPED" mempo_only $s $r) &
	done; done
	wait
	echo "shipped done at $(longjob_elapsed)s" >> $R/done.txt
}

longjob "$0" "${1:-start}"; rc=$?
cat $R/done.txt 2>/dev/null
if [ $rc = 0 ]; then
	(cd $R && tar czf $OUT/evals.tgz seed*/eval/*.parquet seed*/report seed*.log shipped/*/eval-*.parquet shipped/*.log 2>/dev/null)
	tail -70 $R/check.txt
fi
exit 0
