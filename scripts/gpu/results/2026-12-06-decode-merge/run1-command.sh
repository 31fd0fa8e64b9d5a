#!/usr/bin/env bash
# Call 1: split_merge with the splits' weights from one round trip and four splits' loads in flight (both decoding
# paths), dec_persist's norms staged in shared memory, and each product phase's first weight rows prefetched to L2
# before its norm or staging (nopf: without the prefetch), against separate launches (sep), batch 1 and 4, same
# process, and in blocks of 16 warps (w16); main before the change (model_old.test, c6fdcfd) after it. The decoding
# step's GPU tests first.
set -u
B=/tmp/dp1; mkdir -p /tmp && tar -xJf .work/dp1.tar.xz -C /tmp
( . scripts/gpu/env.sh; gpu_env $B/lib; cd lib/model
  MEMPO_REQUIRE_CUDA=1 MEMPO_CUDA_DEBUG=1 timeout 150 $B/model.test -test.v -test.count=1 \
    -test.run '^(TestCUDADecodeKernels|TestCUDADecodeStep|TestCUDAParityWithTransformers|TestCUDABF16|TestCUDAPool)$' > $OUT/decode-tests.log 2>&1
  echo "tests rc $?" )
grep -E "^(--- |FAIL|ok|PASS)|panic|Error|dec_persist" $OUT/decode-tests.log | grep -v "^    --- PASS\|waited past 20ms" | head -30
( . scripts/gpu/env.sh; gpu_env $B/lib; cd lib/model
  MEMPO_CUDA_BENCH=1 MEMPO_CUDA_DECODE_BENCH_MODES=graph-persist,graph-persist-w16,graph-persist-nopf,graph-sep,graph-persist,graph-persist-w16,graph-persist-nopf \
  MEMPO_CUDA_DECODE_BENCH_MODELS=qwen2.5-0.5b,qwen2.5-7b MEMPO_CUDA_DECODE_BENCH_BATCHES=1,4 \
  timeout 220 $B/model.test -test.v -test.count=1 -test.timeout 0 -test.run '^TestCUDADecodeBenchmarks$' > $OUT/decode-bench.log 2>&1
  echo "decode bench rc $?"
  MEMPO_CUDA_BENCH=1 MEMPO_CUDA_DECODE_BENCH_MODES=graph-persist,graph-sep \
  MEMPO_CUDA_DECODE_BENCH_MODELS=qwen2.5-0.5b,qwen2.5-7b MEMPO_CUDA_DECODE_BENCH_BATCHES=1,4 \
  timeout 150 $B/model_old.test -test.v -test.count=1 -test.timeout 0 -test.run '^TestCUDADecodeBenchmarks$' > $OUT/decode-bench-old.log 2>&1
  echo "old decode bench rc $?" )
grep -E "^BENCH" $OUT/decode-bench.log | grep -v "loaded\|fused step" | sed 's/ (incl. prefill)//; s/tokens\/s = //g'
echo "--- main before (model_old.test)"
grep -E "^BENCH" $OUT/decode-bench-old.log | grep -v "loaded\|fused step" | sed 's/ (incl. prefill)//; s/tokens\/s = //g'
