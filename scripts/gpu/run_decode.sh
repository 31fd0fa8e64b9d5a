#!/usr/bin/env bash
# Runs on the GPU machine, from the repository root, over a bundle made by
# scripts/gpu/bundle.sh (model.test and bin/gpu/lib): the decoding step's
# tests (TestCUDADecodeStep: CUDA graphs and the fused step against the
# op-by-op path; the transformers parity and bf16 tests, whose greedy
# continuations now run through the graphs), then TestCUDADecodeBenchmarks
# (0.5B, 1.5B, 7B shapes at batch 1, 32, 256, every decoding path, the HBM
# bound from the copy bandwidth measured in the same process) and the
# PyTorch reference (scripts/gpu/bench_torch.py, decode only) in the same
# run. Logs go to $OUT (or ./gpu-out): decode-tests.log, decode-bench.log,
# decode-torch.log.
#   usage: scripts/gpu/run_decode.sh [tests|bench|all]     (default: all)
# Environment: BUNDLE (default bin/gpu), MEMPO_CUDA_DECODE_BENCH_MODELS,
# MEMPO_CUDA_DECODE_BENCH_MODES, MEMPO_SKIP_TORCH=1, TEST_TIMEOUT (120),
# BENCH_TIMEOUT (240), TORCH_TIMEOUT (200).
set -uo pipefail
ROOT=$PWD
HERE=$(cd "$(dirname "$0")" && pwd) # env.sh and bench_torch.py beside this script
B=${BUNDLE:-$ROOT/bin/gpu}
what=${1:-all}
OUT=${OUT:-$ROOT/gpu-out}
mkdir -p "$OUT"
. "$HERE/env.sh"
gpu_env "$B/lib"
status=0
{
	date -u
	nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv
} 2>&1 | tee "$OUT/decode-tests.log"
if [[ $what == tests || $what == all ]]; then
	(cd lib/model && MEMPO_REQUIRE_CUDA=1 MEMPO_CUDA_DEBUG=${MEMPO_CUDA_DEBUG:-1} timeout "${TEST_TIMEOUT:-120}" "$B/model.test" -test.v -test.count=1 \
		-test.run '^(TestCUDADecodeKernels|TestCUDADecodeStep|TestCUDAParityWithTransformers|TestCUDABF16|TestCUDAPool)$') >>"$OUT/decode-tests.log" 2>&1
	status=$?
	grep -E "^(--- |FAIL|ok|PASS)|decode_test|panic" "$OUT/decode-tests.log" | grep -v "^--- PASS: TestCUDADecodeStep/" | head -60
	echo "tests exit status: $status"
fi
if [[ $what == bench || $what == all ]]; then
	(cd lib/model && MEMPO_CUDA_BENCH=1 timeout "${BENCH_TIMEOUT:-240}" "$B/model.test" -test.v -test.count=1 -test.timeout 0 \
		-test.run '^TestCUDADecodeBenchmarks$') >"$OUT/decode-bench.log" 2>&1
	grep -E "^BENCH|FAIL|panic" "$OUT/decode-bench.log" | grep -v " kernel " 
	grep -E " kernel " "$OUT/decode-bench.log" | head -40
	if [[ ${MEMPO_SKIP_TORCH:-0} != 1 ]]; then
		MEMPO_TORCH_PARTS=decode MEMPO_TORCH_DTYPES=bf16 MEMPO_CUDA_BENCH_MODELS=${MEMPO_CUDA_DECODE_BENCH_MODELS:-qwen2.5-0.5b,qwen2.5-1.5b,qwen2.5-7b} \
			PYTHONUNBUFFERED=1 timeout "${TORCH_TIMEOUT:-200}" python3 "$HERE/bench_torch.py" >"$OUT/decode-torch.log" 2>&1
		grep -E "^BENCH|Error" "$OUT/decode-torch.log"
	fi
fi
exit $status
