#!/usr/bin/env bash
# ProductOnly tensors give their unwritten fp32 storage back once the op
# wrote their bf16 rounding: lib/model's bf16 GPU tests, then the 1.5B training
# step at 8 × 2048 in bf16 mode (which ran out of the H100's 80 GB before) and
# its peak device memory.
#   carry: .work/mem.tar.xz (lib/model's test binary and its libraries)
set -uo pipefail
B=/tmp/mem; [ -x $B/bin/model.test ] || tar -xJf .work/mem.tar.xz -C /tmp
. scripts/gpu/env.sh; gpu_env $B/lib
cd lib/model
MEMPO_REQUIRE_CUDA=1 timeout 40 $B/bin/model.test -test.v -test.count=1 \
	-test.run '^(TestCUDABF16|TestCUDADualBF16|TestCUDALoRA|TestCUDAFrozenBF16|TestCUDATokenLogProbs|TestCUDAPool)$' > $OUT/tests.log 2>&1
echo "tests rc $?" >> $OUT/tests.log
MEMPO_CUDA_BENCH=1 MEMPO_CUDA_BENCH_RUNS=qwen2.5-1.5b:bf16 timeout 45 $B/bin/model.test -test.v -test.count=1 \
	-test.timeout 0 -test.run 'TestCUDABenchmarks$' > $OUT/bench-1.5b.log 2>&1
echo "bench rc $?" >> $OUT/bench-1.5b.log
grep -E "^(--- |ok|PASS|FAIL)|panic|tests rc" $OUT/tests.log | head -20
grep -E "^BENCH.*(train B|train: kernels|prefill)|bench rc|OUT_OF_MEMORY" $OUT/bench-1.5b.log | cut -c1-200
