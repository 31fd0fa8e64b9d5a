#!/usr/bin/env bash
# One H200 call for issue 18: ../2026-12-03-demo-rlk/command.sh with TARGET_KL (PPO early stop of
# every RL update on the approximate KL to the rollout policy, mempo-update --target-kl). Below, that
# call's own description: the configuration of 2026-12-03-demo-k8
# (PRESET=gpu, lossy expert p = 0.35, answer rows 0.25, SFT on k up to 8)
# with RL on tasks of every k the evaluation uses: RL_K="2 4 8", each
# iteration's 16 tasks cycling through k = 2, 4, 8 (RL_ORDER=mix). Seeds 1-3
# in parallel. While a seed's RL runs, its MemPO and GRPO checkpoints after
# iteration 6 are evaluated greedily on the same test tasks (the fewer-
# iterations variant: an RL run of ITERS=6 is those checkpoints, the
# learning rate being constant). Then per seed the drop counts and the
# per-iteration curves, and make demo-check's comparisons on the three seeds
# pooled. Results are packed into $OUT/results.tgz every 10 s, so a run cut
# by the limit still returns what it finished.
#   carry: .work/rlkkl.tar.xz (rlkkl/bin: mempo-index, mempo-rollout, mempo-update,
#   mempo-score, memdrops built from the commit named in README.md; rlkkl/lib:
#   OpenBLAS and its Fortran runtime)
set -uo pipefail
B=/tmp/rlkkl; [ -x $B/bin/mempo-rollout ] || tar -xJf .work/rlkkl.tar.xz -C /tmp
. scripts/gpu/env.sh
gpu_env $B/lib
export GRPO_RM=1 BIN=$B/bin DEVICE=${DEVICE:-cuda} PRESET=gpu EXPERT_DROP=0.35 ANSWER_ROWS=0.25 SFT_K="1 2 3 4 1 2 3 4 8" SFT_DEMOS=${SFT_DEMOS:-24000}
export RL_K=${RL_K:-"2 4 8"} RL_ORDER=${RL_ORDER:-mix} TARGET_KL=${TARGET_KL:-0.01}
R=${R:-/tmp/r}; mkdir -p $R
T0=$(date +%s)
el() { echo $(( $(date +%s) - T0 )); }
pack() { (cd $R/.. && tar czf $OUT/.res.tgz --exclude='*.safetensors' --exclude='*.parquet' --exclude='index' --exclude='variants' --exclude='sft-world' --exclude='rl-world-k*' --exclude='*tasks*.jsonl' --exclude='world' --exclude='tokenizer*.json' --exclude='*.html' --exclude='*.png' "$(basename $R)" 2>/dev/null; mv $OUT/.res.tgz $OUT/results.tgz); }
( while sleep 10; do el > $R/elapsed.txt; pack; done ) &
packer=$!
# ev6 S: greedy evaluation of seed S's MemPO and GRPO checkpoints after
# iteration 6, with the demo's protocol (scripts/demo/run.sh's rollout and
# evaluation flags), as soon as each exists; it gives up when the seed's run
# ends first.
over() { grep -q "seed $1 rc" $R/done.txt 2>/dev/null; }
ev6() { local s=$1 d=$R/seed$1 w v k mr
  w=data/world; [ "$s" = 1 ] || w=$d/world
  until grep -q "== mempo iteration 1/" $R/seed$s.log 2>/dev/null; do over $s && return; sleep 2; done
  echo "seed $s SFT and ReAct SFT done, RL starts at $(el)s" >> $R/done.txt
  mkdir -p $d/eval6
  for v in mempo grpo; do
    until grep -q "== $v iteration 7/" $R/seed$s.log 2>/dev/null; do over $s && return; sleep 2; done
    echo "seed $s $v iteration 6 done at $(el)s" >> $R/done.txt
    for k in 2 4 8; do
      head -n 32 $w/test-k$k.jsonl > $d/eval6/test-k$k.jsonl
      mr=(); [ "$k" = 2 ] || mr=(--no-memory-reward)
      $BIN/mempo-rollout --model $d/$v/iter6 --tasks $d/eval6/test-k$k.jsonl --index $d/index --out $d/eval6/$v-k$k.parquet \
        --max-step-tokens 96 --topk 2 --hint=false --score-gold-numbered --score-lead-in "<think>all {k} answers are known</think><answer>" \
        --score-layout turn --batch 128 --overwrite --device $DEVICE --group 1 --temperature 0 --keep 1 "${mr[@]}" >> $d/eval6.log 2>&1
    done
  done
  echo "seed $s iteration-6 evaluation done at $(el)s" >> $R/done.txt; }
post() { local d=$1 a=() i v f k
  for v in mempo grpo; do for i in $(seq 1 20); do [ -f $d/$v/rollouts-$i.parquet ] && a+=(--rollouts $d/$v/rollouts-$i.parquet --label $v-$i); done; done
  $BIN/mempo-score "${a[@]}" --bootstrap 200 --out $d/curve.jsonl > /dev/null 2>&1
  a=(); for v in mempo grpo; do for k in 2 4 8; do [ -f $d/eval6/$v-k$k.parquet ] && a+=(--rollouts $d/eval6/$v-k$k.parquet --label ${v}6); done; done
  $BIN/mempo-score "${a[@]}" --out $d/eval6-scores.jsonl > /dev/null 2>&1
  for f in $d/mempo/rollouts-1.parquet $d/mempo/rollouts-12.parquet $d/grpo/rollouts-12.parquet $d/eval/{sft,mempo,grpo}-k{2,4,8}.parquet $d/eval6/{mempo,grpo}-k{2,4,8}.parquet; do
    [ -f $f ] && $BIN/memdrops $f; done > $d/drops.txt 2>&1; }
js=()
for s in 1 2 3; do
  ev6 $s & e=$!
  ( SEED=$s OUT=$R/seed$s bash scripts/demo/run.sh > $R/seed$s.log 2>&1
    echo "seed $s rc $? at $(el)s" >> $R/done.txt
    until grep -q "seed $s iteration-6 evaluation done" $R/done.txt || ! kill -0 $e 2>/dev/null; do sleep 2; done
    post $R/seed$s ) &
  js+=($! $e)
done
wait "${js[@]}"
REUSE=1 OUT=$R bash scripts/demo/check.sh > $R/check.txt 2>&1
# The iteration-6 checkpoints, pooled over the seeds.
a=(); for s in 1 2 3; do for v in mempo grpo; do for k in 2 4 8; do f=$R/seed$s/eval6/$v-k$k.parquet; [ -f $f ] && a+=(--rollouts $f --label ${v}6); done; done; done
$BIN/mempo-score "${a[@]}" --out $R/pooled-eval6.jsonl > /dev/null 2>&1
echo "all done at $(el)s" >> $R/done.txt
kill $packer; pack
cat $R/done.txt; tail -45 $R/check.txt
