#!/usr/bin/env bash
# The 1.5B half of command.sh at a smaller batch (8 × 2048 ran out of the
# H100's 80 GB without recomputation), the binaries in VERSIONS in turn, then
# PyTorch's chunked and compiled steps at the same batch.
#   run2-b6/: BATCH=6 VERSIONS="model model-45afd0b model" TORCH_TIMEOUT=200 (mempo out of memory again)
#   run3-b4/: BATCH=4 VERSIONS="model model-45afd0b" TORCH_TIMEOUT=140 (the same script then edited in place by sed)
#   carry: .work/ft2.tar.xz
set -uo pipefail
B=/tmp/ft2; [ -x $B/bin/model.test ] || tar -xJf .work/ft2.tar.xz -C /tmp
. scripts/gpu/env.sh; gpu_env $B/lib
nvidia-smi --query-gpu=name,driver_version --format=csv > $OUT/gpu.txt
export MEMPO_CUDA_BENCH_BATCH=${BATCH:-4}
i=0
for v in ${VERSIONS:-model model-45afd0b}; do
	i=$((i + 1))
	(cd lib/model && MEMPO_CUDA_BENCH=1 MEMPO_CUDA_BENCH_RUNS=qwen2.5-1.5b:bf16 timeout 80 $B/bin/$v.test \
		-test.v -test.count=1 -test.timeout 0 -test.run 'TestCUDABenchmarks$' > $OUT/b${MEMPO_CUDA_BENCH_BATCH}-$i-1.5b-$v.log 2>&1
	echo "bench rc $?" >> $OUT/b${MEMPO_CUDA_BENCH_BATCH}-$i-1.5b-$v.log)
done
MEMPO_CUDA_BENCH_MODELS=qwen2.5-1.5b MEMPO_TORCH_DTYPES=bf16 MEMPO_TORCH_PARTS=train MEMPO_TORCH_TRAIN=chunked,compiled \
	PYTHONUNBUFFERED=1 timeout ${TORCH_TIMEOUT:-140} python3 scripts/gpu/bench_torch.py > $OUT/b${MEMPO_CUDA_BENCH_BATCH}-torch-1.5b.log 2>&1
echo "torch rc $?" >> $OUT/b${MEMPO_CUDA_BENCH_BATCH}-torch-1.5b.log
grep -E "^BENCH.*(train B|train: kernels|token_logprobs|prefill)|bench rc" $OUT/b${MEMPO_CUDA_BENCH_BATCH}-*1.5b-model*.log | cut -c1-200
grep -E "^BENCH|rc" $OUT/b${MEMPO_CUDA_BENCH_BATCH}-torch-1.5b.log | cut -c1-200
