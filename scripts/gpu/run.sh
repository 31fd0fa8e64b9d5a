#!/usr/bin/env bash
# Runs on the GPU machine, from the repository root, over a bundle made by
# scripts/gpu/bundle.sh (bin/gpu): the lib/cuda tests, the CUDA kernel
# sandbox and transformers parity tests of lib/model, then the benchmarks of
# the CUDA backend and the PyTorch reference (scripts/gpu/bench_torch.py) in
# the same run. Logs go to $OUT (the device tool's folder) or ./gpu-out.
#   usage: scripts/gpu/run.sh [tests|bench|all]      (default: all)
# Environment: MEMPO_CUDA_BENCH_RUNS (model:mode list, mode fp32 or bf16;
# default both modes of qwen2.5-0.5b and qwen2.5-1.5b), MEMPO_CUDA_BENCH_MODELS
# (the torch script's models), MEMPO_TORCH_DTYPES (default bf16,fp32),
# MEMPO_CUDA_BENCH_BATCH (training batch in sequences of 2048, default 8),
# MEMPO_CUDA_LIB_DIR (folders of libnvrtc/libcublas; default: PyTorch's
# nvidia-* wheels), MEMPO_CUDA_DEBUG=1 (synchronize and check every launch),
# MEMPO_SKIP_TORCH=1 (mempo's benchmarks only).
set -uo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
B=$ROOT/bin/gpu
what=${1:-all}
OUT=${OUT:-$ROOT/gpu-out}
mkdir -p "$OUT"
. scripts/gpu/env.sh
gpu_env "$B/lib"
status=0
{
	date -u
	nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv
	echo "MEMPO_CUDA_LIB_DIR=$MEMPO_CUDA_LIB_DIR"
	ldd "$B/model.test" | grep -E "not found|openblas|gfortran" || true
} 2>&1 | tee "$OUT/tests.log"

if [[ $what == tests || $what == all ]]; then
	(cd lib/cuda && MEMPO_REQUIRE_CUDA=1 "$B/cuda.test" -test.v -test.count=1 -test.timeout 300s) 2>&1 | tee -a "$OUT/tests.log"
	s=${PIPESTATUS[0]}; [[ $s == 0 ]] || status=$s
	# One process per test, so a crash in one kernel does not hide the others;
	# MEMPO_CUDA_DEBUG=1 synchronizes after every launch to name a failing kernel.
	for t in TestCUDAAvailableReason TestCUDAElementwiseOps TestCUDAMatMul TestCUDANormEmbedRoPE TestCUDATokenLogProbs TestCUDAAttention TestCUDAAttentionGemm TestCUDASample TestCUDAPool TestCUDADualBF16 TestCUDAParityWithTransformers TestCUDABF16 TestCUDALoRADropout TestCUDALoRA TestCUDAFrozenBF16; do
		(cd lib/model && MEMPO_REQUIRE_CUDA=1 MEMPO_CUDA_DEBUG=${MEMPO_CUDA_DEBUG:-1} timeout 300 "$B/model.test" -test.v -test.count=1 -test.run "^$t\$") >/tmp/mempo-test.log 2>&1
		s=$?; [[ $s == 0 ]] || status=$s
		{ echo "== $t exit $s"; cat /tmp/mempo-test.log; } >>"$OUT/tests.log"
		echo "== $t exit $s"
		grep -vE "^(=== RUN|PASS$|ok )" /tmp/mempo-test.log | head -40
	done
	# The optimizer on the device against the host's (lib/update).
	(cd lib/update && MEMPO_REQUIRE_CUDA=1 timeout 300 "$B/update.test" -test.v -test.count=1 -test.run '^TestDeviceOptimizerMatchesHost$') >/tmp/mempo-test.log 2>&1
	s=$?; [[ $s == 0 ]] || status=$s
	{ echo "== TestDeviceOptimizerMatchesHost exit $s"; cat /tmp/mempo-test.log; } >>"$OUT/tests.log"
	echo "== TestDeviceOptimizerMatchesHost exit $s"
	grep -vE "^(=== RUN|PASS$|ok )" /tmp/mempo-test.log | head -20
	echo "tests exit status: $status"
fi
if [[ $what == bench || $what == all ]]; then
	(cd lib/model && MEMPO_CUDA_BENCH=1 timeout "${MEMPO_BENCH_TIMEOUT:-900}" "$B/model.test" -test.v -test.count=1 -test.timeout 0 -test.run 'TestCUDABenchmarks$') 2>&1 | tee "$OUT/bench-mempo.log" | grep -E "^BENCH|FAIL|panic|Error|error"
	[[ ${MEMPO_SKIP_TORCH:-0} == 1 ]] || PYTHONUNBUFFERED=1 timeout "${MEMPO_BENCH_TIMEOUT:-900}" python3 scripts/gpu/bench_torch.py 2>&1 | tee "$OUT/bench-torch.log" | grep -E "^BENCH|Error|error"
fi
exit $status
