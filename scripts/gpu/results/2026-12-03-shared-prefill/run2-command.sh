#!/usr/bin/env bash
# Second call: the GPU tests again (the bf16 teacher-forced check fixed,
# prefill forwards of 60 ids), then the 0.5B rollout benchmark alternating
# whole-prefill / shared, and with the memory-reward forwards at 16384 ids
# (mem16k, the old default) against the free-memory budget; then the 7B shape
# at 16 tasks (256 trajectories), which before the prefill budget ran every
# prompt of a turn in one forward.
set -u
B=/tmp/s31; [ -x $B/bin/model.test ] || tar -xJf .work/s31.tar.xz -C /tmp
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; } > $OUT/tests.log 2>&1
( . scripts/gpu/env.sh; gpu_env $B/lib
  cd lib/model && MEMPO_REQUIRE_CUDA=1 timeout 200 $B/bin/model.test -test.v -test.count=1 \
    -test.run '^(TestCUDAGenerateSharedPrefixes|TestCUDALogProbsShared|TestCUDAFrozenBF16|TestCUDADecodeStep|TestCUDAParityWithTransformers|TestCUDABF16|TestCUDAPool)$' ) >> $OUT/tests.log 2>&1
echo "tests rc $?"
grep -E "^(--- |ok|FAIL|PASS)|panic|Error" $OUT/tests.log | head -40
( . scripts/gpu/env.sh; gpu_env $B/lib
  BIN=$B/bin DATA=$B/hotpotqa QWEN_TOKENIZER=$B/tokenizer.json CONFIG=qwen2.5-0.5b DEVICE=cuda-bf16 G=16 TURNS=8 FORCE=7 \
  STEP=32 OBS=256 BATCH=1024 MODES="whole-prefill overlap whole-prefill overlap mem16k overlap" TIMEOUT=120 bash scripts/bench_rollout.sh 64 /tmp/roll ) > $OUT/rollout.log 2>&1
grep -E "^==|mempo-rollout:" $OUT/rollout.log | cut -c1-1000
( . scripts/gpu/env.sh; gpu_env $B/lib
  BIN=$B/bin DATA=$B/hotpotqa QWEN_TOKENIZER=$B/tokenizer.json CONFIG=qwen2.5-7b DEVICE=cuda-bf16 G=16 TURNS=8 FORCE=7 \
  STEP=32 OBS=256 BATCH=256 MODES="overlap" TIMEOUT=240 bash scripts/bench_rollout.sh 16 /tmp/roll7 ) > $OUT/rollout7b.log 2>&1
grep -E "^==|mempo-rollout:|init:|rror|memory" $OUT/rollout7b.log | cut -c1-1000
