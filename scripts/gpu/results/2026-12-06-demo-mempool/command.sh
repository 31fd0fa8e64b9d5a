#!/usr/bin/env bash
# One H200 call for issue 18: the memory advantage's pool, task against step,
# from the same cold starts, in one call from one build (runs of different
# builds differ by more than the methods do: ../2026-12-03-demo-rlk-kl).
# Configuration of ../2026-12-03-demo-rlk-kl (PRESET=gpu, lossy expert
# p = 0.35, answer rows 0.25, SFT on k up to 8, RL tasks cycling k = 2, 4, 8,
# TARGET_KL=0.01). Per seed (1-3, in parallel):
#   $R/step/seedS: scripts/demo/run.sh with MEM_FLAGS="--mem-pool step"
#     (SFT, ReAct SFT, MemPO-RL with A^M z-scored per step index, GRPO-RL);
#   $R/task/seedS: as soon as that SFT exists, run.sh again with
#     FROM_SFT=$R/step/seedS and the default pool (A^M z-scored over the
#     task's samples), so MemPO-task and a second GRPO run start from the
#     same cold start (GRPO twice: how far two runs of one seed differ).
# Then make demo-check's comparisons on each set of three seeds, per-seed
# training curves and drop counts. Results are packed into $OUT/results.tgz
# every 10 s, so a run cut by the limit still returns what it finished.
#   carry: .work/mempool.tar.xz (mempool/bin: mempo-index, mempo-rollout,
#   mempo-update, mempo-score, memdrops; mempool/lib: OpenBLAS and its
#   Fortran runtime)
set -uo pipefail
B=/tmp/mempool; [ -x $B/bin/mempo-rollout ] || tar -xJf .work/mempool.tar.xz -C /tmp
. scripts/gpu/env.sh
gpu_env $B/lib
export GRPO_RM=1 BIN=$B/bin DEVICE=${DEVICE:-cuda} PRESET=gpu EXPERT_DROP=0.35 ANSWER_ROWS=0.25 SFT_K="1 2 3 4 1 2 3 4 8" SFT_DEMOS=${SFT_DEMOS:-24000}
export RL_K=${RL_K:-"2 4 8"} RL_ORDER=${RL_ORDER:-mix} TARGET_KL=${TARGET_KL:-0.01}
R=${R:-/tmp/r}; mkdir -p $R/step $R/task
T0=$(date +%s)
el() { echo $(( $(date +%s) - T0 )); }
pack() { (cd $R/.. && tar czf $OUT/.res.tgz --exclude='*.safetensors' --exclude='*.parquet' --exclude='index' --exclude='variants' --exclude='sft-world' --exclude='rl-world-k*' --exclude='*tasks*.jsonl' --exclude='world' --exclude='tokenizer*.json' --exclude='*.html' --exclude='*.png' --exclude='report' "$(basename $R)" 2>/dev/null; mv $OUT/.res.tgz $OUT/results.tgz); }
( while sleep 10; do el > $R/elapsed.txt; pack; done ) &
packer=$!
post() { local d=$1 a=() i v f
  for v in mempo grpo; do for i in $(seq 1 20); do [ -f $d/$v/rollouts-$i.parquet ] && a+=(--rollouts $d/$v/rollouts-$i.parquet --label $v-$i); done; done
  $BIN/mempo-score "${a[@]}" --bootstrap 200 --out $d/curve.jsonl > /dev/null 2>&1
  for f in $d/mempo/rollouts-1.parquet $d/mempo/rollouts-12.parquet $d/grpo/rollouts-12.parquet $d/eval/{sft,mempo,grpo}-k{2,4,8}.parquet; do
    [ -f $f ] && $BIN/memdrops $f; done > $d/drops.txt 2>&1; }
js=()
for s in 1 2 3; do
  ( SEED=$s OUT=$R/step/seed$s MEM_FLAGS="--mem-pool step" bash scripts/demo/run.sh > $R/step/seed$s.log 2>&1
    echo "step seed $s rc $? at $(el)s" >> $R/done.txt
    post $R/step/seed$s ) &
  js+=($!)
  ( until grep -q "== mempo iteration 1/" $R/step/seed$s.log 2>/dev/null; do
      grep -q "step seed $s rc" $R/done.txt 2>/dev/null && exit 1; sleep 2; done
    echo "seed $s SFT done, RL starts at $(el)s" >> $R/done.txt
    w=(); [ $s = 1 ] || w=(WORLD=$R/step/seed$s/world)
    env "${w[@]}" SEED=$s OUT=$R/task/seed$s FROM_SFT=$R/step/seed$s MEM_FLAGS= bash scripts/demo/run.sh > $R/task/seed$s.log 2>&1
    echo "task seed $s rc $? at $(el)s" >> $R/done.txt
    post $R/task/seed$s ) &
  js+=($!)
done
wait "${js[@]}"
for p in step task; do REUSE=1 OUT=$R/$p BIN=$BIN bash scripts/demo/check.sh > $R/$p/check.txt 2>&1; done
echo "all done at $(el)s" >> $R/done.txt
kill $packer; pack
cat $R/done.txt; for p in step task; do echo "== $p"; tail -40 $R/$p/check.txt; done
