#!/usr/bin/env bash
# One call (the job's parts in order of need; what is done by the call's
# end comes back), main at cc331da against d706580:
#  0. the decoding step's GPU tests and the shared-prefill test (the same
#     bits with the prompts copied);
#  1. the training step without three of its four casts a layer
#     (a9d44fe, c4e1676, 5e45e54): scripts/gpu/results/2026-12-07-train-casts/
#     command.sh, its output in $R/train;
#  2. decoding with each request's prompt cached once, its samples reading
#     it as a shared prefix (cc331da): TestCUDADecodeBenchmarks, graph
#     path, new and old binaries alternating, 0.5B at batch 1, 32, 256 and
#     7B at 32.
#   carry: .work/ca.tar.xz (scripts/gpu/pack.sh ca model.test model.test@d706580)
#   usage: command.sh start | wait
set -uo pipefail
R=/tmp/pkv
job() {
	B=/tmp/ca; [ -x $B/bin/model.test ] || tar -xJf .work/ca.tar.xz -C /tmp
	(. scripts/gpu/env.sh; gpu_env $B/lib; cd lib/model
	MEMPO_REQUIRE_CUDA=1 timeout 240 $B/bin/model.test -test.v -test.count=1 \
		-test.run '^(TestCUDADecodeKernels|TestCUDADecodeStep|TestCUDAGenerateSharedPrefixes)$' > $R/decode-tests.log 2>&1
	echo "tests rc $?" >> $R/decode-tests.log)
	mkdir -p $R/train
	OUT=$R/train bash scripts/gpu/results/2026-12-07-train-casts/command.sh > $R/train/summary.txt 2>&1
	. scripts/gpu/env.sh; gpu_env $B/lib
	cd lib/model
	for v in "" .old "" .old; do
		for mb in qwen2.5-0.5b:1,32,256 qwen2.5-7b:32; do
			echo "#### model.test$v ${mb%%:*}"
			MEMPO_CUDA_BENCH=1 MEMPO_CUDA_DECODE_BENCH_MODES=graph MEMPO_CUDA_DECODE_BENCH_MODELS=${mb%%:*} \
				MEMPO_CUDA_DECODE_BENCH_BATCHES=${mb#*:} timeout 150 $B/bin/model.test$v -test.v -test.count=1 -test.timeout 0 \
				-test.run '^TestCUDADecodeBenchmarks$' 2>&1 | grep -E "^BENCH|^(---|ok|FAIL)|panic"
		done
	done > $R/decode-bench.log 2>&1
}
. scripts/gpu/longjob.sh
longjob "$0" "${1:-start}"; rc=$?
cat $R/train/summary.txt 2>/dev/null | cut -c1-200 | tail -40
grep -E "^(--- |FAIL|ok|PASS)|panic|tests rc" $R/decode-tests.log 2>/dev/null | grep -v "^    --- PASS" | head -20
grep -E "^####|decode B=|^---|FAIL|panic" $R/decode-bench.log 2>/dev/null | grep -v "fused step" | sed 's/ (incl. prefill)//; s/tokens\/s = //g' | cut -c1-220
exit $rc
