#!/usr/bin/env bash
# One GPU call for issue 18: does a larger tiny model read its memory? Five
# PRESET=gpu cold starts of seed 1 in parallel (SFT, then one RL iteration of
# each method so that there are rollouts to score): the world's model (2
# layers, hidden 128) and three larger shapes with answer rows from subsets
# of the final memory (ANSWER_MEMORY=subset), and the largest shape with the
# step's memory; then, for each, what its cold start copies from a memory
# (memscore copy) and how it ranks a dropped fact (memscore pairs), on the
# first MemPO iteration's rollouts, and its greedy table.
#   carry: .work/mempool.tar.xz (as ../2026-12-06-demo-answer-subset)
set -uo pipefail
B=/tmp/mempool; rm -rf $B; tar -xJf .work/mempool.tar.xz -C /tmp
. scripts/gpu/env.sh
gpu_env $B/lib
export BIN=$B/bin DEVICE=${DEVICE:-cuda} PRESET=gpu SEED=1 ITERS=${ITERS:-1} EVAL_TASKS=${EVAL_TASKS:-32}
R=${R:-/tmp/r}; rm -rf $R; mkdir -p $R
T0=$(date +%s)
el() { echo $(( $(date +%s) - T0 )); }
# shape NAME LAYERS HIDDEN HEADS KV_HEADS MLP: a config.json from the world's.
shape() { python3 - "$@" <<'PY'
import json, sys
name, layers, hidden, heads, kv, mlp = sys.argv[1], *map(int, sys.argv[2:])
c = json.load(open("data/world/model-config.json"))
c.update(num_hidden_layers=layers, hidden_size=hidden, num_attention_heads=heads, num_key_value_heads=kv,
         intermediate_size=mlp, max_window_layers=layers, layer_types=["full_attention"] * layers)
json.dump(c, open(f"/tmp/r/{name}.json", "w"), indent=2)
PY
}
shape l2h128 2 128 4 2 256
shape l4h128 4 128 4 2 256
shape l2h256 2 256 4 2 512
shape l4h256 4 256 8 4 512
pack() { (cd $R/.. && tar czf $OUT/.res.tgz --exclude='*.parquet' --exclude='*.safetensors' --exclude='iter[0-9]*' --exclude='init' --exclude='sft-react-init' --exclude='index' --exclude='variants' --exclude='sft-world' --exclude='rl-world-k*' --exclude='test-world' --exclude='*tasks*.jsonl' --exclude='world' --exclude='tokenizer*.json' --exclude='*.html' --exclude='*.png' --exclude='report' --exclude='demos*' --exclude='answers*' --exclude='seqs.jsonl' --exclude='lp.jsonl' "$(basename $R)" 2>/dev/null; mv $OUT/.res.tgz $OUT/results.tgz); }
( while sleep 10; do el > $R/elapsed.txt; pack; done ) &
packer=$!
run() { local name=$1 cfg=$2 mem=$3 d=$R/$1
  mkdir -p $d
  MODEL_CONFIG=$R/$cfg.json ANSWER_MEMORY=$mem OUT=$d timeout ${RUN_LIMIT:-480} bash scripts/demo/run.sh > $d.log 2>&1
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
for spec in "l2h128-subset l2h128 subset" "l4h128-subset l4h128 subset" "l2h256-subset l2h256 subset" \
	"l4h256-subset l4h256 subset" "l4h256-step l4h256 step"; do
  run $spec & pids+=($!)
done
wait "${pids[@]}"
echo "all done at $(el)s" >> $R/done.txt
kill $packer; pack
cat $R/done.txt
for d in $R/*/; do echo "== $d"; sed -n 5,9p $d/summary.md; grep "| turn" $d/memscore-copy.md; grep "| turn" $d/memscore-pairs.md; done
