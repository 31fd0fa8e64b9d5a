#!/usr/bin/env bash
# Issue 18 on the GPU: make demo-check's three seeds from scratch at the
# PRESET=gpu run.sh shipped on the morning of 2026-12-07 (the both-rows reader,
# per-objective R^M, MEM_FLAGS="--mem-pool step --mem-skip-answer"; the preset
# has --alpha 0.5 since: set that MEM_FLAGS to repeat it), three RL runs per method
# and seed: scripts/demo/check.sh RL_RUNS=3 PARALLEL=1 (run 1 is seedS; runs 2
# and 3, seedS-rl2 and seedS-rl3, start from its SFT and reader as soon as its
# RL starts, RL_SEED=100·S+r), its verdict in check.txt. Per run, memdrops
# on MemPO's and GRPO's training rollouts; done.txt has each run's wall time
# (with eleven others on the GPU). At the end, each seed's sft/ and reader/
# in $OUT/models.tgz (cold starts for CPU runs).
#   carry: .work/mempool8.tar.xz (commands and memdrops built at dbe979b)
#   usage: command.sh [start|wait]   (scripts/gpu/longjob.sh)
set -uo pipefail
R=/tmp/rr LIMIT=${LIMIT:-560} SEEDS=${SEEDS:-1 2 3} RUNS=${RUNS:-3}
B=/tmp/mempool8; [ -x $B/bin/mempo-rollout ] || tar -xJf .work/mempool8.tar.xz -C /tmp
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
		$BIN/memdrops $d/mempo/rollouts-*.parquet > ${d%/}-memdrops-mempo.txt 2>&1
		$BIN/memdrops $d/grpo/rollouts-*.parquet > ${d%/}-memdrops-grpo.txt 2>&1
	done
}

longjob "$0" "${1:-start}"; rc=$?
cat $R/done.txt 2>/dev/null
if [ $rc = 0 ]; then
	(cd $R && tar czf $OUT/models.tgz $(for s in $SEEDS; do echo seed$s/{sft,reader}/{config.json,model.safetensors}; done) 2>/dev/null)
	tail -70 $R/check.txt
fi
exit 0
