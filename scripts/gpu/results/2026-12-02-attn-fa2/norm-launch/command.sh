#!/usr/bin/env bash
# One H200 call: lib/model's CUDA tests of v8.test (train-only/'s v7 with the
# norms launched with a quarter of their block layout's threads, same bits),
# then the training benchmark (bf16, 8x2048) of v8 and PyTorch's step with the
# LM head in chunks, eager and under torch.compile, at 1.5B, then v8 at 0.5B
# (the device time left allowed no more).
set -uo pipefail
W=${W:-.work/ab8.tgz}
tar -C /tmp -xzf "$W"
. scripts/gpu/env.sh
gpu_env /tmp/ab8/lib
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > $OUT/gpu.txt
(cd lib/model && timeout 150 /tmp/ab8/v8.test -test.run 'TestCUDA' -test.skip 'Benchmarks' -test.count=1 -test.v > $OUT/tests-v8.log 2>&1)
echo "v8 tests rc $?" | tee -a $OUT/tests-v8.log
bench() { (cd lib/model && MEMPO_CUDA_BENCH=1 MEMPO_CUDA_BENCH_RUNS=$2:bf16 timeout 120 /tmp/ab8/$1.test -test.v -test.count=1 \
	-test.timeout 0 -test.run 'TestCUDABenchmarks$') > $OUT/$1-$2.log 2>&1; }
torch() { MEMPO_CUDA_BENCH_MODELS=$1 MEMPO_TORCH_DTYPES=bf16 MEMPO_TORCH_PARTS=train MEMPO_TORCH_TRAIN=chunked,compiled \
	PYTHONUNBUFFERED=1 timeout 150 python3 scripts/gpu/bench_torch.py > $OUT/torch-$1.log 2>&1; }
bench v8 qwen2.5-1.5b
torch qwen2.5-1.5b
bench v8 qwen2.5-0.5b
