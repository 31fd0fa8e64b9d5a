#!/usr/bin/env bash
# Runs on the GPU machine, from the repository root, over the bundle made by
# scripts/gpu/bundle_encoder.sh (bin/gpu/encoder/bundle.tar.gz): the tests of
# lib/encoder (the GPU forward against the CPU and transformers' fixture, in
# fp32 and fp16) and the GPU tests of lib/retrieval (flat search, the
# encoder + search pipeline, mempo-serve's server on one GPU), then the
# benchmarks, mempo's and PyTorch's in the same run: the base-sized encoder
# (lib/encoder TestCUDAEncoderBenchmarks, scripts/bench_encoder.py), dense
# search over 1M and 21M synthetic vectors (lib/retrieval
# TestCUDADenseBenchmarks, scripts/gpu/bench_dense.py) and /retrieve end to
# end with the encoder in the loop (TestCUDARetrieveBenchmark, mempo-serve).
# Logs go to $OUT (the device tool's folder) or ./gpu-out, written as they
# come: encoder-tests.log, encoder-bench.log, dense-bench.log,
# retrieve-bench.log. The exit status is that of the tests.
#   usage: scripts/gpu/run_encoder.sh [tests|bench|all]      (default: all)
# Environment: MEMPO_CUDA_LIB_DIR (default: PyTorch's nvidia-* wheels), the
# benchmarks' MEMPO_BENCH_* variables (see the tests), RUN_BUDGET (seconds
# after which the remaining benchmarks are skipped; default 250).
set -uo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
what=${1:-all}
OUT=${OUT:-$ROOT/gpu-out}
mkdir -p "$OUT"
budget=${RUN_BUDGET:-250}
X=$(mktemp -d)
tar -C "$X" -xzf bin/gpu/encoder/bundle.tar.gz || { echo "no bundle: run scripts/gpu/bundle_encoder.sh where Go is"; exit 2; }
export LD_LIBRARY_PATH="$X/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
if [[ -z "${MEMPO_CUDA_LIB_DIR:-}" ]]; then
	MEMPO_CUDA_LIB_DIR=$(python3 - <<'PY' 2>/dev/null
import os
try:
    import nvidia
    ds = set()
    for p in nvidia.__path__:
        for d in os.listdir(p):
            for sub in ("lib", "lib64"):
                q = os.path.join(p, d, sub)
                if os.path.isdir(q):
                    ds.add(q)
    print(os.pathsep.join(sorted(ds)))
except Exception:
    pass
PY
)
	export MEMPO_CUDA_LIB_DIR
fi
export MEMPO_CUDA_CACHE=${MEMPO_CUDA_CACHE:-/tmp/mempo-cuda-cache}
status=0
T=$OUT/encoder-tests.log
{
	date -u
	nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv
	echo "MEMPO_CUDA_LIB_DIR=$MEMPO_CUDA_LIB_DIR"
	echo "CPU: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
	ldd "$X/encoder.test" "$X/retrieval.test" | grep -E "not found" || true
	command -v g++ >/dev/null || echo "no g++ here: the CPU emulation tests of kernels/bert.cu skip"
} 2>&1 | tee "$T"

left() { (( SECONDS < budget )) || { echo "== skipped $1: ${SECONDS}s of the ${budget}s budget used" | tee -a "$OUT/skipped.log"; return 1; }; }

if [[ $what == tests || $what == all ]]; then
	(cd lib/encoder && MEMPO_REQUIRE_CUDA=1 MEMPO_CUDA_DEBUG=${MEMPO_CUDA_DEBUG:-1} timeout 120 "$X/encoder.test" -test.v -test.count=1) >>"$T" 2>&1
	s=$?; [[ $s == 0 ]] || status=$s
	echo "== lib/encoder tests exit $s (${SECONDS}s)" | tee -a "$T"
	(cd lib/retrieval && MEMPO_REQUIRE_CUDA=1 MEMPO_CUDA_DEBUG=${MEMPO_CUDA_DEBUG:-1} timeout 90 "$X/retrieval.test" -test.v -test.count=1 -test.run 'GPU') >>"$T" 2>&1
	s=$?; [[ $s == 0 ]] || status=$s
	echo "== lib/retrieval GPU tests exit $s (${SECONDS}s)" | tee -a "$T"
	grep -E "^(--- |FAIL|ok|panic)|max \|diff\||top-10|identical" "$T" | head -60
fi
if [[ $what == bench || $what == all ]]; then
	B=$OUT/encoder-bench.log
	if left "encoder (mempo)"; then
		(cd lib/encoder && MEMPO_CUDA_BENCH=1 MEMPO_REQUIRE_CUDA=1 timeout 100 "$X/encoder.test" -test.v -test.count=1 -test.run 'TestCUDAEncoderBenchmarks$') >>"$B" 2>&1
		echo "== mempo encoder benchmarks exit $? (${SECONDS}s)" | tee -a "$B"
	fi
	D=$OUT/dense-bench.log
	if left "dense (mempo)"; then
		(cd lib/retrieval && MEMPO_CUDA_BENCH=1 MEMPO_REQUIRE_CUDA=1 timeout 80 "$X/retrieval.test" -test.v -test.count=1 -test.run 'TestCUDADenseBenchmarks$') >>"$D" 2>&1
		echo "== mempo dense benchmarks exit $? (${SECONDS}s)" | tee -a "$D"
	fi
	if left "encoder (transformers)"; then
		PYTHONUNBUFFERED=1 timeout 100 python3 scripts/bench_encoder.py --threads "$(nproc)" --seconds 1.5 \
			--runs cpu:fp32:16:256,cuda:fp16:64:256,cuda:fp16:128:256,cuda:fp16:256:256,cuda:fp32:128:256,cuda:fp16:1:24,cuda:fp16:256:24 >>"$B" 2>&1
		echo "== transformers encoder benchmarks exit $? (${SECONDS}s)" | tee -a "$B"
	fi
	if left "dense (torch)"; then
		PYTHONUNBUFFERED=1 timeout 80 python3 scripts/gpu/bench_dense.py >>"$D" 2>&1
		echo "== torch dense benchmarks exit $? (${SECONDS}s)" | tee -a "$D"
	fi
	if left "retrieve end to end"; then
		(cd lib/retrieval && MEMPO_CUDA_BENCH=1 MEMPO_REQUIRE_CUDA=1 MEMPO_SERVE_BIN="$X/mempo-serve" timeout 120 "$X/retrieval.test" -test.v -test.count=1 -test.run 'TestCUDARetrieveBenchmark$') >>"$OUT/retrieve-bench.log" 2>&1
		echo "== retrieve benchmark exit $? (${SECONDS}s)" | tee -a "$OUT/retrieve-bench.log"
	fi
	grep -h "^BENCH" "$B" "$D" "$OUT/retrieve-bench.log" 2>/dev/null
fi
echo "exit status (tests): $status (${SECONDS}s)"
exit $status
