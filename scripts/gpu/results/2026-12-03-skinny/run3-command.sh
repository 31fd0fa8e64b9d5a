#!/usr/bin/env bash
# skinny.cu: copies indexed by constants, iterations counted without divisions, rows swizzled instead of padded,
# four stages (model.test) against the same with padded rows and three stages (model_sk3.test): the decoding step's
# GPU tests; the products alone, both builds; decoding at 0.5B and 7B with skinny products (graph) against cuBLAS
# ones (graph-cublas), same process
set -u
B=/tmp/sk4; mkdir -p /tmp && tar -xJf .work/sk4.tar.xz -C /tmp
( . scripts/gpu/env.sh; gpu_env $B/lib; cd lib/model
  MEMPO_REQUIRE_CUDA=1 MEMPO_CUDA_DEBUG=1 timeout 150 $B/model.test -test.v -test.count=1 \
    -test.run '^(TestCUDADecodeKernels|TestCUDADecodeStep|TestCUDAParityWithTransformers|TestCUDABF16|TestCUDAPool)$' > $OUT/decode-tests.log 2>&1
  echo "tests rc $?" )
grep -E "^(--- |FAIL|ok|PASS)|panic|skinny|Error" $OUT/decode-tests.log | grep -v "^    --- PASS" | head -30
for v in model model_sk3; do
( . scripts/gpu/env.sh; gpu_env $B/lib; cd lib/model
  MEMPO_CUDA_BENCH=1 timeout 100 $B/$v.test -test.v -test.count=1 -test.run '^TestCUDASkinnyBenchmarks$' > $OUT/skinny-bench-$v.log 2>&1
  echo "skinny bench $v rc $?" )
grep -E "^BENCH" $OUT/skinny-bench-$v.log | grep -E "resident|m=32|m= 8" | sed -e "s/^BENCH skinny/$v/" -e 's/ of the floor/ of/' | cut -c1-170
done
( . scripts/gpu/env.sh; gpu_env $B/lib; cd lib/model
  MEMPO_CUDA_BENCH=1 MEMPO_CUDA_DECODE_BENCH_MODES=graph,graph-cublas MEMPO_CUDA_DECODE_BENCH_MODELS=qwen2.5-0.5b,qwen2.5-7b MEMPO_CUDA_DECODE_BENCH_BATCHES=8,32,64 \
  timeout 220 $B/model.test -test.v -test.count=1 -test.timeout 0 -test.run '^TestCUDADecodeBenchmarks$' > $OUT/decode-bench.log 2>&1
  echo "decode bench rc $?" )
grep -E "^BENCH" $OUT/decode-bench.log | grep -v " kernel " | grep -v "loaded\|device" | sed 's/ (incl. prefill)//'
grep -E " kernel " $OUT/decode-bench.log | grep "B=32 " | head -12
