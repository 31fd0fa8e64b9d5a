#!/usr/bin/env bash
# One GPU call for issue 18: make demo-check at PRESET=gpu with the slot
# memory (MEM_SLOTS=1: every objective listed from the first step, "[j] ?"
# until found), answer rows from the step's memory, two RL runs per method
# and seed (RL_RUNS=2), the seeds in parallel; then, for
# each seed's cold start, what the scorer copies (memscore copy) and how it
# ranks a dropped fact against the next step's filed one (memscore pairs),
# on the first MemPO iteration's rollouts. Results are packed into
# $OUT/results.tgz every 10 s.
#   carry: .work/mempool.tar.xz (commands and memscore/memdrops built from
#   a807b98, scripts/gpu/bundle.sh's libraries)
set -uo pipefail
B=/tmp/mempool; rm -rf $B; tar -xJf .work/mempool.tar.xz -C /tmp
. scripts/gpu/env.sh
gpu_env $B/lib
export BIN=$B/bin DEVICE=${DEVICE:-cuda} PRESET=gpu PARALLEL=1 ANSWER_MEMORY=${ANSWER_MEMORY:-step} MEM_SLOTS=${MEM_SLOTS:-1} RL_RUNS=${RL_RUNS:-2}
R=${R:-/tmp/r}; rm -rf $R; mkdir -p $R
T0=$(date +%s)
el() { echo $(( $(date +%s) - T0 )); }
pack() { (cd $R/.. && tar czf $OUT/.res.tgz --exclude='*.parquet' --exclude='*.safetensors' --exclude='iter[0-9]*' --exclude='init' --exclude='sft-react-init' --exclude='index' --exclude='variants' --exclude='sft-world' --exclude='rl-world-k*' --exclude='test-world' --exclude='*tasks*.jsonl' --exclude='world' --exclude='tokenizer*.json' --exclude='*.html' --exclude='*.png' --exclude='report' --exclude='demos*' --exclude='answers*' --exclude='seqs.jsonl' --exclude='lp.jsonl' "$(basename $R)" 2>/dev/null; mv $OUT/.res.tgz $OUT/results.tgz); }
( while sleep 10; do el > $R/elapsed.txt; pack; done ) &
packer=$!
OUT=$R/check timeout ${CHECK_LIMIT:-470} bash scripts/demo/check.sh > $R/check.log 2>&1
echo "check rc $? at $(el)s" >> $R/done.txt
for s in 1 2 3; do
  d=$R/check/seed$s f=$R/check/seed$s/mempo/rollouts-1.parquet
  [ -f $f ] || continue
  $BIN/memscore seqs $f $d/sft/tokenizer.json > $d/seqs.jsonl &&
  $BIN/mempo-score logprobs --model $d/sft --in $d/seqs.jsonl --out $d/lp.jsonl --device $DEVICE &&
  { $BIN/memscore copy $d/lp.jsonl $d/sft/tokenizer.json > $d/memscore-copy.md
    $BIN/memscore pairs $d/lp.jsonl > $d/memscore-pairs.md
    $BIN/memscore summary $d/lp.jsonl > $d/memscore-summary.md; }
  for e in $d $R/check/seed$s-rl*/; do e=${e%/}
    for g in $e/eval/{sft,mempo,grpo}-k{2,4,8}.parquet; do [ -f $g ] && $BIN/memdrops $g; done > $e/drops.txt 2>&1
  done
done
echo "all done at $(el)s" >> $R/done.txt
kill $packer; pack
cat $R/done.txt; tail -40 $R/check.log
grep -h "| turn" $R/check/seed*/memscore-copy.md | head -40
