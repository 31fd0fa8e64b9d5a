#!/usr/bin/env bash
# GPU check of what landed unverified: the shared-prefix R^M passes, the frozen-bf16 memory check, then the rollout benchmark both ways
set -u
B=/tmp/r16a; mkdir -p $B && { [ -x $B/bin/model.test ] || tar -xzf .work/r16a/b.tgz -C $B; }
( . scripts/gpu/env.sh; gpu_env $B/lib
  cd lib/model && MEMPO_REQUIRE_CUDA=1 timeout 150 $B/bin/model.test -test.v -test.count=1 -test.run 'TestCUDALogProbsShared|TestCUDAFrozenBF16' ) > $OUT/tests.log 2>&1
grep -E "^(--- |ok|FAIL|PASS)|ran |shared_test|lora_test" $OUT/tests.log | head -30
( . scripts/gpu/env.sh; gpu_env $B/lib
  BIN=$B/bin DATA=$B/hotpotqa QWEN_TOKENIZER=$B/tokenizer.json CONFIG=qwen2.5-0.5b DEVICE=cuda-bf16 G=16 TURNS=8 FORCE=7 \
  STEP=32 OBS=256 BATCH=1024 MODES="overlap unshared" TIMEOUT=150 bash scripts/bench_rollout.sh 64 /tmp/roll ) > $OUT/rollout.log 2>&1
grep -E "^==|mempo-rollout:" $OUT/rollout.log | cut -c1-900
