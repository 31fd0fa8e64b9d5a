#!/usr/bin/env bash
# Its tests ran on 2026-12-08 in 2026-12-08-dw-turns' call (all passed); its
# benchmark part has not run. The later turns' shared task prompt (36d4b55: a one-sample
# request reads the beginning it shares with another where that one keeps
# it; the prefill attends with a many-row prefix, attnmma.cu's packed keys
# taking it in two runs, the fp32 kernels after a copy into one run) on the
# GPU for the first time: the attention tests (checkAttentionPrefix on every
# path), the shared-prefill test (the same bits as copied prompts, graphs
# and the decoding step included) and the decoding step's tests, then
# TestCUDADecodeBenchmarks against d706580 as prefix-kv2's.
#   carry: .work/pt.tar.xz (scripts/gpu/pack.sh pt model.test model.test@d706580)
#   usage: command.sh [all|tests|bench]   (tests: the GPU tests alone, which
#   may run beside other GPU work; bench: the benchmark alone, on an idle GPU)
set -uo pipefail
MODE=${1:-all}
B=/tmp/pt; [ -x $B/bin/model.test ] || tar -xJf .work/pt.tar.xz -C /tmp
. scripts/gpu/env.sh; gpu_env $B/lib
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > $OUT/gpu.txt
cd lib/model
if [ $MODE != bench ]; then
MEMPO_REQUIRE_CUDA=1 timeout 200 $B/bin/model.test -test.v -test.count=1 \
	-test.run '^(TestCUDAAttention|TestCUDAAttentionGemm|TestCUDAGenerateSharedPrefixes|TestCUDADecodeKernels|TestCUDADecodeStep)$' > $OUT/tests.log 2>&1
echo "tests rc $?" >> $OUT/tests.log
grep -E "^(--- |FAIL|ok|PASS)|panic|tests rc" $OUT/tests.log | grep -v "^    --- PASS" | head -20
fi
[ $MODE = tests ] && exit 0
for v in "" .old "" .old; do
	for mb in qwen2.5-0.5b:1,32,256 qwen2.5-7b:32; do
		echo "#### model.test$v ${mb%%:*}"
		MEMPO_CUDA_BENCH=1 MEMPO_CUDA_DECODE_BENCH_MODES=graph MEMPO_CUDA_DECODE_BENCH_MODELS=${mb%%:*} \
			MEMPO_CUDA_DECODE_BENCH_BATCHES=${mb#*:} timeout 100 $B/bin/model.test$v -test.v -test.count=1 -test.timeout 0 \
			-test.run '^TestCUDADecodeBenchmarks$' 2>&1 | grep -E "^BENCH|^(---|ok|FAIL)|panic"
	done
done > $OUT/decode-bench.log 2>&1
grep -E "^####|decode B=|FAIL|panic" $OUT/decode-bench.log | grep -v "fused step\|persist trace" | sed 's/ (incl. prefill)//; s/tokens\/s = //g' | cut -c1-200
