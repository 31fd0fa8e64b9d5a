#!/usr/bin/env bash
# The training step without three of its four casts a layer: the norm
# backward's dx launch writes dx's bf16 rounding (dy and dh, which the down
# and o_proj backward products and their weight gradients read), and the
# attention backward's row sums write dO's (which attnmma.cu reads); and
# RoPE's backward on dQ made by the dQ kernel as it stores dQ. Against
# the binary before (d706580), alternating, then PyTorch's step (LM head in
# chunks, eager and compiled) in the same command; 1.5B both ways and
# PyTorch. lib/model's bf16 GPU tests with the new binary first.
#   carry: .work/ca.tar.xz (lib/model's test binaries: model.test, main at
#   the call, with a9d44fe, c4e1676 and 5e45e54; model.test.old, d706580,
#   before them; their libraries), made by
#   scripts/gpu/pack.sh ca model.test model.test@d706580
set -uo pipefail
B=/tmp/ca; [ -x $B/bin/model.test ] || tar -xJf .work/ca.tar.xz -C /tmp
. scripts/gpu/env.sh; gpu_env $B/lib
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > $OUT/gpu.txt
T='^(TestCUDAAttentionGemm|TestCUDAAttention|TestCUDABF16|TestCUDADualBF16|TestCUDALoRA|TestCUDAFrozenBF16|TestCUDATokenLogProbs|TestCUDANormEmbedRoPE|TestCUDAParityWithTransformers)$'
(cd lib/model && MEMPO_REQUIRE_CUDA=1 timeout 120 $B/bin/model.test -test.v -test.count=1 -test.run "$T" > $OUT/tests.log 2>&1
	echo "tests rc $?" >> $OUT/tests.log)
bench() { # size binary-suffix label
	(cd lib/model && MEMPO_CUDA_BENCH=1 MEMPO_CUDA_BENCH_RUNS=qwen2.5-$1:bf16 timeout 60 $B/bin/model.test$2 \
		-test.v -test.count=1 -test.timeout 0 -test.run 'TestCUDABenchmarks$' > /tmp/b.log 2>&1
	echo "bench rc $?" >> /tmp/b.log; sed "s/^/$3 /" /tmp/b.log >> $OUT/bench-$1.log)
}
torch() {
	(MEMPO_CUDA_BENCH_MODELS=qwen2.5-$1 MEMPO_TORCH_DTYPES=bf16 MEMPO_TORCH_PARTS=train MEMPO_TORCH_TRAIN=chunked,compiled \
		PYTHONUNBUFFERED=1 timeout 170 python3 scripts/gpu/bench_torch.py; echo "torch rc $?") > /tmp/t.log 2>&1
	sed "s/^/torch /" /tmp/t.log >> $OUT/bench-$1.log
}
bench 0.5b .old old; bench 0.5b "" new; bench 0.5b .old old; bench 0.5b "" new
torch 0.5b
bench 1.5b "" new; bench 1.5b .old old
torch 1.5b
grep -E "^(--- |FAIL|ok|PASS)|panic|tests rc" $OUT/tests.log | grep -v "^    ---" | head -20
grep -hE "(train B|train: kernels|cast_bf16|rmsnorm_bwd_dx|attn_bwd_dsum|attn_mma_bwd|rope_f32|prefill B)|rc [0-9]|out of memory|torch-bf16" $OUT/bench-*.log | cut -c1-200
