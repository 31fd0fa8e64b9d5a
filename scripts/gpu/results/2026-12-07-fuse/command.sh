#!/usr/bin/env bash
# The forward's residual add + RMSNorm in one launch (add_rmsnorm_f32) and
# q's and k's bias + RoPE in one (rope_f32 with the bias), against the same
# binaries with MEMPO_CUDA_FUSE=0 (two launches each, the same bits): lib/model's
# GPU tests of the forward, with BENCH=1 TestCUDABenchmarks at 0.5B (training
# step, prefill, decoding; new, old), then the MemPO rollout benchmark at 0.5B (G =
# 16, 64 tasks, 8 turns, batch 1024) new / old / new / old and once each with
# kernel times.
#   carry: .work/w11.tar.xz (lib/model's test binary, the commands, their
#   libraries, the HotpotQA dev-a paragraphs and the Qwen tokenizer)
set -uo pipefail
R=$OUT
B=/tmp/w11; [ -x $B/bin/model.test ] || tar -xJf .work/w11.tar.xz -C /tmp
. scripts/gpu/env.sh; gpu_env $B/lib
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > $R/gpu.txt
(cd lib/model && MEMPO_REQUIRE_CUDA=1 timeout 150 $B/bin/model.test -test.v -test.count=1 \
	-test.run '^(TestCUDANormEmbedRoPE|TestCUDADecodeStep|TestCUDAParityWithTransformers|TestCUDABF16|TestCUDALoRA|TestCUDAGenerateSharedPrefixes|TestCUDALogProbsShared)$' > $R/tests.log 2>&1
echo "tests rc $?" >> $R/tests.log
[ "${BENCH:-0}" = 1 ] && for v in new old; do
	e=X=1; [ $v = old ] && e=MEMPO_CUDA_FUSE=0
	env $e MEMPO_CUDA_BENCH=1 MEMPO_CUDA_BENCH_RUNS=qwen2.5-0.5b:bf16 timeout 100 $B/bin/model.test -test.v -test.count=1 \
		-test.timeout 0 -test.run 'TestCUDABenchmarks$' > $R/bench-$v.log 2>&1
	echo "bench rc $?" >> $R/bench-$v.log
done)
bench() { # bench MODES [env...]
	local modes=$1; shift
	env "$@" BIN=$B/bin DATA=$B/hotpotqa QWEN_TOKENIZER=$B/tokenizer.json CONFIG=qwen2.5-0.5b DEVICE=cuda-bf16 G=16 TURNS=8 FORCE=7 \
		STEP=32 OBS=256 BATCH=1024 MODES="$modes" TIMEOUT=90 bash scripts/bench_rollout.sh 64 /tmp/roll
}
for v in new old new old; do
	e=X=1; [ $v = old ] && e=MEMPO_CUDA_FUSE=0
	echo "#### $v"; bench overlap $e
done > $R/rollout.log 2>&1
{ echo "#### new, kernel times"; bench overlap MEMPO_CUDA_KERNEL_TIMES=1; echo "#### old, kernel times"; bench overlap MEMPO_CUDA_KERNEL_TIMES=1 MEMPO_CUDA_FUSE=0; } > $R/rollout-prof.log 2>&1
grep -E "^(--- |FAIL|ok|PASS)|panic|tests rc" $R/tests.log | grep -v "^    --- PASS" | head -30
grep -hE "^BENCH|bench rc" $R/bench-*.log | cut -c1-250
grep -E "^####|mempo-rollout:" $R/rollout.log | cut -c1-400
grep -E "^####|^  [a-z]|add_|rmsnorm|rope|bias" $R/rollout-prof.log | cut -c1-200 | head -60
