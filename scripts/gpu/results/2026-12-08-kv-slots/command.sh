#!/usr/bin/env bash
# The growing KV-cache slots (lib/model/kvslots.go) on the GPU: under a
# cache limit below the reservation, the same tokens as without one, the
# decoding step's graphs replayed as rows' slots move and rows are
# preempted and decoded again (TestCUDAGenerateCacheLimit, fp32 and bf16),
# beside the tests of the layouts and the decoding step they touch, and
# TestCUDANormEmbedRoPE (its dw now compared within 1e-6, not by bits).
#   carry: .work/ks.tar.xz (scripts/gpu/pack.sh ks model.test)
#   Not yet run (2026-12-08: no device machine was lent).
set -uo pipefail
B=/tmp/ks; [ -x $B/bin/model.test ] || tar -xJf .work/ks.tar.xz -C /tmp
. scripts/gpu/env.sh; gpu_env $B/lib
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > $OUT/gpu.txt
T='^(TestCUDAGenerateCacheLimit|TestCUDAGenerateSharedPrefixes|TestCUDADecodeStep|TestCUDADecodeKernels|TestCUDAParityWithTransformers|TestCUDANormEmbedRoPE)$'
(cd lib/model && MEMPO_REQUIRE_CUDA=1 timeout 300 $B/bin/model.test -test.v -test.count=1 -test.run "$T" > $OUT/tests.log 2>&1
	echo "tests rc $?" >> $OUT/tests.log)
grep -E "^(--- |FAIL|ok|PASS)|panic|tests rc|report" $OUT/tests.log | grep -v "^    --- PASS" | cut -c1-220 | head -40
