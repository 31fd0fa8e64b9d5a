#!/usr/bin/env bash
# Third call: the KV-cache copies and attention's packed keys as runs of rows
# (copy_runs_f32, cast_runs_bf16). The GPU tests of what they touch, then
# the 0.5B rollout benchmark alternating the new mempo-rollout and the one
# before the change (bin/mempo-rollout-old, commit bee7c9d), then the new one
# with MEMPO_CUDA_KERNEL_TIMES=1 (kernel times by phase) and whole-prefill.
set -u
B=/tmp/s32; [ -x $B/bin/model.test ] || tar -xJf .work/s32.tar.xz -C /tmp
mkdir -p /tmp/binold; for f in $B/bin/*; do ln -sf $f /tmp/binold/; done; ln -sf $B/bin/mempo-rollout-old /tmp/binold/mempo-rollout
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; } > $OUT/tests.log 2>&1
( . scripts/gpu/env.sh; gpu_env $B/lib
  cd lib/model && MEMPO_REQUIRE_CUDA=1 timeout 100 $B/bin/model.test -test.v -test.count=1 \
    -test.run '^(TestCUDAGenerateSharedPrefixes|TestCUDALogProbsShared|TestCUDABF16|TestCUDAParityWithTransformers|TestCUDAAttention|TestCUDAFrozenBF16)$' ) >> $OUT/tests.log 2>&1
echo "tests rc $?"
grep -E "^(--- |ok|FAIL|PASS)|panic|Error" $OUT/tests.log | head -20
bench() { # bench BINDIR MODES [env...]
  local bin=$1 modes=$2; shift 2
  ( . scripts/gpu/env.sh; gpu_env $B/lib
    env "$@" BIN=$bin DATA=$B/hotpotqa QWEN_TOKENIZER=$B/tokenizer.json CONFIG=qwen2.5-0.5b DEVICE=cuda-bf16 G=16 TURNS=8 FORCE=7 \
    STEP=32 OBS=256 BATCH=1024 MODES="$modes" TIMEOUT=90 INDEX=${INDEX:-} bash scripts/bench_rollout.sh 64 /tmp/roll )
}
for v in new old new old; do
  d=$B/bin; [ $v = old ] && d=/tmp/binold
  echo "#### $v"; bench $d overlap X=1
done > $OUT/rollout.log 2>&1
grep -E "^####|mempo-rollout:" $OUT/rollout.log | cut -c1-1000
{ echo "#### new, kernel times"; bench $B/bin overlap MEMPO_CUDA_KERNEL_TIMES=1; echo "#### new"; bench $B/bin whole-prefill X=1; } > $OUT/rollout-prof.log 2>&1
grep -E "^####|mempo-rollout:|^kernel times|^  [a-z]|^    " $OUT/rollout-prof.log | cut -c1-1000
