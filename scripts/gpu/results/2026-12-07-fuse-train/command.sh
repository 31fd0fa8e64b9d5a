#!/usr/bin/env bash
# The training step with the fused residual adds (forward: add_rmsnorm_f32,
# rope_f32 with the bias; backward: rmsnorm_bwd_dx_f32 adding the residual's
# gradient) and the one-pass log-softmax over the LM head's logits
# (token_logprobs_f32 online, its backward in float4): every GPU test of
# lib/model but the benchmarks (new binary), then TestCUDABenchmarks in bf16
# mode (training step 8 × 2048, prefill, decoding) at 0.5B: new, 45afd0b (the
# fusion without the one-pass log-softmax), new with MEMPO_CUDA_FUSE=0, new,
# 45afd0b; PyTorch's training step with the LM head in chunks, eager and
# under torch.compile (bench_torch.py), at 0.5B; then 1.5B new, 45afd0b and
# PyTorch.
#   carry: .work/ft2.tar.xz (lib/model's test binaries and their libraries)
set -uo pipefail
B=/tmp/ft2; [ -x $B/bin/model.test ] || tar -xJf .work/ft2.tar.xz -C /tmp
. scripts/gpu/env.sh; gpu_env $B/lib
nvidia-smi --query-gpu=name,driver_version --format=csv > $OUT/gpu.txt
cd lib/model
MEMPO_REQUIRE_CUDA=1 timeout 150 $B/bin/model.test -test.v -test.count=1 \
	-test.run 'TestCUDA' -test.skip 'Benchmarks' > $OUT/tests.log 2>&1
echo "tests rc $?" >> $OUT/tests.log
cd ../..
i=0
bench() { # size binary [env]
	i=$((i + 1))
	(cd lib/model && env ${3:-X=1} MEMPO_CUDA_BENCH=1 MEMPO_CUDA_BENCH_RUNS=qwen2.5-$1:bf16 timeout 60 $B/bin/$2.test \
		-test.v -test.count=1 -test.timeout 0 -test.run 'TestCUDABenchmarks$' > $OUT/bench$i-$1-$2${3:+-fuse0}.log 2>&1
	echo "bench rc $?" >> $OUT/bench$i-$1-$2${3:+-fuse0}.log)
}
torch() {
	MEMPO_CUDA_BENCH_MODELS=qwen2.5-$1 MEMPO_TORCH_DTYPES=bf16 MEMPO_TORCH_PARTS=train MEMPO_TORCH_TRAIN=chunked,compiled \
		PYTHONUNBUFFERED=1 timeout 170 python3 scripts/gpu/bench_torch.py > $OUT/torch-$1.log 2>&1
	echo "torch rc $?" >> $OUT/torch-$1.log
}
bench 0.5b model; bench 0.5b model-45afd0b; bench 0.5b model MEMPO_CUDA_FUSE=0; bench 0.5b model; bench 0.5b model-45afd0b
torch 0.5b
bench 1.5b model; bench 1.5b model-45afd0b
torch 1.5b
grep -E "^(--- |FAIL|ok|PASS)|panic|tests rc" $OUT/tests.log | grep -v "^    ---" | head -40
grep -E "^BENCH.*(train B|prefill|token_logprobs)|bench rc" $OUT/bench*.log | cut -c1-200
grep -E "^BENCH|rc" $OUT/torch-*.log | cut -c1-200
