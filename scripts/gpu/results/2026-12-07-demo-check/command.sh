#!/usr/bin/env bash
# Issue 18 on the GPU: make demo-check's three seeds from scratch at the
# PRESET=gpu run.sh now ships (the both-rows reader, per-objective R^M,
# MEM_FLAGS="--mem-pool step --mem-skip-answer"), three RL runs per method
# and seed (run 1 is seedS; runs 2 and 3, seedS-rl2 and seedS-rl3, start from
# its SFT and reader as soon as RL starts, RL_SEED=100·S+r, as check.sh's
# RL_RUNS=3 names them), then check.sh REUSE=1 RL_RUNS=3 for the verdict.
# Per run, memdrops on MemPO's and GRPO's training rollouts. Each seed's
# log-stages (run.sh's stage times) say how long one run takes with eleven
# others on the GPU. At the end, each seed's sft/ and reader/ in
# $OUT/models.tgz (cold starts for CPU runs).
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
	local js=() s r w
	for s in $SEEDS; do
		w=data/world; [ $s = 1 ] || w=$R/seed$s/world
		mkdir -p $R/seed$s
		( SEED=$s OUT=$R/seed$s bash scripts/demo/run.sh > $R/seed$s.log 2>&1; echo "seed $s rc $? at $(longjob_elapsed)s" >> $R/done.txt ) &
		js+=($!)
		for r in $(seq 2 "$RUNS"); do
			( until grep -q "== mempo iteration 1/" $R/seed$s.log 2>/dev/null; do
				grep -q "seed $s rc" $R/done.txt 2>/dev/null && exit 1; sleep 2; done
			  echo "seed $s run $r: RL starts at $(longjob_elapsed)s" >> $R/done.txt
			  wd=(); [ $s = 1 ] || wd=(WORLD=$w)
			  env "${wd[@]}" SEED=$s RL_SEED=$(( 100 * s + r )) FROM_SFT=$R/seed$s OUT=$R/seed$s-rl$r bash scripts/demo/run.sh > $R/seed$s-rl$r.log 2>&1
			  echo "seed $s rl$r rc $? at $(longjob_elapsed)s" >> $R/done.txt ) &
			js+=($!)
		done
	done
	wait "${js[@]}"
	for d in $R/seed*/; do r=$(basename $d); [ -d $d/mempo ] || continue
		$BIN/memdrops $d/mempo/rollouts-*.parquet > $R/$r-memdrops-mempo.txt 2>&1
		$BIN/memdrops $d/grpo/rollouts-*.parquet > $R/$r-memdrops-grpo.txt 2>&1
	done
	SEEDS="$SEEDS" OUT=$R REUSE=1 RL_RUNS=$RUNS PARALLEL=1 bash scripts/demo/check.sh > $R/check.txt 2>&1
	echo "check rc $? at $(longjob_elapsed)s" >> $R/done.txt
}

longjob "$0" "${1:-start}"; rc=$?
cat $R/done.txt 2>/dev/null
if [ $rc = 0 ]; then
	(cd $R && tar czf $OUT/models.tgz $(for s in $SEEDS; do echo seed$s/{sft,reader}/{config.json,model.safetensors}; done) 2>/dev/null)
	tail -70 $R/check.txt
fi
exit 0
