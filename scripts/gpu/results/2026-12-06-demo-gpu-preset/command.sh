#!/usr/bin/env bash
# One GPU call for issue 18: make demo-check at PRESET=gpu (scripts/demo/
# check.sh, seeds 1-3 in parallel; the preset now carries the configuration
# of ../2026-12-06-demo-mempool: lossy expert p = 0.35 with answer rows, SFT
# on k up to 8, RL tasks of k = 2, 4, 8 mixed, TARGET_KL=0.01, A^M pooled per
# step index, and 128 test tasks per k instead of 32), in $R/step; beside it,
# as soon as each seed's SFT exists, the same RL from that cold start with the
# default task pool (MEM_FLAGS= , FROM_SFT) in $R/task. Then check.sh's
# comparisons on each set. Per seed the drop counts and per-iteration curves;
# the final checkpoints (tiny: 1.8 MB each) and the evaluation rollouts come
# back too. Results are packed into $OUT/results.tgz every 10 s.
#   carry: .work/mempool.tar.xz (as ../2026-12-06-demo-mempool; the Go
#   binaries are unchanged since, only the scripts moved)
set -uo pipefail
B=/tmp/mempool; [ -x $B/bin/mempo-rollout ] || tar -xJf .work/mempool.tar.xz -C /tmp
. scripts/gpu/env.sh
gpu_env $B/lib
export BIN=$B/bin DEVICE=${DEVICE:-cuda} PRESET=gpu
R=${R:-/tmp/r}; mkdir -p $R/step $R/task
T0=$(date +%s)
el() { echo $(( $(date +%s) - T0 )); }
pack() { (cd $R/.. && tar czf $OUT/.res.tgz --exclude='*.parquet' --exclude='optimizer.safetensors' --exclude='iter[0-9]*' --exclude='init' --exclude='sft-react-init' --exclude='index' --exclude='variants' --exclude='sft-world' --exclude='rl-world-k*' --exclude='test-world' --exclude='*tasks*.jsonl' --exclude='world' --exclude='tokenizer*.json' --exclude='*.html' --exclude='*.png' --exclude='report' "$(basename $R)" 2>/dev/null; mv $OUT/.res.tgz $OUT/results.tgz); }
( while sleep 10; do el > $R/elapsed.txt; pack; done ) &
packer=$!
post() { local d=$1 a=() i v f
  for v in mempo grpo; do for i in $(seq 1 20); do [ -f $d/$v/rollouts-$i.parquet ] && a+=(--rollouts $d/$v/rollouts-$i.parquet --label $v-$i); done; done
  $BIN/mempo-score "${a[@]}" --bootstrap 200 --out $d/curve.jsonl > /dev/null 2>&1
  for f in $d/mempo/rollouts-1.parquet $d/mempo/rollouts-12.parquet $d/grpo/rollouts-12.parquet $d/eval/{sft,mempo,grpo}-k{2,4,8}.parquet; do
    [ -f $f ] && $BIN/memdrops $f; done > $d/drops.txt 2>&1
  mkdir -p $d/keep; for v in mempo grpo; do cp -rL $d/$v/final $d/keep/$v-final; done
  for f in $d/eval/*.parquet; do cp $f $d/keep/$(basename $f .parquet).pq; done; }
( OUT=$R/step PARALLEL=1 bash scripts/demo/check.sh > $R/step/check.txt 2>&1; echo "step check rc $? at $(el)s" >> $R/done.txt
  for s in 1 2 3; do post $R/step/seed$s; done ) &
js=($!)
for s in 1 2 3; do
  ( until grep -q "== mempo iteration 1/" $R/step/seed$s.log 2>/dev/null; do
      grep -q "step check rc" $R/done.txt 2>/dev/null && exit 1; sleep 2; done
    echo "seed $s SFT done, RL starts at $(el)s" >> $R/done.txt
    w=(); [ $s = 1 ] || w=(WORLD=$R/step/seed$s/world)
    env "${w[@]}" SEED=$s OUT=$R/task/seed$s FROM_SFT=$R/step/seed$s MEM_FLAGS= GRPO_RM=1 bash scripts/demo/run.sh > $R/task/seed$s.log 2>&1
    echo "task seed $s rc $? at $(el)s" >> $R/done.txt
    post $R/task/seed$s ) &
  js+=($!)
done
wait "${js[@]}"
REUSE=1 OUT=$R/task bash scripts/demo/check.sh > $R/task/check.txt 2>&1
echo "all done at $(el)s" >> $R/done.txt
kill $packer; pack
cat $R/done.txt; for p in step task; do echo "== $p"; grep -A6 "^## Pooled" $R/$p/check.txt; grep "^ok\|^FAIL" $R/$p/check.txt; done
