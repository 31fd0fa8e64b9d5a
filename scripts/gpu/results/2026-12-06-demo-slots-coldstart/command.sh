#!/usr/bin/env bash
# One GPU call for issue 18: does the slot memory (MEM_SLOTS=1: every
# objective listed from the first step, "[j] ?" until found) make the
# world's model read the middle objectives from its memory? One PRESET=gpu
# cold start of seed 1 with one RL iteration of each method so that there
# are rollouts to score; then what it copies from a memory (memscore copy)
# and how it ranks a dropped fact (memscore pairs), on the first MemPO
# iteration's rollouts, and its greedy table.
#   carry: .work/mempool.tar.xz (as ../2026-12-06-demo-scorer-shapes, with
#   mempo-rollout and memscore built at a807b98)
set -uo pipefail
B=/tmp/mempool; rm -rf $B; tar -xJf .work/mempool.tar.xz -C /tmp
. scripts/gpu/env.sh
gpu_env $B/lib
export BIN=$B/bin DEVICE=${DEVICE:-cuda} PRESET=gpu SEED=1 ITERS=${ITERS:-1} EVAL_TASKS=${EVAL_TASKS:-32}
R=${R:-/tmp/r}; rm -rf $R; mkdir -p $R
T0=$(date +%s)
el() { echo $(( $(date +%s) - T0 )); }
pack() { (cd $R/.. && tar czf $OUT/.res.tgz --exclude='*.parquet' --exclude='*.safetensors' --exclude='iter[0-9]*' --exclude='init' --exclude='sft-react-init' --exclude='index' --exclude='variants' --exclude='sft-world' --exclude='rl-world-k*' --exclude='test-world' --exclude='*tasks*.jsonl' --exclude='world' --exclude='tokenizer*.json' --exclude='*.html' --exclude='*.png' --exclude='report' --exclude='demos*' --exclude='answers*' --exclude='seqs.jsonl' --exclude='lp.jsonl' "$(basename $R)" 2>/dev/null; mv $OUT/.res.tgz $OUT/results.tgz); }
( while sleep 10; do el > $R/elapsed.txt; pack; done ) &
packer=$!
run() { local name=$1 slots=$2 d=$R/$1
  mkdir -p $d
  MEM_SLOTS=$slots OUT=$d timeout ${RUN_LIMIT:-300} bash scripts/demo/run.sh > $d.log 2>&1
  echo "$name rc $? at $(el)s" >> $R/done.txt
  f=$d/mempo/rollouts-1.parquet; [ -f $f ] || return
  $BIN/memscore seqs $f $d/sft/tokenizer.json > $d/seqs.jsonl &&
  $BIN/mempo-score logprobs --model $d/sft --in $d/seqs.jsonl --out $d/lp.jsonl --device $DEVICE &&
  { $BIN/memscore copy $d/lp.jsonl $d/sft/tokenizer.json > $d/memscore-copy.md
    $BIN/memscore pairs $d/lp.jsonl > $d/memscore-pairs.md
    $BIN/memscore summary $d/lp.jsonl > $d/memscore-summary.md; }
  echo "$name scored at $(el)s" >> $R/done.txt
}
pids=()
for spec in "slots 1"; do
  run $spec & pids+=($!)
done
wait "${pids[@]}"
echo "all done at $(el)s" >> $R/done.txt
kill $packer; pack
cat $R/done.txt
for d in $R/*/; do echo "== $d"; sed -n 5,9p $d/summary.md; grep "| turn" $d/memscore-copy.md; grep "| turn" $d/memscore-pairs.md; done
