#!/usr/bin/env bash
# One H200 call: lib/model's CUDA tests of v7.test (final/'s v6 with the gate
# and up products in bf16 only in the training pass, the decoding step as
# before), then its training benchmark (bf16, 8x2048), 0.5B then 1.5B.
set -uo pipefail
W=${W:-.work/ab7.tgz}
tar -C /tmp -xzf "$W"
. scripts/gpu/env.sh
gpu_env /tmp/ab7/lib
(cd lib/model && timeout 200 /tmp/ab7/v7.test -test.run 'TestCUDA' -test.skip 'Benchmarks' -test.count=1 -test.v > $OUT/tests-v7.log 2>&1)
echo "v7 tests rc $?" | tee -a $OUT/tests-v7.log
bench() { (cd lib/model && MEMPO_CUDA_BENCH=1 MEMPO_CUDA_BENCH_RUNS=$2:bf16 timeout 200 /tmp/ab7/$1.test -test.v -test.count=1 \
	-test.timeout 0 -test.run 'TestCUDABenchmarks$') > $OUT/$1-$2.log 2>&1; }
for m in qwen2.5-0.5b qwen2.5-1.5b; do bench v7 $m; done
