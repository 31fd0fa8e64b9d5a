#!/usr/bin/env bash
# Call 3: the persistent kernels' registers and local memory (cuFuncGetAttribute), and the _pre kernels with 4 pieces
# in flight a lane (preu4) against 8, none (nopre) and separate launches; batch 1, same process.
set -u
B=/tmp/pf3; mkdir -p /tmp && tar -xJf .work/pf3.tar.xz -C /tmp
( . scripts/gpu/env.sh; gpu_env $B/lib; cd lib/model
  MEMPO_CUDA_BENCH=1 MEMPO_CUDA_DECODE_BENCH_MODES=graph-persist-nopre,graph-persist,graph-persist-preu4,graph-persist-pre32-preu4,graph-sep,graph-persist-nopre \
  MEMPO_CUDA_DECODE_BENCH_MODELS=qwen2.5-0.5b,qwen2.5-7b MEMPO_CUDA_DECODE_BENCH_BATCHES=1 \
  timeout 200 $B/model.test -test.v -test.count=1 -test.timeout 0 -test.run '^TestCUDADecodeBenchmarks$' > $OUT/decode-bench.log 2>&1
  echo "decode bench rc $?" )
grep "kernel resources" $OUT/decode-bench.log
grep -E "^BENCH" $OUT/decode-bench.log | grep -v " kernel \|loaded\|fused step" | sed 's/ (incl. prefill)//; s/tokens\/s = //g'
