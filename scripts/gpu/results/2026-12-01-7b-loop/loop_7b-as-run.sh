#!/usr/bin/env bash
# Two MemPO iterations at the Qwen2.5-7B shape on one GPU, rollout → update →
# rollout → update → rollout, one way per call (docs/BENCHMARKS.md, "Qwen2.5-7B
# loop"):
#   lora  LoRA rank 64 (alpha 128, all seven projections), the frozen bf16 base
#         as the KL reference (--kl-coef 0.001), rollouts with --adapter;
#   full  full-parameter with the 8-bit optimizer state (--optim-state 8bit,
#         bf16 weights + 16-bit remainders, the state in $SHM), --kl-coef 0 (a
#         reference would be a second 15 GB model), each rollout from the
#         checkpoint the last update wrote.
# The rollouts are `mempo-rollout generate` over TASKS random prompts of LENS
# ids (task t gets LENS[t mod n]), G samples each of NEW ids: contexts up to
# 3,840 + 256 = 4,096 ids, every output id's log-prob the rollout policy's own,
# so the update's log-prob drift is clean. Each stage logs its wall time and
# the peak of nvidia-smi's memory.used every 100 ms; each update its bytes
# written and metrics rows (drift, peak_gpu_bytes). The base is made once
# (mempo-update init --config qwen2.5-7b --dtype bf16) and kept in $W/base, so
# a second call on a warm machine reuses it (full deletes it after its first
# update). Old checkpoints are deleted as soon as nothing reads them: the
# device's disk holds about two 15 GB ones.
#   usage: loop_7b.sh lora|full BUNDLE_DIR TOKENIZER_JSON
#   env:   TASKS (8) G (16) LENS (3840,1792,768,256) NEW (256) W (/tmp/mempo-7b)
#          SHM (/dev/shm/mempo-7b) DEADLINE (seconds for the whole script, 560)
#          CONFIG (qwen2.5-7b) DEVICE (cuda-bf16): a small preset and cpu check the script anywhere
#          AFTER (a command run as a stage after the second update, before the last rollout)
set -uo pipefail
MODE=$1 B=$(cd "$2" && pwd) TOK=$3
CONFIG=${CONFIG:-qwen2.5-7b} DEVICE=${DEVICE:-cuda-bf16}
S=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-$PWD/gpu-out}
W=${W:-/tmp/mempo-7b} SHM=${SHM:-/dev/shm/mempo-7b}
TASKS=${TASKS:-8} G=${G:-16} LENS=${LENS:-3840,1792,768,256} NEW=${NEW:-256} DEADLINE=${DEADLINE:-560}
mkdir -p "$OUT" "$W" "$SHM"
. "$S/gpu/env.sh"
gpu_env "$B/lib"
LOG=$OUT/loop-$MODE.log
T0=$(date +%s)
log() { echo "$*" | tee -a "$LOG"; }
# stage NAME NEED_S CMD...: runs CMD unless fewer than NEED_S seconds are left.
stage() {
	local name=$1 need=$2
	shift 2
	if (($(date +%s) - T0 + need > DEADLINE)); then
		log "STAGE $name SKIPPED at t=$(($(date +%s) - T0)) s (needs ~$need s of the $DEADLINE)"
		return 1
	fi
	nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 100 >"$W/$name.mem" 2>/dev/null &
	local mon=$! t0 t1 rc peak
	t0=$(date +%s.%N)
	"$@" >"$OUT/$MODE-$name.log" 2>&1
	rc=$?
	t1=$(date +%s.%N)
	kill $mon 2>/dev/null
	wait $mon 2>/dev/null
	peak=$(sort -n "$W/$name.mem" | tail -1)
	log "STAGE $name rc $rc wall_s $(awk "BEGIN {printf \"%.1f\", $t1 - $t0}") peak_gpu_mib ${peak:-?}"
	tail -4 "$OUT/$MODE-$name.log" | sed 's/^/    /' | tee -a "$LOG"
	return $rc
}
log "$(date -u) $MODE: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader); disk: $(df -h / | tail -1)"
BASE=$W/base
if [[ ! -f $BASE/config.json ]]; then
	rm -rf "$BASE"
	stage init 70 "$B/mempo-update" init --config "$CONFIG" --dtype bf16 --tokenizer "$TOK" --out "$BASE" --seed 1 || exit 1
