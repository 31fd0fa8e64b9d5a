#!/usr/bin/env bash
# dec_persist with each warp's next-phase weights copied to shared memory ahead (default) against the same
# without (nopre) and separate launches (sep), batch 1 and 4, same process; the decoding step's GPU tests first.
set -u
B=/tmp/pf1; mkdir -p /tmp && tar -xJf .work/pf1.tar.xz -C /tmp
( . scripts/gpu/env.sh; gpu_env $B/lib; cd lib/model
  MEMPO_REQUIRE_CUDA=1 MEMPO_CUDA_DEBUG=1 timeout 150 $B/model.test -test.v -test.count=1 \
    -test.run '^(TestCUDADecodeKernels|TestCUDADecodeStep|TestCUDAParityWithTransformers|TestCUDABF16|TestCUDAPool)$' > $OUT/decode-tests.log 2>&1
  echo "tests rc $?" )
grep -E "^(--- |FAIL|ok|PASS)|panic|persist|Error" $OUT/decode-tests.log | grep -v "^    --- PASS" | head -30
( . scripts/gpu/env.sh; gpu_env $B/lib; cd lib/model
  MEMPO_CUDA_BENCH=1 MEMPO_CUDA_DECODE_BENCH_MODES=graph-persist,graph-persist-nopre,graph-sep,graph-persist,graph-persist-nopre \
  MEMPO_CUDA_DECODE_BENCH_MODELS=qwen2.5-0.5b,qwen2.5-1.5b,qwen2.5-7b MEMPO_CUDA_DECODE_BENCH_BATCHES=1,4 \
  timeout 300 $B/model.test -test.v -test.count=1 -test.timeout 0 -test.run '^TestCUDADecodeBenchmarks$' > $OUT/decode-bench.log 2>&1
  echo "decode bench rc $?" )
grep -E "^BENCH" $OUT/decode-bench.log | grep -v " kernel " | grep -v "loaded" | sed 's/ (incl. prefill)//'
