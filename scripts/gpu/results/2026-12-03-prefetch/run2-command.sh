#!/usr/bin/env bash
# Call 2: the weights-ahead copy queued as soon as a warp has summed the ones before (not at the phase's end), in
# kernels of their own (_pre; the plain kernels as before), with budgets of 16 and 64 KiB a block against all that fits,
# none (nopre) and separate launches (sep), batch 1, same process; main before the change (model_old.test) after it.
set -u
B=/tmp/pf2; mkdir -p /tmp && tar -xJf .work/pf2.tar.xz -C /tmp
( . scripts/gpu/env.sh; gpu_env $B/lib; cd lib/model
  MEMPO_REQUIRE_CUDA=1 MEMPO_CUDA_DEBUG=1 timeout 150 $B/model.test -test.v -test.count=1 \
    -test.run '^(TestCUDADecodeKernels|TestCUDADecodeStep|TestCUDAParityWithTransformers|TestCUDABF16|TestCUDAPool)$' > $OUT/decode-tests.log 2>&1
  echo "tests rc $?" )
grep -E "^(--- |FAIL|ok|PASS)|panic|Error|dec_persist" $OUT/decode-tests.log | grep -v "^    --- PASS\|waited past 20ms" | head -30
( . scripts/gpu/env.sh; gpu_env $B/lib; cd lib/model
  MEMPO_CUDA_BENCH=1 MEMPO_CUDA_DECODE_BENCH_MODES=graph-persist-nopre,graph-persist,graph-persist-pre64,graph-persist-pre16,graph-sep,graph-persist-nopre,graph-persist \
  MEMPO_CUDA_DECODE_BENCH_MODELS=qwen2.5-0.5b,qwen2.5-7b MEMPO_CUDA_DECODE_BENCH_BATCHES=1 \
  timeout 200 $B/model.test -test.v -test.count=1 -test.timeout 0 -test.run '^TestCUDADecodeBenchmarks$' > $OUT/decode-bench.log 2>&1
  echo "decode bench rc $?"
  MEMPO_CUDA_BENCH=1 MEMPO_CUDA_DECODE_BENCH_MODES=graph-persist,graph-sep \
  MEMPO_CUDA_DECODE_BENCH_MODELS=qwen2.5-0.5b,qwen2.5-7b MEMPO_CUDA_DECODE_BENCH_BATCHES=1 \
  timeout 120 $B/model_old.test -test.v -test.count=1 -test.timeout 0 -test.run '^TestCUDADecodeBenchmarks$' > $OUT/decode-bench-old.log 2>&1
  echo "old decode bench rc $?" )
grep -E "^BENCH" $OUT/decode-bench.log | grep -v " kernel " | grep -v "loaded\|fused step" | sed 's/ (incl. prefill)//; s/tokens\/s = //g'
echo "--- main before (model_old.test)"
grep -E "^BENCH" $OUT/decode-bench-old.log | grep -v " kernel " | grep -v "loaded\|fused step" | sed 's/ (incl. prefill)//; s/tokens\/s = //g'
