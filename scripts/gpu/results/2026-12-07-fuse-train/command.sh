#!/usr/bin/env bash
# The training step with the fused residual adds (forward: add_rmsnorm_f32,
# rope_f32 with the bias; backward: rmsnorm_bwd_dx_f32 adding the residual's
# gradient), against the same binary with MEMPO_CUDA_FUSE=0: the GPU tests of
# the norms and of training (TestCUDANormEmbedRoPE, TestCUDALoRA,
# TestCUDALoRADropout), then TestCUDABenchmarks at 0.5B in bf16 mode (training
# step 8 × 2048, prefill, decoding), new / old / new / old.
#   carry: .work/bwd.tar.xz (lib/model's test binary and its libraries)
set -uo pipefail
B=/tmp/bwd; [ -x $B/bin/model.test ] || tar -xJf .work/bwd.tar.xz -C /tmp
. scripts/gpu/env.sh; gpu_env $B/lib
nvidia-smi --query-gpu=name,driver_version --format=csv > $OUT/gpu.txt
cd lib/model
MEMPO_REQUIRE_CUDA=1 timeout 60 $B/bin/model.test -test.v -test.count=1 \
	-test.run '^(TestCUDANormEmbedRoPE|TestCUDALoRA|TestCUDALoRADropout)$' > $OUT/tests.log 2>&1
echo "tests rc $?" >> $OUT/tests.log
i=0
for v in new old new old; do
	i=$((i + 1)); e=X=1; [ $v = old ] && e=MEMPO_CUDA_FUSE=0
	env $e MEMPO_CUDA_BENCH=1 MEMPO_CUDA_BENCH_RUNS=qwen2.5-0.5b:bf16 timeout 45 $B/bin/model.test -test.v -test.count=1 \
		-test.timeout 0 -test.run 'TestCUDABenchmarks$' > $OUT/bench$i-$v.log 2>&1
	echo "bench rc $?" >> $OUT/bench$i-$v.log
done
grep -E "^(--- |FAIL|ok|PASS)|panic|tests rc" $OUT/tests.log | head
grep -E "^BENCH.*(train|prefill)|bench rc" $OUT/bench*.log | cut -c1-220
