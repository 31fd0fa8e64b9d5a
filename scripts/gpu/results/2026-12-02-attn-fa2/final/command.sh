#!/usr/bin/env bash
# One H200 call: lib/model's CUDA tests of v5.test (SwiGLU in 16-byte bf16
# vectors, the normed projection inputs and the gate/up products only in bf16,
# the backward's RoPE writing dq's and dk's rounding, the decoding step rounding
# gate and up as the op-by-op path does) and of v6.test (v5 and dK/dV blocks
# summing a whole head group without atomics, heaviest key tiles first), then
# the training benchmark (bf16, 8x2048) of v5 and v6 and PyTorch's step with the
# LM head in chunks, eager and under torch.compile (scripts/gpu/bench_torch.py),
# 0.5B then 1.5B.
set -uo pipefail
W=${W:-.work/ab6.tgz}
tar -C /tmp -xzf "$W"
. scripts/gpu/env.sh
gpu_env /tmp/ab6/lib
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > $OUT/gpu.txt
for v in v6 v5; do
	(cd lib/model && timeout 200 /tmp/ab6/$v.test -test.run 'TestCUDA' -test.skip 'Benchmarks' -test.count=1 -test.v > $OUT/tests-$v.log 2>&1)
	echo "$v tests rc $?" | tee -a $OUT/tests-$v.log
done
bench() { (cd lib/model && MEMPO_CUDA_BENCH=1 MEMPO_CUDA_BENCH_RUNS=$2:bf16 timeout 200 /tmp/ab6/$1.test -test.v -test.count=1 \
	-test.timeout 0 -test.run 'TestCUDABenchmarks$') > $OUT/$1-$2.log 2>&1; }
torch() { MEMPO_CUDA_BENCH_MODELS=$1 MEMPO_TORCH_DTYPES=bf16 MEMPO_TORCH_PARTS=train MEMPO_TORCH_TRAIN=chunked,compiled \
	PYTHONUNBUFFERED=1 timeout 300 python3 scripts/gpu/bench_torch.py > $OUT/torch-$1.log 2>&1; }
for m in qwen2.5-0.5b qwen2.5-1.5b; do bench v5 $m; bench v6 $m; torch $m; done
