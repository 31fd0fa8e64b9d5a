#!/usr/bin/env bash
# attn_split_group (decode attention for steps of more than 4 rows: a block's
# warps score 32 keys at once for every query head of a kv head) against the
# kernels it replaces there (attn_split_sub / attn_split_merged: the nogroup
# variant, MEMPO_CUDA_ATTN_GROUP=0), same binaries, alternating: the decoding
# step's GPU tests, TestCUDADecodeBenchmarks at batch 8, 32, 64 and 256 for
# the three Qwen2.5 shapes, then the MemPO rollout benchmark at 0.5B (G = 16,
# 64 tasks, 8 turns, batch 1024) new / old / new / old and once with kernel
# times.
#   carry: .work/grp.tar.xz (lib/model's test binary, the commands, their
#   libraries, the HotpotQA dev-a paragraphs and the Qwen tokenizer)
#   usage: command.sh start | wait
set -uo pipefail
R=/tmp/grp
job() {
	B=/tmp/grpbin/grp; mkdir -p /tmp/grpbin && tar -xJf .work/grp.tar.xz -C /tmp/grpbin
	. scripts/gpu/env.sh; gpu_env $B/lib
	nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > $R/gpu.txt
	(cd lib/model && MEMPO_REQUIRE_CUDA=1 MEMPO_CUDA_DEBUG=1 timeout 200 $B/bin/model.test -test.v -test.count=1 \
		-test.run '^(TestCUDADecodeKernels|TestCUDADecodeStep|TestCUDAParityWithTransformers|TestCUDABF16)$' > $R/decode-tests.log 2>&1
	echo "tests rc $?" >> $R/decode-tests.log
	MEMPO_CUDA_BENCH=1 MEMPO_CUDA_DECODE_BENCH_MODES=graph,graph-nogroup,graph-gw2,graph-gw8,graph,graph-nogroup \
		MEMPO_CUDA_DECODE_BENCH_MODELS=qwen2.5-0.5b,qwen2.5-1.5b,qwen2.5-7b MEMPO_CUDA_DECODE_BENCH_BATCHES=8,32,64,256 \
		timeout 400 $B/bin/model.test -test.v -test.count=1 -test.timeout 0 -test.run '^TestCUDADecodeBenchmarks$' > $R/decode-bench.log 2>&1
	echo "bench rc $?" >> $R/decode-bench.log)
	bench() { # bench MODES [env...]
		local modes=$1; shift
		env "$@" BIN=$B/bin DATA=$B/hotpotqa QWEN_TOKENIZER=$B/tokenizer.json CONFIG=qwen2.5-0.5b DEVICE=cuda-bf16 G=16 TURNS=8 FORCE=7 \
			STEP=32 OBS=256 BATCH=1024 MODES="$modes" TIMEOUT=90 INDEX=${INDEX:-} bash scripts/bench_rollout.sh 64 /tmp/roll
	}
	for v in new old new old; do
		e=X=1; [ $v = old ] && e=MEMPO_CUDA_ATTN_GROUP=0
		echo "#### $v"; bench overlap $e
	done > $R/rollout.log 2>&1
	{ echo "#### new, kernel times"; bench overlap MEMPO_CUDA_KERNEL_TIMES=1; echo "#### old, kernel times"; bench overlap MEMPO_CUDA_KERNEL_TIMES=1 MEMPO_CUDA_ATTN_GROUP=0; } > $R/rollout-prof.log 2>&1
}
. scripts/gpu/longjob.sh
longjob "$0" "${1:-start}"; rc=$?
grep -E "^(--- |FAIL|ok|PASS)|panic|Error|tests rc" $R/decode-tests.log | grep -v "^    --- PASS" | head -30
grep -E "^BENCH|bench rc" $R/decode-bench.log | grep -v "loaded\|fused step\| kernel " | sed 's/ (incl. prefill)//; s/tokens\/s = //g; s/ of bound; steps alone//'
grep -E "^####|mempo-rollout:" $R/rollout.log 2>/dev/null | cut -c1-600
grep -E "^####|^kernel times|^  [a-z]|attn" $R/rollout-prof.log 2>/dev/null | cut -c1-300 | head -40
exit $rc
