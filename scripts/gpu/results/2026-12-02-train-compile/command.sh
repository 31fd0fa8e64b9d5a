#!/usr/bin/env bash
# One H200 call: the training step of mempo (TestCUDABenchmarks, bf16 mode) and
# of PyTorch (scripts/gpu/bench_torch.py: LM head in chunks, the same under
# torch.compile, and the plain whole-logits step), 0.5B then 1.5B, with each
# side's kernel profile. Bundle: model.test and its libraries in $W/b.tgz.
set -uo pipefail
W=${W:-.work/tr1}
tar -C /tmp -xzf $W/b.tgz
. scripts/gpu/env.sh
gpu_env /tmp/tr1/lib
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > $OUT/gpu.txt
torch() { MEMPO_CUDA_BENCH_MODELS=$1 MEMPO_TORCH_DTYPES=bf16 MEMPO_TORCH_PARTS=train MEMPO_TORCH_TRAIN=chunked,compiled,full \
	MEMPO_TORCH_PROFILE=1 PYTHONUNBUFFERED=1 timeout 300 python3 scripts/gpu/bench_torch.py > $OUT/torch-$1.log 2>&1; }
mempo() { (cd lib/model && MEMPO_CUDA_BENCH=1 MEMPO_CUDA_BENCH_RUNS=$1:bf16 timeout 200 /tmp/tr1/model.test -test.v \
	-test.count=1 -test.timeout 0 -test.run 'TestCUDABenchmarks$') > $OUT/mempo-$1.log 2>&1; }
mempo qwen2.5-0.5b
torch qwen2.5-0.5b
mempo qwen2.5-1.5b
torch qwen2.5-1.5b
