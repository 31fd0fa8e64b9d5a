#!/usr/bin/env bash
# bf16 mode's attention backward with dQ inside the dK/dV kernel
# (attn_mma_bwd_dkvq, MEMPO_CUDA_ATTN_BWD=fused) against the separate dQ
# kernel, and the first GPU run of ProductOnly's fp32 storage given back
# (9ba49d3): lib/model's bf16 GPU tests with each backward, then the
# training step (TestCUDABenchmarks, bf16, 8 × 2048) at 0.5B default, fused,
# default, fused, PyTorch's step (LM head in chunks, eager and compiled),
# and at 1.5B default and fused (8 × 2048 ran out of the H100's 80 GB
# before 9ba49d3) and PyTorch.
#   carry: .work/afq.tar.xz (lib/model's test binary, its libraries; built at 874977d for the run of 2026-12-07)
set -uo pipefail
B=/tmp/afq; [ -x $B/bin/model.test ] || tar -xJf .work/afq.tar.xz -C /tmp
. scripts/gpu/env.sh; gpu_env $B/lib
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > $OUT/gpu.txt
T='^(TestCUDAAttentionGemm|TestCUDAAttention|TestCUDABF16|TestCUDADualBF16|TestCUDALoRA|TestCUDAFrozenBF16|TestCUDATokenLogProbs|TestCUDAPool)$'
for m in separate fused; do
	(cd lib/model && MEMPO_CUDA_ATTN_BWD=$m MEMPO_REQUIRE_CUDA=1 timeout 90 $B/bin/model.test -test.v -test.count=1 \
		-test.run "$T" > $OUT/tests-$m.log 2>&1; echo "tests rc $?" >> $OUT/tests-$m.log)
done
i=0
bench() { # size mode
	i=$((i + 1))
	(cd lib/model && MEMPO_CUDA_ATTN_BWD=$2 MEMPO_CUDA_BENCH=1 MEMPO_CUDA_BENCH_RUNS=qwen2.5-$1:bf16 timeout 60 $B/bin/model.test \
		-test.v -test.count=1 -test.timeout 0 -test.run 'TestCUDABenchmarks$' > $OUT/bench$i-$1-$2.log 2>&1
	echo "bench rc $?" >> $OUT/bench$i-$1-$2.log)
}
torch() {
	MEMPO_CUDA_BENCH_MODELS=qwen2.5-$1 MEMPO_TORCH_DTYPES=bf16 MEMPO_TORCH_PARTS=train MEMPO_TORCH_TRAIN=chunked,compiled \
		PYTHONUNBUFFERED=1 timeout 170 python3 scripts/gpu/bench_torch.py > $OUT/torch-$1.log 2>&1
	echo "torch rc $?" >> $OUT/torch-$1.log
}
bench 0.5b separate; bench 0.5b fused; bench 0.5b separate; bench 0.5b fused
torch 0.5b
bench 1.5b separate; bench 1.5b fused
torch 1.5b
for m in separate fused; do grep -E "^(--- |FAIL|ok|PASS)|panic|tests rc" $OUT/tests-$m.log | grep -v "^    ---" | sed "s/^/$m: /" | head -20; done
grep -E "^BENCH.*(train B|train: kernels|attn_mma_bwd|prefill)|bench rc|out of memory" $OUT/bench*.log | cut -c1-200
grep -E "^BENCH|rc" $OUT/torch-*.log | cut -c1-200
