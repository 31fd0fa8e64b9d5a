#!/usr/bin/env bash
# One H200 call: lib/model's CUDA tests with 128-row forward tiles and
# 64-query dK/dV tiles at head dim 128 too (v2.test), then the training
# benchmark (bf16, 8x2048) of the previous step (v1.test: 64-row tiles and
# 32-query tiles at 128) and of v2, 1.5B, and v2 at 0.5B.
set -uo pipefail
W=${W:-.work/ab2.tgz}
tar -C /tmp -xzf "$W"
. scripts/gpu/env.sh
gpu_env /tmp/ab2/lib
cd lib/model
timeout 300 /tmp/ab2/v2.test -test.run 'TestCUDA' -test.skip 'Benchmarks' -test.count=1 -test.v > $OUT/tests-v2.log 2>&1
echo "tests rc $?" | tee -a $OUT/tests-v2.log
bench() { MEMPO_CUDA_BENCH=1 MEMPO_CUDA_BENCH_RUNS=$2:bf16 timeout 200 /tmp/ab2/$1.test -test.v -test.count=1 \
	-test.timeout 0 -test.run 'TestCUDABenchmarks$' > $OUT/$1-$2.log 2>&1; }
bench v1 qwen2.5-1.5b; bench v2 qwen2.5-1.5b; bench v2 qwen2.5-0.5b
