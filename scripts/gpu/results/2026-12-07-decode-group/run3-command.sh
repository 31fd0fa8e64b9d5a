#!/usr/bin/env bash
# Call 3: main at 9108b77 (smem_merge shared by attn_split_sub and
# attn_split_group): the decoding step's GPU tests, then the rollout
# benchmark at the 7B shape (G = 16, 16 tasks, batch 256, up to 8 turns),
# attn_split_group on (default) and off (MEMPO_CUDA_ATTN_GROUP=0),
# alternating.
#   carry: .work/grp.tar.xz;  usage: run3-command.sh start | wait
set -uo pipefail
R=/tmp/grp3
job() {
	B=/tmp/grpbin3/grp; mkdir -p /tmp/grpbin3 && tar -xJf .work/grp.tar.xz -C /tmp/grpbin3
	. scripts/gpu/env.sh; gpu_env $B/lib
	nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > $R/gpu.txt
	(cd lib/model && MEMPO_REQUIRE_CUDA=1 MEMPO_CUDA_DEBUG=1 timeout 200 $B/bin/model.test -test.v -test.count=1 \
		-test.run '^(TestCUDADecodeKernels|TestCUDADecodeStep|TestCUDAParityWithTransformers|TestCUDABF16)$' > $R/decode-tests.log 2>&1
	echo "tests rc $?" >> $R/decode-tests.log)
	for v in new old new old; do
		e=X=1; [ $v = old ] && e=MEMPO_CUDA_ATTN_GROUP=0
		echo "#### $v"
		env $e BIN=$B/bin DATA=$B/hotpotqa QWEN_TOKENIZER=$B/tokenizer.json CONFIG=qwen2.5-7b DEVICE=cuda-bf16 G=16 TURNS=8 FORCE=7 \
			STEP=32 OBS=256 BATCH=256 MODES=overlap TIMEOUT=240 bash scripts/bench_rollout.sh 16 /tmp/roll7
	done > $R/rollout7b.log 2>&1
}
. scripts/gpu/longjob.sh
longjob "$0" "${1:-start}"; rc=$?
grep -E "^(--- |FAIL|ok|PASS)|panic|Error|tests rc" $R/decode-tests.log | grep -v "^    --- PASS" | head -30
grep -E "^####|mempo-rollout:|init:" $R/rollout7b.log 2>/dev/null | cut -c1-420
exit $rc
