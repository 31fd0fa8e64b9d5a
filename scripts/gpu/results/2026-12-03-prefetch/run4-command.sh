#!/usr/bin/env bash
# Call 4: dec_persist with the products' warps numbered across the blocks (the new default) against block by block
# (bmajor, as before) and separate launches, batch 1 and 4, same process; the decoding step's GPU tests first.
set -u
B=/tmp/il1; mkdir -p /tmp && tar -xJf .work/il1.tar.xz -C /tmp
( . scripts/gpu/env.sh; gpu_env $B/lib; cd lib/model
  MEMPO_REQUIRE_CUDA=1 MEMPO_CUDA_DEBUG=1 timeout 150 $B/model.test -test.v -test.count=1 \
    -test.run '^(TestCUDADecodeKernels|TestCUDADecodeStep|TestCUDAParityWithTransformers|TestCUDABF16|TestCUDAPool)$' > $OUT/decode-tests.log 2>&1
  echo "tests rc $?" )
grep -E "^(--- |FAIL|ok|PASS)|panic|Error" $OUT/decode-tests.log | grep -v "^    --- PASS" | head -30
( . scripts/gpu/env.sh; gpu_env $B/lib; cd lib/model
  MEMPO_CUDA_BENCH=1 MEMPO_CUDA_DECODE_BENCH_MODES=graph-persist,graph-persist-bmajor,graph-sep,graph-persist,graph-persist-bmajor \
  MEMPO_CUDA_DECODE_BENCH_MODELS=qwen2.5-0.5b,qwen2.5-1.5b,qwen2.5-7b MEMPO_CUDA_DECODE_BENCH_BATCHES=1,4 \
  timeout 300 $B/model.test -test.v -test.count=1 -test.timeout 0 -test.run '^TestCUDADecodeBenchmarks$' > $OUT/decode-bench.log 2>&1
  echo "decode bench rc $?" )
grep -E "^BENCH" $OUT/decode-bench.log | grep -v " kernel \|loaded\|fused step" | sed 's/ (incl. prefill)//; s/tokens\/s = //g'
