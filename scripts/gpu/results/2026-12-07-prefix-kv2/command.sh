#!/usr/bin/env bash
# The decoding step with attn_split_keys loading from one base row where a
# warp's keys lie on one side of the shared prefix's end (main at the call)
# against d706580 (before prefixes): the decoding step's GPU tests, then
# TestCUDADecodeBenchmarks, graph path, alternating, 0.5B at batch 1, 32,
# 256 and 7B at 32 (prefix-kv's decode part again).
#   carry: .work/pk2.tar.xz (scripts/gpu/pack.sh pk2 model.test model.test@d706580)
set -uo pipefail
B=/tmp/pk2; [ -x $B/bin/model.test ] || tar -xJf .work/pk2.tar.xz -C /tmp
. scripts/gpu/env.sh; gpu_env $B/lib
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > $OUT/gpu.txt
cd lib/model
MEMPO_REQUIRE_CUDA=1 timeout 150 $B/bin/model.test -test.v -test.count=1 \
	-test.run '^(TestCUDADecodeKernels|TestCUDADecodeStep|TestCUDAGenerateSharedPrefixes)$' > $OUT/decode-tests.log 2>&1
echo "tests rc $?" >> $OUT/decode-tests.log
for v in "" .old "" .old; do
	for mb in qwen2.5-0.5b:1,32,256 qwen2.5-7b:32; do
		echo "#### model.test$v ${mb%%:*}"
		MEMPO_CUDA_BENCH=1 MEMPO_CUDA_DECODE_BENCH_MODES=graph MEMPO_CUDA_DECODE_BENCH_MODELS=${mb%%:*} \
			MEMPO_CUDA_DECODE_BENCH_BATCHES=${mb#*:} timeout 100 $B/bin/model.test$v -test.v -test.count=1 -test.timeout 0 \
			-test.run '^TestCUDADecodeBenchmarks$' 2>&1 | grep -E "^BENCH|^(---|ok|FAIL)|panic"
	done
done > $OUT/decode-bench.log 2>&1
grep -E "^(--- |FAIL|ok|PASS)|panic|tests rc" $OUT/decode-tests.log | grep -v "^    --- PASS" | head -20
grep -E "^####|decode B=|FAIL|panic" $OUT/decode-bench.log | grep -v "fused step\|persist trace" | sed 's/ (incl. prefill)//; s/tokens\/s = //g' | cut -c1-200
