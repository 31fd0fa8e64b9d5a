#!/usr/bin/env bash
# Gate and up (and k and v where cuBLAS takes them) as one strided-batched
# cuBLAS call in the decoding step (gemmPair), against the two calls they were
# (the nopair variant), same binary, same process, alternating: the decoding
# step's GPU tests first, then TestCUDADecodeBenchmarks at batch 8, 32, 64 and
# 256 for the three Qwen2.5 shapes.
#   carry: .work/pair.tar.xz (lib/model's test binary and its libraries)
#   usage: command.sh start | wait
set -uo pipefail
R=/tmp/pair
job() {
	B=/tmp/pairbin; mkdir -p $B && tar -xJf .work/pair.tar.xz -C $B
	. scripts/gpu/env.sh; gpu_env $B/pair/lib
	nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > $R/gpu.txt
	cd lib/model
	MEMPO_REQUIRE_CUDA=1 MEMPO_CUDA_DEBUG=1 timeout 200 $B/pair/model.test -test.v -test.count=1 \
		-test.run '^(TestCUDADecodeKernels|TestCUDADecodeStep|TestCUDAParityWithTransformers|TestCUDABF16)$' > $R/decode-tests.log 2>&1
	echo "tests rc $?" >> $R/decode-tests.log
	MEMPO_CUDA_BENCH=1 MEMPO_CUDA_DECODE_BENCH_MODES=graph,graph-nopair,graph,graph-nopair \
		MEMPO_CUDA_DECODE_BENCH_MODELS=qwen2.5-0.5b,qwen2.5-1.5b,qwen2.5-7b MEMPO_CUDA_DECODE_BENCH_BATCHES=8,32,64,256 \
		timeout 600 $B/pair/model.test -test.v -test.count=1 -test.timeout 0 -test.run '^TestCUDADecodeBenchmarks$' > $R/decode-bench.log 2>&1
	echo "bench rc $?" >> $R/decode-bench.log
}
. scripts/gpu/longjob.sh
longjob "$0" "${1:-start}"; rc=$?
grep -E "^(--- |FAIL|ok|PASS)|panic|Error|tests rc" $R/decode-tests.log | grep -v "^    --- PASS" | head -30
grep -E "^BENCH|bench rc" $R/decode-bench.log | grep -v "loaded\|fused step\| kernel " | sed 's/ (incl. prefill)//; s/tokens\/s = //g'
exit $rc
