#!/usr/bin/env bash
# One GPU call for issue 18: how far RL runs of one method differ from one
# cold start, against how far the methods differ. PRESET=gpu (step pool),
# seed 1: one SFT (and ReAct SFT), then MemPO-RL and GRPO-RL with four RL
# seeds each (RL_SEED 1-4: the rollouts' sampling seeds and the updates'
# mini-batch order; RL_SEED=1 is the first run's own RL, the other three
# start from its SFT, FROM_SFT, as soon as it exists), all in parallel;
# 64 test tasks per k. Then every run's scores and the runs pooled by method.
# Results are packed into $OUT/results.tgz every 10 s.
#   carry: .work/mempool.tar.xz (as ../2026-12-06-demo-mempool; the Go
#   binaries are unchanged since, only the scripts moved)
set -uo pipefail
B=/tmp/mempool; [ -x $B/bin/mempo-rollout ] || tar -xJf .work/mempool.tar.xz -C /tmp
. scripts/gpu/env.sh
gpu_env $B/lib
export BIN=$B/bin DEVICE=${DEVICE:-cuda} PRESET=gpu SEED=1 EVAL_TASKS=${EVAL_TASKS:-64}
R=${R:-/tmp/r}; mkdir -p $R
T0=$(date +%s)
el() { echo $(( $(date +%s) - T0 )); }
pack() { (cd $R/.. && tar czf $OUT/.res.tgz --exclude='*.parquet' --exclude='*.safetensors' --exclude='iter[0-9]*' --exclude='init' --exclude='sft-react-init' --exclude='index' --exclude='variants' --exclude='sft-world' --exclude='rl-world-k*' --exclude='test-world' --exclude='*tasks*.jsonl' --exclude='world' --exclude='tokenizer*.json' --exclude='*.html' --exclude='*.png' --exclude='report' --exclude='demos*' --exclude='answers*' "$(basename $R)" 2>/dev/null; mv $OUT/.res.tgz $OUT/results.tgz); }
( while sleep 10; do el > $R/elapsed.txt; pack; done ) &
packer=$!
post() { local d=$1 a=() i v f
  for v in mempo grpo; do for i in $(seq 1 20); do [ -f $d/$v/rollouts-$i.parquet ] && a+=(--rollouts $d/$v/rollouts-$i.parquet --label $v-$i); done; done
  $BIN/mempo-score "${a[@]}" --bootstrap 200 --out $d/curve.jsonl > /dev/null 2>&1
  for f in $d/mempo/rollouts-12.parquet $d/grpo/rollouts-12.parquet $d/eval/{sft,mempo,grpo}-k{2,4,8}.parquet; do
    [ -f $f ] && $BIN/memdrops $f; done > $d/drops.txt 2>&1; }
js=()
( RL_SEED=1 OUT=$R/rl1 bash scripts/demo/run.sh > $R/rl1.log 2>&1; echo "rl 1 rc $? at $(el)s" >> $R/done.txt; post $R/rl1 ) &
js+=($!)
for r in 2 3 4; do
  ( until grep -q "== mempo iteration 1/" $R/rl1.log 2>/dev/null; do
      grep -q "rl 1 rc" $R/done.txt 2>/dev/null && exit 1; sleep 2; done
    [ $r = 2 ] && echo "SFT done, RL starts at $(el)s" >> $R/done.txt
    RL_SEED=$r OUT=$R/rl$r FROM_SFT=$R/rl1 bash scripts/demo/run.sh > $R/rl$r.log 2>&1
    echo "rl $r rc $? at $(el)s" >> $R/done.txt; post $R/rl$r ) &
  js+=($!)
done
wait "${js[@]}"
# Every run's own table, then the runs pooled by method (one label a method:
# the interval is over all its runs' tasks).
a=()
for r in 1 2 3 4; do for v in sft mempo grpo react; do for k in 2 4 8; do
  f=$R/rl$r/eval/$v-k$k.parquet; [ -f $f ] && a+=(--rollouts $f --label $v); done; done; done
$BIN/mempo-score "${a[@]}" --out $R/pooled-scores.jsonl > /dev/null 2>&1
echo "all done at $(el)s" >> $R/done.txt
kill $packer; pack
cat $R/done.txt
for r in 1 2 3 4; do echo "== RL seed $r"; sed -n 5,9p $R/rl$r/summary.md; done
echo "== pooled F1"; grep '"metric":"f1"' $R/pooled-scores.jsonl | cut -c1-150
