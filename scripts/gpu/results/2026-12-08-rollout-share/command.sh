#!/usr/bin/env bash
# The MemPO rollout benchmark (0.5B shape, bf16, G = 16, 64 tasks, up to 8
# turns of which 7 forced searches, BM25 over HotpotQA through mempo-serve,
# R^M on, batch 1,024) with each prompt cached once and later turns'
# task prompt shared (main: cc331da, 36d4b55, ab0bc39) against d706580
# (every row its own copy of its prompt), at the default KV budget (half the
# free memory) and at --kv-gib 1, where the layout decides how many calls a
# turn takes. Alternating, new first; PASSES (2) times over.
#   carry: .work/rs.tar.xz (main's mempo-index, -serve, -rollout, -update,
#   d706580's mempo-rollout as mempo-rollout.old, their libraries, the Qwen3
#   tokenizer and HotpotQA dev-a: scripts/gpu/pack.sh rs mempo-index
#   mempo-serve mempo-rollout mempo-update mempo-rollout@d706580 rolloutdata)
#   Not yet run (2026-12-08: the device time ran out before a machine came).
set -uo pipefail
B=/tmp/rs; [ -x $B/bin/mempo-rollout ] || tar -xJf .work/rs.tar.xz -C /tmp
. scripts/gpu/env.sh; gpu_env $B/lib
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > $OUT/gpu.txt
mkdir -p /tmp/rsold; for c in mempo-index mempo-serve mempo-update; do ln -sf $B/bin/$c /tmp/rsold/$c; done
ln -sf $B/bin/mempo-rollout.old /tmp/rsold/mempo-rollout
W=/tmp/rsw; mkdir -p $W
run() { # label bin extra
	echo "#### $1"
	idx=(); [ -d $W/index ] && idx=(INDEX=$W/index)
	env "${idx[@]}" BIN=$2 DATA=$B/data QWEN_TOKENIZER=$B/data/tokenizer.json CONFIG=qwen2.5-0.5b DEVICE=cuda-bf16 G=16 TURNS=8 FORCE=7 \
		STEP=32 OBS=256 BATCH=1024 MODES=overlap TIMEOUT=60 EXTRA="$3" bash scripts/bench_rollout.sh 64 $W 2>&1
}
for pass in $(seq ${PASSES:-2}); do
	run "new default" $B/bin ""
	run "old default" /tmp/rsold ""
	run "new kv-gib 1" $B/bin "--kv-gib 1"
	run "old kv-gib 1" /tmp/rsold "--kv-gib 1"
done > $OUT/rollout.log 2>&1
grep -E "^####|mempo-rollout:|failed|rror" $OUT/rollout.log | cut -c1-400
