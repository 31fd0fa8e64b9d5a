#!/usr/bin/env bash
# skinny.cu: the decoding step's GPU tests; the products alone (skinny vs cuBLAS, then PyTorch);
# decoding at 0.5B and 7B with skinny products (graph) against cuBLAS ones (graph-cublas), same process
set -u
B=/tmp/sk1; mkdir -p /tmp && tar -xJf .work/sk1.tar.xz -C /tmp
( . scripts/gpu/env.sh; gpu_env $B/lib; cd lib/model
  MEMPO_REQUIRE_CUDA=1 MEMPO_CUDA_DEBUG=1 timeout 150 $B/model.test -test.v -test.count=1 \
    -test.run '^(TestCUDADecodeKernels|TestCUDADecodeStep|TestCUDAParityWithTransformers|TestCUDABF16|TestCUDAPool)$' > $OUT/decode-tests.log 2>&1
  echo "tests rc $?" )
grep -E "^(--- |FAIL|ok|PASS)|panic|skinny|Error" $OUT/decode-tests.log | grep -v "^    --- PASS" | head -30
( . scripts/gpu/env.sh; gpu_env $B/lib; cd lib/model
  MEMPO_CUDA_BENCH=1 timeout 110 $B/model.test -test.v -test.count=1 -test.run '^TestCUDASkinnyBenchmarks$' > $OUT/skinny-bench.log 2>&1
  echo "skinny bench rc $?" )
grep -E "^BENCH" $OUT/skinny-bench.log | grep -E "device|m=32|m= 8" | sed 's/ of the read floor/ of floor/'
timeout 90 python3 $B/bench_skinny.py > $OUT/skinny-torch.log 2>&1; echo "torch rc $?"
grep -E "m=32|device" $OUT/skinny-torch.log
( . scripts/gpu/env.sh; gpu_env $B/lib; cd lib/model
  MEMPO_CUDA_BENCH=1 MEMPO_CUDA_DECODE_BENCH_MODES=graph,graph-cublas MEMPO_CUDA_DECODE_BENCH_MODELS=qwen2.5-0.5b,qwen2.5-7b \
  timeout 200 $B/model.test -test.v -test.count=1 -test.timeout 0 -test.run '^TestCUDADecodeBenchmarks$' > $OUT/decode-bench.log 2>&1
  echo "decode bench rc $?" )
grep -E "^BENCH" $OUT/decode-bench.log | grep -v " kernel " | grep -v "B=1 \|B=256"
grep -E " kernel " $OUT/decode-bench.log | grep "B=32 " | head -24
