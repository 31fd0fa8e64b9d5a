#!/usr/bin/env bash
# Issue 18 on the GPU: make demo-check's three seeds at PRESET=gpu with R^M
# scored by a reader (SCORE_READER=2: the SFT model two epochs more on one
# subset answer row per SFT task, passed as --score-model) in the
# per-objective form (SCORE_PER_OBJECTIVE=1), two RL runs per method and
# seed (run 1 is seedS itself; run 2, seedS-rl2, starts from its SFT and
# reader as soon as they exist, RL_SEED=100·S+2, as check.sh's RL_RUNS=2
# names them), then check.sh REUSE=1 RL_RUNS=2 for the verdict, with k = 8
# evaluated. Per run, scripts/memdrops on MemPO's and GRPO's training
# rollouts (drop rate, R^M of drops against other searches); per seed,
# memscore copy of its first MemPO rollouts under the reader and the SFT
# model. The same job as ../2026-12-06-demo-reader (seed 1 only there), less
# its --score-model check, with commands built at this call's commit.
#
# The job outlives one call (setsid): `command.sh` starts it and returns
# after LIMIT seconds or when it ends; `command.sh wait` (the next call, on
# the still-warm machine) waits again. Each return packs the results so far
# into $OUT/results.tgz (no rollouts or checkpoints).
#   carry: .work/mempool3.tar.xz (the commands, memscore and memdrops)
set -uo pipefail
R=/tmp/rr LIMIT=${LIMIT:-570} SEEDS=${SEEDS:-1 2 3}
B=/tmp/mempool3; [ -x $B/bin/mempo-rollout ] || tar -xJf .work/mempool3.tar.xz -C /tmp
. scripts/gpu/env.sh
gpu_env $B/lib
export BIN=$B/bin DEVICE=${DEVICE:-cuda} PRESET=gpu SCORE_READER=2 SCORE_PER_OBJECTIVE=1 GRPO_RM=1 EVAL_K="2 4 8"
T0=$(date +%s)

job() {
	el() { echo $(( $(date +%s) - T0 )); }
	mkdir -p $R
	copy() { local d=$1 s=$2 w=$3 m
		$BIN/memscore seqs $d/mempo/rollouts-1.parquet $w/tokenizer.json > $d/seqs.jsonl || return
		for m in reader sft; do
			$BIN/mempo-score logprobs --model $d/$m --in $d/seqs.jsonl --out $d/lp-$m.jsonl --device $DEVICE &&
			$BIN/memscore copy $d/lp-$m.jsonl $w/tokenizer.json > $R/seed$s-copy-$m.md
		done; rm -f $d/seqs.jsonl $d/lp-*.jsonl; }
	js=()
	for s in $SEEDS; do
		w=data/world; [ $s = 1 ] || w=$R/seed$s/world
		mkdir -p $R/seed$s $R/seed$s-rl2
		( SEED=$s OUT=$R/seed$s bash scripts/demo/run.sh > $R/seed$s.log 2>&1; echo "seed $s rc $? at $(el)s" >> $R/done.txt
		  copy $R/seed$s $s $w ) &
		js+=($!)
		[ "${RL2:-1}" = 1 ] || continue
		( until grep -q "== mempo iteration 1/" $R/seed$s.log 2>/dev/null; do
			grep -q "seed $s rc" $R/done.txt 2>/dev/null && exit 1; sleep 2; done
		  echo "seed $s SFT and reader done, RL starts at $(el)s" >> $R/done.txt
		  wd=(); [ $s = 1 ] || wd=(WORLD=$w)
		  env "${wd[@]}" SEED=$s RL_SEED=$(( 100 * s + 2 )) FROM_SFT=$R/seed$s OUT=$R/seed$s-rl2 bash scripts/demo/run.sh > $R/seed$s-rl2.log 2>&1
		  echo "seed $s rl2 rc $? at $(el)s" >> $R/done.txt ) &
		js+=($!)
	done
	wait "${js[@]}"
	for s in $SEEDS; do for r in seed$s seed$s-rl2; do [ -d $R/$r ] || continue
		$BIN/memdrops $R/$r/mempo/rollouts-*.parquet > $R/$r-memdrops-mempo.txt 2>&1
		$BIN/memdrops $R/$r/grpo/rollouts-*.parquet > $R/$r-memdrops-grpo.txt 2>&1
	done; done
	SEEDS="$SEEDS" OUT=$R REUSE=1 RL_RUNS=$(( ${RL2:-1} + 1 )) PARALLEL=1 bash scripts/demo/check.sh > $R/check.txt 2>&1
	echo "check rc $? at $(el)s" >> $R/done.txt
	wait
	touch $R/all-done
}

pack() { (cd $R/.. && tar czf $OUT/.res.tgz --exclude='*.parquet' --exclude='*.safetensors' --exclude='iter[0-9]*' --exclude='init' --exclude='*-init' --exclude='index' --exclude='variants' --exclude='sft-world' --exclude='rl-world-k*' --exclude='world' --exclude='*tasks*.jsonl' --exclude='tokenizer*.json' --exclude='*.html' --exclude='*.png' --exclude='demos*' --exclude='*rows*.jsonl' --exclude='answers*' --exclude='seqs.jsonl' --exclude='lp-*.jsonl' "$(basename $R)" 2>/dev/null; mv $OUT/.res.tgz $OUT/results.tgz); }

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
	cat $R/score-model.txt; tail -60 $R/check.txt
	for s in $SEEDS; do echo "== seed $s copy, reader"; cat $R/seed$s-copy-reader.md | head -40; done
fi
