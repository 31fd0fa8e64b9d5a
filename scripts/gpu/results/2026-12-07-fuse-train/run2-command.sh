#!/usr/bin/env bash
# The 1.5B half of command.sh at a batch of 6 × 2048 (8 × 2048 runs out of the
# H100's 80 GB without recomputation: mempo keeps fp32 activations), new /
# 45afd0b / new, then PyTorch's chunked and compiled steps at the same batch.
#   carry: .work/ft2.tar.xz
set -uo pipefail
B=/tmp/ft2; [ -x $B/bin/model.test ] || tar -xJf .work/ft2.tar.xz -C /tmp
. scripts/gpu/env.sh; gpu_env $B/lib
nvidia-smi --query-gpu=name,driver_version --format=csv > $OUT/gpu.txt
export MEMPO_CUDA_BENCH_BATCH=6
i=0
for v in model model-45afd0b model; do
	i=$((i + 1))
	(cd lib/model && MEMPO_CUDA_BENCH=1 MEMPO_CUDA_BENCH_RUNS=qwen2.5-1.5b:bf16 timeout 80 $B/bin/$v.test \
		-test.v -test.count=1 -test.timeout 0 -test.run 'TestCUDABenchmarks$' > $OUT/b6-$i-1.5b-$v.log 2>&1
	echo "bench rc $?" >> $OUT/b6-$i-1.5b-$v.log)
done
MEMPO_CUDA_BENCH_MODELS=qwen2.5-1.5b MEMPO_TORCH_DTYPES=bf16 MEMPO_TORCH_PARTS=train MEMPO_TORCH_TRAIN=chunked,compiled \
	PYTHONUNBUFFERED=1 timeout 200 python3 scripts/gpu/bench_torch.py > $OUT/b6-torch-1.5b.log 2>&1
echo "torch rc $?" >> $OUT/b6-torch-1.5b.log
grep -E "^BENCH.*(train B|train: kernels|token_logprobs|prefill)|bench rc" $OUT/b6-*1.5b-model*.log | cut -c1-200
grep -E "^BENCH|rc" $OUT/b6-torch-1.5b.log | cut -c1-200
