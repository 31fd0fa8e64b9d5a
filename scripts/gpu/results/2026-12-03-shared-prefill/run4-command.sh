#!/usr/bin/env bash
# Fourth call: swiglu_f32x4 (SwiGLU of fp32 gate and up, four elements a thread).
# The GPU tests it touches, then the 0.5B rollout benchmark alternating the
# new mempo-rollout and the one before it (bin/mempo-rollout-old, the commit
# before), the new one's third run with kernel times.
set -u
B=/tmp/s33; [ -x $B/bin/model.test ] || tar -xJf .work/s33.tar.xz -C /tmp
mkdir -p /tmp/binold; for f in $B/bin/*; do ln -sf $f /tmp/binold/; done; ln -sf $B/bin/mempo-rollout-old /tmp/binold/mempo-rollout
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; } > $OUT/tests.log 2>&1
( . scripts/gpu/env.sh; gpu_env $B/lib
  cd lib/model && MEMPO_REQUIRE_CUDA=1 timeout 80 $B/bin/model.test -test.v -test.count=1 \
    -test.run '^(TestCUDAGenerateSharedPrefixes|TestCUDABF16|TestCUDAElementwiseOps|TestCUDADecodeStep)$' ) >> $OUT/tests.log 2>&1
echo "tests rc $?"
grep -E "^(--- |ok|FAIL|PASS)|panic|Error" $OUT/tests.log | head -20
bench() { # bench BINDIR MODES [env...]
  local bin=$1 modes=$2; shift 2
  ( . scripts/gpu/env.sh; gpu_env $B/lib
    env "$@" BIN=$bin DATA=$B/hotpotqa QWEN_TOKENIZER=$B/tokenizer.json CONFIG=qwen2.5-0.5b DEVICE=cuda-bf16 G=16 TURNS=8 FORCE=7 \
    STEP=32 OBS=256 BATCH=1024 MODES="$modes" TIMEOUT=90 INDEX=${INDEX:-} bash scripts/bench_rollout.sh 64 /tmp/roll )
}
for v in new old new-times old; do
  d=$B/bin; [ $v = old ] && d=/tmp/binold
  e=X=1; [ $v = new-times ] && e=MEMPO_CUDA_KERNEL_TIMES=1
  echo "#### $v"; bench $d overlap $e
done > $OUT/rollout.log 2>&1
grep -E "^####|mempo-rollout:|^kernel times|^  [a-z]|^    " $OUT/rollout.log | cut -c1-1000
