#!/usr/bin/env bash
# r19b's GPU check (as .work/r19b/gpu.sh), from the combined bundle in /tmp/r16
set -uo pipefail
B=/tmp/r16; mkdir -p $B && [ -x $B/r19b/model.test ] || tar -xzf .work/r16/b.tgz -C $B
. scripts/gpu/env.sh
gpu_env "$B/lib"
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; } > "$OUT/env.log" 2>&1
(cd lib/model && MEMPO_REQUIRE_CUDA=1 MEMPO_CUDA_DEBUG=1 timeout 100 "$B/r19b/model.test" -test.v -test.count=1 -test.run '^TestCUDA') > "$OUT/model-tests.log" 2>&1
echo "model.test exit $?"
(cd lib/cuda && MEMPO_REQUIRE_CUDA=1 timeout 40 "$B/r19b/cuda.test" -test.v -test.count=1) > "$OUT/cuda-tests.log" 2>&1
echo "cuda.test exit $?"
grep -hE '^(--- |ok|FAIL|PASS)|^\s+--- FAIL' "$OUT/model-tests.log" "$OUT/cuda-tests.log" | head -80
