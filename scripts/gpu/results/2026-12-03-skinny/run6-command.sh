#!/usr/bin/env bash
# The step with skinny.cu for q, k and v only (graph, the default now) against cuBLAS for every product
# (graph-cublas) and skinny.cu for every product (graph-skinnyall), same process; the decoding step's GPU tests first
set -u
B=/tmp/sk6; mkdir -p /tmp && tar -xJf .work/sk6.tar.xz -C /tmp
( . scripts/gpu/env.sh; gpu_env $B/lib; cd lib/model
  MEMPO_REQUIRE_CUDA=1 MEMPO_CUDA_DEBUG=1 timeout 150 $B/model.test -test.v -test.count=1 \
    -test.run '^(TestCUDADecodeKernels|TestCUDADecodeStep|TestCUDAParityWithTransformers|TestCUDABF16|TestCUDAPool)$' > $OUT/decode-tests.log 2>&1
  echo "tests rc $?" )
grep -E "^(--- |FAIL|ok|PASS)|panic|skinny|Error" $OUT/decode-tests.log | grep -v "^    --- PASS" | head -30
( . scripts/gpu/env.sh; gpu_env $B/lib; cd lib/model
  MEMPO_CUDA_BENCH=1 MEMPO_CUDA_DECODE_BENCH_MODES=graph,graph-cublas,graph-skinnyall MEMPO_CUDA_DECODE_BENCH_MODELS=qwen2.5-0.5b,qwen2.5-7b MEMPO_CUDA_DECODE_BENCH_BATCHES=8,32,64 \
  timeout 260 $B/model.test -test.v -test.count=1 -test.timeout 0 -test.run '^TestCUDADecodeBenchmarks$' > $OUT/decode-bench.log 2>&1
  echo "decode bench rc $?" )
grep -E "^BENCH" $OUT/decode-bench.log | grep -v " kernel " | grep -v "loaded\|device" | sed 's/ (incl. prefill)//'
grep -E " kernel " $OUT/decode-bench.log | grep "B=32 " | head -16