fi
python3 "$S/gpu/lora7b.py" prompts --out "$W/prompts.jsonl" --tasks "$TASKS" --lens "$LENS" --vocab 152064
GEN=(--in "$W/prompts.jsonl" --n "$G" --max-tokens "$NEW" --ignore-eos --temperature 1 --device "$DEVICE")
UPD=(--device "$DEVICE" --recompute --micro-tokens 4096 --mini-batch $((TASKS * G / 2)))
case $MODE in
lora) UPD+=(--model "$BASE" --lr 1e-5 --kl-coef 0.001 --lora-rank 64 --lora-alpha 128) ;;
full) UPD+=(--lr 1e-6 --kl-coef 0 --optim-state 8bit --optimizer-dir "$SHM") ;;
*) echo "mode: lora or full" >&2; exit 2 ;;
esac
policy() { # the rollout's policy flags after i updates
	case $MODE in
	lora) if (($1 == 0)); then echo "--model $BASE"; else echo "--model $BASE --adapter $W/$MODE-$1"; fi ;;
	full) if (($1 == 0)); then echo "--model $BASE"; else echo "--model $W/$MODE-$1"; fi ;;
	esac
}
rm -rf "$W"/lora-* "$W"/full-* "$SHM"/*
for i in 1 2 3; do
	if ((i == 3)) && [[ -n ${AFTER:-} ]]; then
		stage after 120 bash -c "$AFTER"
	fi
	# shellcheck disable=SC2046
	stage "rollout$i" 60 "$B/mempo-rollout" generate $(policy $((i - 1))) "${GEN[@]}" --seed "$i" --out "$W/gen$i.jsonl" || break
	python3 "$S/gpu/lora7b.py" rollouts --gen "$W/gen$i.jsonl" --out "$W/r$i.jsonl" >/dev/null
	(($i == 3)) && break
	prev=()
	if ((i == 2)); then
		case $MODE in
		lora) prev=(--adapter "$W/$MODE-1") ;;
		full) prev=(--model "$W/$MODE-1") ;;
		esac
	elif [[ $MODE == full ]]; then
		prev=(--model "$BASE")
	fi
	stage "update$i" 200 "$B/mempo-update" "${UPD[@]}" "${prev[@]}" --rollouts "$W/r$i.jsonl" --out "$W/$MODE-$i" || break
	shm=0
	[[ $MODE == full ]] && shm=$(du -sbc "$SHM/$MODE-$i"-* 2>/dev/null | tail -1 | cut -f1)
	log "WRITTEN update$i $(du -sb "$W/$MODE-$i" | cut -f1) B in the checkpoint + $shm B of optimizer state in $SHM"
	log "FILES update$i $(cd "$W/$MODE-$i" && ls -l | awk 'NR>1 {printf "%s %s; ", $9, $5}')"
	log "METRICS update$i $(tr '\n' ' ' <"$W/$MODE-$i/update_metrics.jsonl" | head -c 3000)"
	grep -h "peak GPU memory" "$OUT/$MODE-update$i.log" | sed 's/^/    /' | tee -a "$LOG"
	# Free the disk: a full-parameter iteration's input is read no more.
	if [[ $MODE == full ]]; then
		if ((i == 1)); then rm -rf "$BASE"; else rm -rf "$W/$MODE-1" "$SHM/$MODE-1"-*; fi
	fi
done
log "done $(date -u), $(($(date +%s) - T0)) s"
