#!/usr/bin/env bash
# Issue 15's Done-when run on one GPU, in one command (docs/BENCHMARKS.md "Qwen2.5-7B MemPO iterations, both
# ways"): the CUDA optimizer tests, then `mempo-update init --config qwen2.5-7b --dtype bf16` (one copy of random
# bf16 weights), then 8 tasks × G = 16 rollouts (`mempo-rollout generate`, prompts of LENS ids + NEW sampled ids:
# contexts up to 4,096) and rollout → update → rollout iterations two ways: full-parameter (--optim-state 8bit,
# bf16 weights, the state in /dev/shm) and LoRA rank 64, plus the same update step in PyTorch on the same
# trajectories (bench_7b_torch.py ROWS=…: transformers, fused AdamW; lora7b.py peft-step: transformers + peft).
# Stages run in order of importance and only while DEADLINE (seconds since the start) leaves each its room;
# each logs its wall time, nvidia-smi's peak memory.used (every 100 ms) and its last lines to $OUT/loop.log, and
# its whole output to $OUT/stages.log (two files: the device tool brings back at most eight). Run it from the
# repository root (the tests run in lib/cuda and lib/update).
#   usage: loop_7b.sh DIR   (DIR: bin/ with mempo-update, mempo-rollout, cuda.test, update.test; lib/;
#                            tokenizer.json; the scripts lora7b.py, bench_7b_torch.py, env.sh)
# env: DEADLINE (280), CONFIG (qwen2.5-7b), DEV (cuda-bf16), LENS (task prompt lengths), NEW (128),
#      WORK (/tmp/loop7), SHM (/dev/shm/loop7), TORCH (1: run the PyTorch stages), TESTS (1),
#      PART (all; 1 or 2: the halves, for a device whose commands are limited to 10 minutes — part 1 is the
#      tests, init, the first rollouts and iteration 1 both ways; part 2 the second iterations and the final
#      rollouts, and it needs part 1's WORK and SHM on the same machine)
set -uo pipefail
D=$(cd "$1" && pwd) R=$PWD
B=$D/bin
OUT=${OUT:-$PWD/gpu-out}
W=${WORK:-/tmp/loop7} SHM=${SHM:-/dev/shm/loop7}
CONFIG=${CONFIG:-qwen2.5-7b} DEV=${DEV:-cuda-bf16} DEADLINE=${DEADLINE:-280}
LENS=${LENS:-128,128,256,256,512,512,1024,3968} NEW=${NEW:-128}
mkdir -p "$OUT" "$W" "$SHM"
. "$D/env.sh"
gpu_env "$D/lib"
T0=$(date +%s.%N)
el() { echo "$(date +%s.%N) $T0" | awk '{printf "%.1f", $1-$2}'; }
log() { echo "$*" | tee -a "$OUT/loop.log"; }
smi() { command -v nvidia-smi >/dev/null && nvidia-smi "$@"; }
# stage NAME SECONDS_NEEDED CMD...: runs CMD if the deadline leaves room.
stage() {
	local name=$1 need=$2
	shift 2
	if awk -v e="$(el)" -v n="$need" -v d="$DEADLINE" 'BEGIN{exit !(e+n>d)}'; then
		log "STAGE $name SKIPPED at t=$(el) s (needs ~$need s, deadline $DEADLINE s)"
		return 1
	fi
	smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 100 >"$W/$name.mem" 2>/dev/null &
	local mon=$! t0 rc
	t0=$(date +%s.%N)
	"$@" >"$W/$name.log" 2>&1
	rc=$?
	{ echo "==== $name (rc $rc)"; cat "$W/$name.log"; } >>"$OUT/stages.log"
	kill $mon 2>/dev/null
	wait $mon 2>/dev/null
	log "STAGE $name rc $rc t=$(el) wall_s $(echo "$(date +%s.%N) $t0" | awk '{printf "%.1f", $1-$2}') peak_gpu_mib $(sort -n "$W/$name.mem" | tail -1)"
	tr '\r' '\n' <"$W/$name.log" | tail -4 | cut -c1-600 | sed 's/^/    /' | tee -a "$OUT/loop.log"
	return $rc
}
written() { # NAME DIR [STATE_FILES...]: bytes an update wrote
	local name=$1 dir=$2
	shift 2
	log "WRITTEN $name $(du -sb "$dir" | cut -f1) B in $dir ($(cd "$dir" && ls -l | awk 'NR>1 {printf "%s %s; ", $9, $5}'))$(
		[ $# -gt 0 ] && echo " + $(du -sbc "$@" | tail -1 | cut -f1) B of state in $*")"
	log "METRICS $name $(tr '\n' ' ' <"$dir/update_metrics.jsonl" | cut -c1-1500)"
}
gen() { # MODEL OUT SEED [--adapter DIR]
	local m=$1 o=$2 s=$3
	shift 3
	"$B/mempo-rollout" generate --model "$m" "$@" --in "$W/prompts.jsonl" --n 16 --max-tokens "$NEW" --ignore-eos \
		--temperature 1 --device "$DEV" --seed "$s" --out "$W/$o.gen.jsonl" &&
		python3 "$D/lora7b.py" rollouts --gen "$W/$o.gen.jsonl" --out "$W/$o.jsonl"
}
log "$(date -u) $(smi --query-gpu=name,driver_version,memory.total --format=csv,noheader) config $CONFIG lens $LENS new $NEW"
log "$(df -h / /dev/shm "$W" | tail -n +2 | tr '\n' ';')"

PART=${PART:-all}
part() { [ "$PART" = all ] || [ "$PART" = "$1" ]; }
FULL=(--device "$DEV" --optim-state 8bit --recompute --micro-tokens 4096 --lr 1e-6 --kl-coef 0)
LORA=(--device "$DEV" --recompute --micro-tokens 4096 --lr 1e-5 --kl-coef 0.001)
if [ "$PART" = 2 ] && ! [ -f "$W/m0/config.json" -a -f "$W/f1/config.json" -a -f "$W/l1/adapter_config.json" ]; then
	log "part 2 needs part 1's $W/m0, $W/f1 and $W/l1 on this machine; run part 1 first"
	exit 1
fi
if part 1; then
	if [ "${TESTS:-1}" = 1 ]; then
		stage tests 30 bash -c "cd $R/lib/cuda && MEMPO_REQUIRE_CUDA=1 $B/cuda.test -test.v -test.count=1 -test.run 'AdamW8KernelMatchesOptim|AdamWKernelMatchesOptim' &&
			cd $R/lib/update && MEMPO_REQUIRE_CUDA=1 $B/update.test -test.v -test.count=1 -test.run 'DeviceOptimizer'"
	fi
	stage init 60 "$B/mempo-update" init --config "$CONFIG" --dtype bf16 --tokenizer "$D/tokenizer.json" --out "$W/m0" --seed 1 || exit 1
	python3 "$D/lora7b.py" prompts --out "$W/prompts.jsonl" --tasks 8 --lens "$LENS" --vocab 151643
	stage rollout1 40 gen "$W/m0" r1 1 || exit 1

	# Full-parameter, iteration 1, and PyTorch on the same trajectories.
	stage full-update1 120 "$B/mempo-update" "${FULL[@]}" --model "$W/m0" --rollouts "$W/r1.jsonl" --out "$W/f1" \
		--optimizer-dir "$SHM" && written full-update1 "$W/f1" "$SHM"/*.safetensors &&
		stage full-rollout2 40 gen "$W/f1" rf2 2
	[ "${TORCH:-1}" = 1 ] && stage torch-full 60 env ROWS="$W/r1.jsonl" STEPS=2 PYTHONUNBUFFERED=1 python3 "$D/bench_7b_torch.py"

	# LoRA over the same base m0, and peft on the same trajectories.
	stage lora-update1 50 "$B/mempo-update" "${LORA[@]}" --model "$W/m0" --rollouts "$W/r1.jsonl" --out "$W/l1" \
		--lora-rank 64 --lora-alpha 128 && written lora-update1 "$W/l1" &&
		stage lora-rollout2 40 gen "$W/m0" rl2 2 --adapter "$W/l1"
	[ "${TORCH:-1}" = 1 ] && stage peft-step 60 python3 "$D/lora7b.py" peft-step --model "$W/m0" --rollouts "$W/r1.jsonl" \
		--rank 64 --alpha 128 --mini-batch 128 --micro-tokens 4096
fi
if part 2; then
	stage lora-update2 50 "$B/mempo-update" "${LORA[@]}" --model "$W/m0" --adapter "$W/l1" --rollouts "$W/rl2.jsonl" \
		--out "$W/l2" && written lora-update2 "$W/l2" &&
		stage lora-rollout3 40 gen "$W/m0" rl3 3 --adapter "$W/l2"

	# Full-parameter, iteration 2 (m0 is no longer needed: the disk holds two 7B checkpoints, /dev/shm one state;
	# this iteration keeps no optimizer state, --optimizer-every 3, for that reason).
	if [ -f "$W/rf2.jsonl" ]; then
		rm -rf "$W/m0"
		stage full-update2 120 "$B/mempo-update" "${FULL[@]}" --model "$W/f1" --rollouts "$W/rf2.jsonl" --out "$W/f2" \
			--optimizer-dir "$SHM" --optimizer-every 3 && written full-update2 "$W/f2" &&
			stage full-rollout3 40 gen "$W/f2" rf3 3
	fi
fi
log "done at t=$(el) s, $(date -u)"
