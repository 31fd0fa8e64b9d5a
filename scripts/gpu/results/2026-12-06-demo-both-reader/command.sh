#!/usr/bin/env bash
# Issue 18 on the GPU: make demo-check's three seeds at PRESET=gpu with R^M
# scored by a reader trained on both kinds of answer rows (READER_MEMORY=both:
# one subset row and one step row per SFT task, SCORE_READER=1 epoch over
# both, the optimizer steps of the subset reader's two epochs over one), in
# the per-objective form (SCORE_PER_OBJECTIVE=1); three RL runs per method
# and seed (run 1 is seedS itself; runs 2 and 3, seedS-rl2 and seedS-rl3,
# start from its SFT and reader as soon as they exist, RL_SEED=100·S+r, as
# check.sh's RL_RUNS=3 names them), then check.sh REUSE=1 RL_RUNS=3 for the
# verdict, with k = 8 evaluated. Per run, scripts/memdrops on MemPO's and
# GRPO's training rollouts (drop rate, mean A^M per kind of step). The job of
# ../2026-12-06-demo-reader-3seeds with the other reader and a third run.
#
# The job outlives one call (setsid): `command.sh` starts it and returns
# after LIMIT seconds or when it ends; `command.sh wait` (the next call, on
# the still-warm machine) waits again. Each return packs the results so far
# into $OUT/results.tgz (no rollouts or checkpoints).
#   carry: .work/mempool5.tar.xz (the commands and memdrops)
set -uo pipefail
R=/tmp/rr LIMIT=${LIMIT:-570} SEEDS=${SEEDS:-1 2 3} RUNS=${RUNS:-3}
B=/tmp/mempool5; [ -x $B/bin/mempo-rollout ] || tar -xJf .work/mempool5.tar.xz -C /tmp
. scripts/gpu/env.sh
gpu_env $B/lib
export BIN=$B/bin DEVICE=${DEVICE:-cuda} PRESET=gpu SCORE_READER=1 READER_MEMORY=both SCORE_PER_OBJECTIVE=1 GRPO_RM=1 EVAL_K="2 4 8"
T0=$(date +%s)

job() {
	el() { echo $(( $(date +%s) - T0 )); }
	mkdir -p $R
	js=()
	for s in $SEEDS; do
		w=data/world; [ $s = 1 ] || w=$R/seed$s/world
		mkdir -p $R/seed$s
		( SEED=$s OUT=$R/seed$s bash scripts/demo/run.sh > $R/seed$s.log 2>&1; echo "seed $s rc $? at $(el)s" >> $R/done.txt ) &
		js+=($!)
		for r in $(seq 2 "$RUNS"); do
			( until grep -q "== mempo iteration 1/" $R/seed$s.log 2>/dev/null; do
				grep -q "seed $s rc" $R/done.txt 2>/dev/null && exit 1; sleep 2; done
			  echo "seed $s run $r: RL starts at $(el)s" >> $R/done.txt
			  wd=(); [ $s = 1 ] || wd=(WORLD=$w)
			  env "${wd[@]}" SEED=$s RL_SEED=$(( 100 * s + r )) FROM_SFT=$R/seed$s OUT=$R/seed$s-rl$r bash scripts/demo/run.sh > $R/seed$s-rl$r.log 2>&1
			  echo "seed $s rl$r rc $? at $(el)s" >> $R/done.txt ) &
			js+=($!)
		done
	done
	wait "${js[@]}"
	for d in $R/seed*/; do r=$(basename $d); [ -d $d/mempo ] || continue
		$BIN/memdrops $d/mempo/rollouts-*.parquet > $R/$r-memdrops-mempo.txt 2>&1
		$BIN/memdrops $d/grpo/rollouts-*.parquet > $R/$r-memdrops-grpo.txt 2>&1
	done
	SEEDS="$SEEDS" OUT=$R REUSE=1 RL_RUNS=$RUNS PARALLEL=1 bash scripts/demo/check.sh > $R/check.txt 2>&1
	echo "check rc $? at $(el)s" >> $R/done.txt
	touch $R/all-done
}

pack() { (cd $R/.. && tar czf $OUT/.res.tgz --exclude='*.parquet' --exclude='*.safetensors' --exclude='iter[0-9]*' --exclude='init' --exclude='*-init' --exclude='index' --exclude='variants' --exclude='sft-world' --exclude='rl-world-k*' --exclude='world' --exclude='*tasks*.jsonl' --exclude='tokenizer*.json' --exclude='*.html' --exclude='*.png' --exclude='demos*' --exclude='*rows*.jsonl' --exclude='answers*' "$(basename $R)" 2>/dev/null; mv $OUT/.res.tgz $OUT/results.tgz); }

case ${1:-start} in
job) job; exit ;;
start) rm -rf $R; mkdir -p $R; setsid nohup bash "$0" job > /tmp/rr-job.log 2>&1 < /dev/null & ;;
wait) ;;
esac
n=0
while [ ! -f $R/all-done ] && [ $(( $(date +%s) - T0 )) -lt $LIMIT ]; do
	sleep 5; n=$((n + 1)); [ $((n % 6)) = 0 ] && pack   # a call cut off early still brings something back
done
pack
cat $R/done.txt 2>/dev/null; tail -3 /tmp/rr-job.log
if [ -f $R/all-done ]; then
	(cd $R && tar czf $OUT/models.tgz $(for s in $SEEDS; do echo seed$s/{sft,reader}/{config.json,model.safetensors}; done) 2>/dev/null)
	tail -70 $R/check.txt
fi
