#!/usr/bin/env bash
# One H200 call: lib/model's CUDA tests with gate, up and dact written and read
# only in bf16 (v3.test), then the training benchmark (bf16, 8x2048) of the
# previous step (v1.test, e4cca91) and of v3, and PyTorch's step with the LM
# head in chunks, eager and under torch.compile (scripts/gpu/bench_torch.py),
# 0.5B then 1.5B.
set -uo pipefail
W=${W:-.work/ab3.tgz}
tar -C /tmp -xzf "$W"
. scripts/gpu/env.sh
gpu_env /tmp/ab3/lib
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > $OUT/gpu.txt
(cd lib/model && timeout 300 /tmp/ab3/v3.test -test.run 'TestCUDA' -test.skip 'Benchmarks' -test.count=1 -test.v > $OUT/tests-v3.log 2>&1)
echo "tests rc $?" | tee -a $OUT/tests-v3.log
bench() { (cd lib/model && MEMPO_CUDA_BENCH=1 MEMPO_CUDA_BENCH_RUNS=$2:bf16 timeout 200 /tmp/ab3/$1.test -test.v -test.count=1 \
	-test.timeout 0 -test.run 'TestCUDABenchmarks$') > $OUT/$1-$2.log 2>&1; }
torch() { MEMPO_CUDA_BENCH_MODELS=$1 MEMPO_TORCH_DTYPES=bf16 MEMPO_TORCH_PARTS=train MEMPO_TORCH_TRAIN=chunked,compiled \
	PYTHONUNBUFFERED=1 timeout 300 python3 scripts/gpu/bench_torch.py > $OUT/torch-$1.log 2>&1; }
for m in qwen2.5-0.5b qwen2.5-1.5b; do bench v1 $m; bench v3 $m; torch $m; done
