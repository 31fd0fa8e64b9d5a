#!/usr/bin/env bash
# One call, what the device time left allowed (the demo's fresh seeds did
# not fit it):
#  1. the GPU tests of 36d4b55 (a later turn's task prompt read where
#     another request keeps it; the prefill attending with a many-row
#     prefix: checkAttentionPrefix on every path, TestCUDAGenerateSharedPrefixes,
#     the decoding step's tests) and of the training step's kernels (3a77295:
#     the norm backward's dw summed in the dx pass), all at main;
#  2. the training step at 0.5B (8 × 2048), main against 9b8d3c4 (the
#     commit before 3a77295), alternating, then PyTorch's step (LM head in
#     chunks, eager and compiled) in the same command.
#   carry: .work/dw.tar.xz (scripts/gpu/pack.sh dw model.test model.test@9b8d3c4)
set -uo pipefail
B=/tmp/dw; [ -x $B/bin/model.test ] || tar -xJf .work/dw.tar.xz -C /tmp
. scripts/gpu/env.sh; gpu_env $B/lib
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > $OUT/gpu.txt
T='^(TestCUDAAttention|TestCUDAAttentionGemm|TestCUDAGenerateSharedPrefixes|TestCUDADecodeKernels|TestCUDADecodeStep|TestCUDABF16|TestCUDADualBF16|TestCUDANormEmbedRoPE|TestCUDAParityWithTransformers)$'
(cd lib/model && MEMPO_REQUIRE_CUDA=1 timeout 200 $B/bin/model.test -test.v -test.count=1 -test.run "$T" > $OUT/tests.log 2>&1
	echo "tests rc $?" >> $OUT/tests.log)
grep -E "^(--- |FAIL|ok|PASS)|panic|tests rc" $OUT/tests.log | grep -v "^    --- PASS" | head -20
bench() { # size binary-suffix label
	(cd lib/model && MEMPO_CUDA_BENCH=1 MEMPO_CUDA_BENCH_RUNS=qwen2.5-$1:bf16 timeout 60 $B/bin/model.test$2 \
		-test.v -test.count=1 -test.timeout 0 -test.run 'TestCUDABenchmarks$' > /tmp/b.log 2>&1
	echo "bench rc $?" >> /tmp/b.log; sed "s/^/$3 /" /tmp/b.log >> $OUT/bench-$1.log)
}
bench 0.5b "" new; bench 0.5b .old old; bench 0.5b "" new; bench 0.5b .old old
(MEMPO_CUDA_BENCH_MODELS=qwen2.5-0.5b MEMPO_TORCH_DTYPES=bf16 MEMPO_TORCH_PARTS=train MEMPO_TORCH_TRAIN=chunked,compiled \
	PYTHONUNBUFFERED=1 timeout 150 python3 scripts/gpu/bench_torch.py; echo "torch rc $?") > /tmp/t.log 2>&1
sed "s/^/torch /" /tmp/t.log >> $OUT/bench-0.5b.log
grep -hE "(train B|train: kernels|rmsnorm_bwd|prefill B)|rc [0-9]|out of memory|torch-bf16" $OUT/bench-*.log | cut -c1-200
