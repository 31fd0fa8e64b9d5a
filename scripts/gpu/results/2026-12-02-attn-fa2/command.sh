#!/usr/bin/env bash
# One H200 call: lib/model's CUDA tests with the changed attnmma.cu, then the
# training benchmark (TestCUDABenchmarks, bf16) of the main before the change
# (base.test) and after it (new.test), 0.5B then 1.5B, in the same process
# order each time. Bundle: both test binaries and their libraries in $W.
set -uo pipefail
W=${W:-.work/ab.tgz}
tar -C /tmp -xzf "$W"
. scripts/gpu/env.sh
gpu_env /tmp/ab/lib
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > $OUT/gpu.txt
cd lib/model
timeout 300 /tmp/ab/new.test -test.run 'TestCUDA' -test.skip 'Benchmarks' -test.count=1 -test.v > $OUT/tests-new.log 2>&1
echo "tests rc $?" | tee -a $OUT/tests-new.log
bench() { MEMPO_CUDA_BENCH=1 MEMPO_CUDA_BENCH_RUNS=$2:bf16 timeout 200 /tmp/ab/$1.test -test.v -test.count=1 \
	-test.timeout 0 -test.run 'TestCUDABenchmarks$' > $OUT/$1-$2.log 2>&1; }
for m in qwen2.5-0.5b qwen2.5-1.5b; do bench base $m; bench new $m; done
