#!/usr/bin/env bash
# kernels/async.cuh (one definition of the shared-memory address and cp.async helpers, prepended to every module):
# the GPU tests of the three modules that use it: attnmma.cu (TestCUDAAttentionGemm, TestCUDAAttention, TestCUDABF16),
# skinny.cu (TestCUDADecodeKernels, TestCUDADecodeStep) and bert.cu (TestGPUFusedAttention, TestGPUForwardFP16).
set -u
B=/tmp/dd1; mkdir -p /tmp && tar -xJf .work/dd1.tar.xz -C /tmp
( . scripts/gpu/env.sh; gpu_env $B/lib; cd lib/model
  MEMPO_REQUIRE_CUDA=1 timeout 110 $B/model.test -test.v -test.count=1 \
    -test.run '^(TestCUDAAttentionGemm|TestCUDAAttention|TestCUDABF16|TestCUDADecodeKernels|TestCUDADecodeStep)$' > $OUT/model-tests.log 2>&1
  echo "model tests rc $?" )
grep -E "^(--- |FAIL|ok|PASS)|panic|nvrtc" $OUT/model-tests.log | grep -v "^    --- PASS" | head -20
( . scripts/gpu/env.sh; gpu_env $B/lib; cd lib/encoder
  MEMPO_REQUIRE_CUDA=1 timeout 50 $B/encoder.test -test.v -test.count=1 -test.run '^(TestGPUFusedAttention|TestGPUForwardFP16|TestGPUFixtureFP16)$' > $OUT/encoder-tests.log 2>&1
  echo "encoder tests rc $?" )
grep -E "^(--- |FAIL|ok|PASS)|panic|nvrtc|SKIP" $OUT/encoder-tests.log | grep -v "^    --- PASS" | head -20
