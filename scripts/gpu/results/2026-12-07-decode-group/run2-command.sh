#!/usr/bin/env bash
# Call 2: the landed rule (attn_split_group only where rows × kv heads fill
# the chip twice, i.e. where the keys need no split; steps of 8 to 64 rows
# keep attn_split_sub / attn_split_merged): the decoding step's GPU tests
# (TestCUDADecodeStep now runs attn_split_group at every step of more than 4
# rows as a variant), the default against nogroup at batch 32, 64 and 256
# (0.5B, 7B), and the rollout benchmark default / MEMPO_CUDA_ATTN_GROUP=0.
#   carry: .work/grp.tar.xz;  usage: run2-command.sh start | wait
set -uo pipefail
R=/tmp/grp2
job() {
	B=/tmp/grpbin2/grp; mkdir -p /tmp/grpbin2 && tar -xJf .work/grp.tar.xz -C /tmp/grpbin2
	. scripts/gpu/env.sh; gpu_env $B/lib
	nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > $R/gpu.txt
	(cd lib/model && MEMPO_REQUIRE_CUDA=1 MEMPO_CUDA_DEBUG=1 timeout 200 $B/bin/model.test -test.v -test.count=1 \
		-test.run '^(TestCUDADecodeKernels|TestCUDADecodeStep|TestCUDAParityWithTransformers|TestCUDABF16)$' > $R/decode-tests.log 2>&1
	echo "tests rc $?" >> $R/decode-tests.log
	MEMPO_CUDA_BENCH=1 MEMPO_CUDA_DECODE_BENCH_MODES=graph,graph-nogroup,graph,graph-nogroup \
		MEMPO_CUDA_DECODE_BENCH_MODELS=qwen2.5-0.5b,qwen2.5-7b MEMPO_CUDA_DECODE_BENCH_BATCHES=32,64,256 \
		timeout 300 $B/bin/model.test -test.v -test.count=1 -test.timeout 0 -test.run '^TestCUDADecodeBenchmarks$' > $R/decode-bench.log 2>&1
	echo "bench rc $?" >> $R/decode-bench.log)
	for v in new old; do
		e=X=1; [ $v = old ] && e=MEMPO_CUDA_ATTN_GROUP=0
		echo "#### $v"
		env $e BIN=$B/bin DATA=$B/hotpotqa QWEN_TOKENIZER=$B/tokenizer.json CONFIG=qwen2.5-0.5b DEVICE=cuda-bf16 G=16 TURNS=8 FORCE=7 \
			STEP=32 OBS=256 BATCH=1024 MODES=overlap TIMEOUT=90 bash scripts/bench_rollout.sh 64 /tmp/roll
	done > $R/rollout.log 2>&1
}
. scripts/gpu/longjob.sh
longjob "$0" "${1:-start}"; rc=$?
grep -E "^(--- |FAIL|ok|PASS)|panic|Error|tests rc|attn_split_group" $R/decode-tests.log | grep -v "^    --- PASS" | head -30
grep -E "^BENCH|bench rc" $R/decode-bench.log | grep -v "loaded\|fused step\| kernel " | sed 's/ (incl. prefill)//; s/tokens\/s = //g; s/ of bound; steps alone//'
grep -E "^####|mempo-rollout:" $R/rollout.log 2>/dev/null | cut -c1-400
exit $rc
