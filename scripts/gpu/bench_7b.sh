#!/usr/bin/env bash
# The Qwen2.5-7B full-parameter MemPO loop on one GPU (docs/BENCHMARKS.md):
# the CUDA optimizer tests, then `mempo-update init --config qwen2.5-7b
# --dtype bf16`, then rollout → update → rollout → update → rollout with the
# 8-bit optimizer state (--optim-state 8bit, bf16 weights + remainders), the
# first update also over long-context rows (make_long_rollouts.py: SEQS rows
# of 4000 + 96 ids), then the PyTorch reference step on the same long rows
# (bench_7b_torch.py). Each stage prints its wall time; the updates print
# their peak GPU memory; nvidia-smi samples memory every 200 ms (smi.log);
# bytes written per iteration are du of the checkpoint and the state file.
# A stage starts only if DEADLINE (seconds since the start) leaves it room.
#   usage: bench_7b.sh DIR     (DIR: bin/ cuda.test update.test mempo-*, lib/, index/, tasks.jsonl, tokenizer.json)
set -uo pipefail
D=$(cd "$1" && pwd)
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH="$D/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
. "$D/env.sh"
gpu_env "$D/lib"
B=$D/bin W=/tmp/m7 SHM=/dev/shm/mempo7
G=${G:-16} TASKS=${TASKS:-8} STEP_TOKENS=${STEP_TOKENS:-128} SEQS=${SEQS:-16} DEADLINE=${DEADLINE:-300}
DEV="--device cuda-bf16"
mkdir -p $W $SHM
T0=$(date +%s.%N)
el() { echo "$(date +%s.%N) $T0" | awk '{printf "%.1f", $1-$2}'; }
room() { awk -v e="$(el)" -v n="$1" -v d="$DEADLINE" 'BEGIN{exit !(e+n<=d)}'; }
stage() { # name, seconds it needs, command...
	local name=$1 need=$2; shift 2
	if ! room "$need"; then echo "== $name: SKIPPED (t=$(el) s, needs ~$need s, deadline $DEADLINE s)"; return 1; fi
	echo "== $name (t=$(el) s): $*"
	local s; s=$(date +%s.%N)
	"$@" 2>&1 | tr '\r' '\n' | tail -30
	local rc=${PIPESTATUS[0]}
	echo "== $name: exit $rc, $(echo "$(date +%s.%N) $s" | awk '{printf "%.1f", $1-$2}') s"
	return $rc
}
nvidia-smi --query-gpu=timestamp,memory.used --format=csv,noheader,nounits -lms 200 >"$OUT/smi.log" 2>&1 &
SMI=$!
{
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
df -h / /dev/shm | tail -2
stage tests 40 bash -c "cd lib/cuda && MEMPO_REQUIRE_CUDA=1 $B/cuda.test -test.v -test.run 'AdamW' && cd ../update && MEMPO_REQUIRE_CUDA=1 $B/update.test -test.v -test.run 'DeviceOptimizer'"
stage init 60 $B/mempo-update init --config qwen2.5-7b --dtype bf16 --tokenizer $D/tokenizer.json --out $W/m0 || exit 1
python3 $D/make_long_rollouts.py $W/long.jsonl --tasks 2 --group $((SEQS / 2)) --context 4000 --output 96
ROLL="$B/mempo-rollout --tasks $D/tasks.jsonl --index $D/index --group $G --limit $TASKS --batch $((G * TASKS)) --max-turns 1 --max-step-tokens $STEP_TOKENS --no-memory-reward --seed 1 $DEV"
UPD="$B/mempo-update --kl-coef 0 --optim-state 8bit --recompute --micro-tokens 4096 --lr 1e-6 $DEV"
stage rollout-1 60 $ROLL --model $W/m0 --out $W/r1.parquet || exit 1
stage update-1 110 $UPD --model $W/m0 --rollouts $W/r1.parquet --rollouts $W/long.jsonl --out $W/m1 --optimizer-dir $SHM || exit 1
echo "bytes written by update-1: $(du -sb $W/m1 | cut -f1) in $W/m1 + $(du -sbc $SHM/*.safetensors | tail -1 | cut -f1) in $SHM"; ls -la $W/m1 $SHM
rm -rf $W/m0
stage rollout-2 60 $ROLL --model $W/m1 --out $W/r2.parquet
stage update-2 90 $UPD --model $W/m1 --rollouts $W/r2.parquet --out $W/m2 && {
	echo "bytes written by update-2: $(du -sb $W/m2 | cut -f1) in $W/m2"; ls -la $W/m2; }
stage torch 60 env SEQS=$SEQS MICRO=1 PYTHONUNBUFFERED=1 python3 $D/bench_7b_torch.py
stage rollout-3 60 $ROLL --model $W/m2 --out $W/r3.parquet
for i in 1 2; do [ -f $W/m$i/update_metrics.jsonl ] && { echo "metrics of update-$i:"; cat $W/m$i/update_metrics.jsonl; }; done
echo "total $(el) s"
} 2>&1 | tee "$OUT/bench.log"
kill $SMI 2>/dev/null
awk -F', ' '{if ($2+0 > m) m = $2+0} END {print "nvidia-smi peak memory.used (MiB):", m}' "$OUT/smi.log" | tee -a "$OUT/bench.log"
gzip -f "$OUT/smi.log"
