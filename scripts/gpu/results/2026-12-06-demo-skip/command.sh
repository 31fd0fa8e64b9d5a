#!/usr/bin/env bash
# Issue 18 on the GPU: seed 1 at PRESET=gpu with R^M scored by the reader
# per objective (SCORE_READER=2 SCORE_PER_OBJECTIVE=1, as
# ../2026-12-06-demo-reader), now with mempo-update --mem-skip-repeats on
# MemPO's updates (beside the preset's --mem-pool step): two RL runs per
# method (run 1 RL_SEED 1, run 2 RL_SEED 102, the earlier call's seeds; run 2
# starts from run 1's SFT and reader as soon as they exist), then check.sh
# REUSE=1 RL_RUNS=2 (F1 and loops, pooled) and memdrops on MemPO's training
# rollouts. The job outlives one call (setsid): `command.sh` starts it and
# returns after LIMIT seconds or when it ends; `command.sh wait` waits
# again. Each return packs the results so far into $OUT/results.tgz.
#   carry: .work/mempool2.tar.xz (commands built at eb43608)
set -uo pipefail
R=/tmp/rs LIMIT=${LIMIT:-540}
B=/tmp/mempool2; [ -x $B/bin/mempo-rollout ] || tar -xJf .work/mempool2.tar.xz -C /tmp
. scripts/gpu/env.sh
gpu_env $B/lib
export BIN=$B/bin DEVICE=${DEVICE:-cuda} PRESET=gpu SCORE_READER=2 SCORE_PER_OBJECTIVE=1 GRPO_RM=1 EVAL_K="2 4 8" \
	MEM_FLAGS="--mem-pool step --mem-skip-repeats"
T0=$(date +%s)

job() {
	el() { echo $(( $(date +%s) - T0 )); }
	mkdir -p $R/seed1 $R/seed1-rl2
	( SEED=1 OUT=$R/seed1 bash scripts/demo/run.sh > $R/seed1.log 2>&1; echo "seed 1 rc $? at $(el)s" >> $R/done.txt ) &
	j1=$!
	( until grep -q "== mempo iteration 1/" $R/seed1.log 2>/dev/null; do
		grep -q "seed 1 rc" $R/done.txt 2>/dev/null && exit 1; sleep 2; done
	  echo "seed 1 SFT and reader done, RL starts at $(el)s" >> $R/done.txt
	  SEED=1 RL_SEED=102 FROM_SFT=$R/seed1 OUT=$R/seed1-rl2 bash scripts/demo/run.sh > $R/seed1-rl2.log 2>&1
	  echo "seed 1 rl2 rc $? at $(el)s" >> $R/done.txt ) &
	j2=$!
	wait $j1 $j2
	SEEDS=1 OUT=$R REUSE=1 RL_RUNS=2 bash scripts/demo/check.sh > $R/check.txt 2>&1
	echo "check rc $? at $(el)s" >> $R/done.txt
	for d in seed1 seed1-rl2; do
		$BIN/memdrops $R/$d/mempo/rollouts-*.parquet > $R/$d-memdrops-mempo.txt 2>&1
		$BIN/memdrops $R/$d/grpo/rollouts-*.parquet > $R/$d-memdrops-grpo.txt 2>&1
	done
	touch $R/all-done
}

pack() { (cd $R/.. && tar czf $OUT/.res.tgz --exclude='*.parquet' --exclude='*.safetensors' --exclude='iter[0-9]*' --exclude='init' --exclude='*-init' --exclude='index' --exclude='variants' --exclude='sft-world' --exclude='rl-world-k*' --exclude='world' --exclude='*tasks*.jsonl' --exclude='tokenizer*.json' --exclude='*.html' --exclude='*.png' --exclude='demos*' --exclude='*rows*.jsonl' --exclude='answers*' "$(basename $R)" 2>/dev/null; mv $OUT/.res.tgz $OUT/results.tgz); }

case ${1:-start} in
job) job; exit ;;
start) rm -rf $R; mkdir -p $R; setsid nohup bash "$0" job > /tmp/rs-job.log 2>&1 < /dev/null & ;;
wait) ;;
esac
n=0
while [ ! -f $R/all-done ] && [ $(( $(date +%s) - T0 )) -lt $LIMIT ]; do
	sleep 5; n=$((n + 1)); [ $((n % 6)) = 0 ] && pack
done
pack
cat $R/done.txt 2>/dev/null; tail -3 /tmp/rs-job.log
if [ -f $R/all-done ]; then
	sed -n 1,40p $R/check.txt
	for d in seed1 seed1-rl2; do echo "== $d memdrops"; cat $R/$d-memdrops-mempo.txt | sed 's/[^ ]*rollouts-/it /'; done
fi
