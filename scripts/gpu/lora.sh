#!/usr/bin/env bash
# The LoRA checks and the Qwen2.5-7B LoRA measurement, on the GPU machine, in one command (stages in order of
# importance; each is logged to $OUT as it ends, so a run cut short keeps what it measured):
#   1. lib/model's CUDA adapter tests (TestCUDALoRADropout, TestCUDALoRA, TestCUDAFrozenBF16);
#   2. scripts/check_peft.py on adapters that mempo-update trains over a tiny random base (made by
#      `MEMPO_PEFT_FIXTURE=DIR go test ./cmd/mempo-update -run TestWritePeftFixture`), once on the CPU and once on
#      CUDA (fp32): peft loads each onto the base, logits match, merge matches merge_and_unload;
#   3. Qwen2.5-7B shape (mempo-update init --config qwen2.5-7b --dtype bf16), 8 tasks × G = 16: rollout
#      (`mempo-rollout generate`, cuda-bf16) → LoRA update (rank 64, all seven projections, --recompute) → rollout
#      with --adapter → second update continuing the adapter; wall time, peak GPU memory (nvidia-smi every 100 ms),
#      bytes written and the log-prob drift of each stage; the same update step in transformers + peft
#      (scripts/gpu/lora7b.py peft-step) right after the first update.
#   usage: scripts/gpu/lora.sh BUNDLE_DIR FIXTURE_DIR TOKENIZER_JSON [PROMPT_LEN NEW_TOKENS]
# BUNDLE_DIR is scripts/gpu/bundle.sh's bin/gpu (this script uses mempo-update, mempo-rollout, model.test and lib/);
# with this workplace's device tool it travels as a tarball (tar -czf; about 27 MB for those files, under the
# 64 MB the tool carries) unpacked on the device, with the fixture and a gzipped tokenizer.json beside it.
set -uo pipefail
B=$1 FX=$2 TOK=$3 PLEN=${4:-256} NEW=${5:-256}
S=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-$PWD/gpu-out}
W=${LORA_WORK:-/tmp/mempo-lora}
mkdir -p "$OUT" "$W"
. "$S/gpu/env.sh"
gpu_env "$B/lib"
log() { echo "$*" | tee -a "$OUT/lora.log"; }
# peak MiB of GPU memory used while a command runs (nvidia-smi every 100 ms), and its wall time.
stage() {
	local name=$1
	shift
	nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 100 >"$W/$name.mem" 2>/dev/null &
	local mon=$! t0
	t0=$(date +%s.%N)
	"$@" >"$OUT/$name.log" 2>&1
	local rc=$?
	kill $mon 2>/dev/null
	wait $mon 2>/dev/null
	local t1 peak
	t1=$(date +%s.%N)
	peak=$(sort -n "$W/$name.mem" | tail -1)
	log "STAGE $name rc $rc wall_s $(awk "BEGIN {printf \"%.1f\", $t1 - $t0}") peak_gpu_mib ${peak:-?}"
	tail -3 "$OUT/$name.log" | sed 's/^/    /' | tee -a "$OUT/lora.log"
	return $rc
}
log "$(date -u) $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader)"

# 1. CUDA adapter tests.
stage cuda-tests env MEMPO_REQUIRE_CUDA=1 "$B/model.test" -test.v -test.count=1 -test.run '^TestCUDA(LoRADropout|LoRA|FrozenBF16)$'

# 2. peft loads our adapters.
for dev in cpu cuda; do
	D=$W/peft-$dev
	rm -rf "$D"
	stage "peft-train-$dev" "$B/mempo-update" --model "$FX/base" --rollouts "$FX/rollouts.jsonl" --out "$D/lora" \
		--device "$dev" --lr 1e-2 --mini-batch 2 --lora-rank 4 --lora-alpha 8 --kl-coef 0.1 --golden "$D/golden.safetensors"
	stage "peft-merge-$dev" "$B/mempo-update" merge --model "$FX/base" --adapter "$D/lora" --out "$D/merged"
	stage "peft-check-$dev" python3 "$S/check_peft.py" "$FX/base" "$D/lora" "$D/golden.safetensors" --merged "$D/merged"
done

# 3. Qwen2.5-7B LoRA iterations.
BASE=$W/q7b
stage init7b "$B/mempo-update" init --config qwen2.5-7b --dtype bf16 --tokenizer "$TOK" --out "$BASE" --seed 1 --force
python3 "$S/gpu/lora7b.py" prompts --out "$W/prompts.jsonl" --tasks 8 --len "$PLEN" --vocab 152064
GEN=(--in "$W/prompts.jsonl" --n 16 --max-tokens "$NEW" --ignore-eos --temperature 1 --device cuda-bf16)
UPD=(--model "$BASE" --device cuda-bf16 --recompute --micro-tokens 8192 --mini-batch 64 --lr 1e-5 --kl-coef 0.001)
stage rollout1 "$B/mempo-rollout" generate --model "$BASE" "${GEN[@]}" --seed 1 --out "$W/gen1.jsonl" &&
	python3 "$S/gpu/lora7b.py" rollouts --gen "$W/gen1.jsonl" --out "$W/r1.jsonl" &&
	stage update1 "$B/mempo-update" "${UPD[@]}" --rollouts "$W/r1.jsonl" --out "$W/it1" --lora-rank 64 --lora-alpha 128 &&
	{ log "WRITTEN it1 $(du -sb "$W/it1" | cut -f1) bytes: $(cd "$W/it1" && ls -l | awk 'NR>1 {printf "%s %s; ", $9, $5}')"
	  log "METRICS it1 $(cat "$W/it1/update_metrics.jsonl" | tr '\n' ' ' | head -c 1500)"; }
stage peft-step7b python3 "$S/gpu/lora7b.py" peft-step --model "$BASE" --rollouts "$W/r1.jsonl" --rank 64 --alpha 128 \
	--mini-batch 64 --micro-tokens 8192
grep BENCH "$OUT/peft-step7b.log" | tee -a "$OUT/lora.log"
stage rollout2 "$B/mempo-rollout" generate --model "$BASE" --adapter "$W/it1" "${GEN[@]}" --seed 2 --out "$W/gen2.jsonl" &&
	python3 "$S/gpu/lora7b.py" rollouts --gen "$W/gen2.jsonl" --out "$W/r2.jsonl" &&
	stage update2 "$B/mempo-update" "${UPD[@]}" --rollouts "$W/r2.jsonl" --adapter "$W/it1" --out "$W/it2" &&
	{ log "WRITTEN it2 $(du -sb "$W/it2" | cut -f1) bytes"
	  log "METRICS it2 $(cat "$W/it2/update_metrics.jsonl" | tr '\n' ' ' | head -c 1500)"; }
log "done $(date -u)"
