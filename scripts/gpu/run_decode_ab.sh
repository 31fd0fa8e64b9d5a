#!/usr/bin/env bash
# Runs on the GPU machine, from the repository root: the decoding step's GPU
# tests, then TestCUDADecodeBenchmarks of two builds in one call, so that a
# change is measured against its base on the same machine: BUNDLE/model.test
# (the change) and BUNDLE/model_old.test (lib/model's test binary built from
# the base commit: `git archive BASE | tar -x -C DIR; cd DIR; go test -c
# -o .../model_old.test ./lib/model`). Logs go to $OUT: decode-tests.log,
# decode-bench-new.log, decode-bench-old.log.
# Environment: BUNDLE (default bin/gpu, with lib/ as scripts/gpu/bundle.sh
# makes it), MODES (new build's decoding paths, default graph), MODELS,
# OLD_MODELS (default MODELS), VERSIONS (default "new old"), SKIP_TESTS=1,
# TEST_TIMEOUT (90), BENCH_TIMEOUT (100).
set -u
ROOT=$PWD; D=${BUNDLE:-$ROOT/bin/gpu}; OUT=${OUT:-$ROOT/gpu-out}; mkdir -p "$OUT"
. scripts/gpu/env.sh; gpu_env "$D/lib"
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv; } > "$OUT/decode-tests.log" 2>&1
if [[ ${SKIP_TESTS:-0} != 1 ]]; then
	(cd lib/model && MEMPO_REQUIRE_CUDA=1 MEMPO_CUDA_DEBUG=1 timeout "${TEST_TIMEOUT:-90}" "$D/model.test" -test.v -test.count=1 \
		-test.run '^(TestCUDADecodeKernels|TestCUDADecodeStep|TestCUDAParityWithTransformers|TestCUDABF16|TestCUDAPool)$') >> "$OUT/decode-tests.log" 2>&1
	echo "tests rc $?"
	grep -E "^(--- |FAIL|ok|PASS)|panic|small steps|Error" "$OUT/decode-tests.log" | grep -v "^    --- PASS" | head -40
fi
for v in ${VERSIONS:-new old}; do
	bin=$D/model.test
	[[ $v == old ]] && bin=$D/model_old.test
	models=${MODELS:-qwen2.5-0.5b,qwen2.5-1.5b,qwen2.5-7b}
	modes=${MODES:-graph}
	[[ $v == old ]] && models=${OLD_MODELS:-$models} && modes=graph
	(cd lib/model && MEMPO_CUDA_BENCH=1 MEMPO_CUDA_DECODE_BENCH_MODES=$modes MEMPO_CUDA_DECODE_BENCH_MODELS=$models \
		timeout "${BENCH_TIMEOUT:-100}" "$bin" -test.v -test.count=1 -test.timeout 0 -test.run '^TestCUDADecodeBenchmarks$') > "$OUT/decode-bench-$v.log" 2>&1
	echo "bench $v rc $?"
	grep -E "^BENCH" "$OUT/decode-bench-$v.log" | grep -v " kernel " | sed "s/^BENCH/$v/"
	grep -E " kernel " "$OUT/decode-bench-$v.log" | grep "B=1 " | sed "s/^BENCH/$v/" | head -40
done
