#!/usr/bin/env bash
# GPU check of the shared prefill (model.Generate: a prompt that begins like
# another continues its keys and values; cache-row copies as one gather and
# scatter a layer): the lib/model GPU tests it touches, then the rollout
# benchmark of issue 16 with and without it (--no-shared-prefill).
set -u
B=/tmp/s31; [ -x $B/bin/model.test ] || tar -xJf .work/s31.tar.xz -C /tmp
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; } > $OUT/tests.log 2>&1
( . scripts/gpu/env.sh; gpu_env $B/lib
  cd lib/model && MEMPO_REQUIRE_CUDA=1 timeout 200 $B/bin/model.test -test.v -test.count=1 \
    -test.run '^(TestCUDAGenerateSharedPrefixes|TestCUDALogProbsShared|TestCUDAFrozenBF16|TestCUDADecodeStep|TestCUDAParityWithTransformers|TestCUDABF16|TestCUDAPool)$' ) >> $OUT/tests.log 2>&1
echo "tests rc $?"
grep -E "^(--- |ok|FAIL|PASS)|prefill ran|panic" $OUT/tests.log | head -40
( . scripts/gpu/env.sh; gpu_env $B/lib
  BIN=$B/bin DATA=$B/hotpotqa QWEN_TOKENIZER=$B/tokenizer.json CONFIG=qwen2.5-0.5b DEVICE=cuda-bf16 G=16 TURNS=8 FORCE=7 \
  STEP=32 OBS=256 BATCH=1024 MODES="overlap whole-prefill overlap whole-prefill" TIMEOUT=120 bash scripts/bench_rollout.sh 64 /tmp/roll ) > $OUT/rollout.log 2>&1
grep -E "^==|mempo-rollout:" $OUT/rollout.log | cut -c1-1000
