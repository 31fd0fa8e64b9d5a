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
# after which the remaining benchmarks are skipped; default 250), RUN_LIMIT
# (a hard limit in seconds: every step's timeout is cut to end 5 s before
# it; default none), PARTS (the benchmarks to run, of: encoder dense
# transformers torch-dense retrieve profile; default all but profile:
# encoder-profile.log, encoder-ncu.csv), TEST_RUN (a -test.run
# pattern for the lib/encoder tests; default all of them), TRANSFORMERS_RUNS
# (scripts/bench_encoder.py's --runs). When the bundle has cuda.test, the
# tests include lib/cuda's flat-search tests; when it has encoder-base.test
# (bundle_encoder.sh with BASE_REV), the encoder part runs that build's
# benchmark too, right after this one's, into encoder-bench-base.log.
set -uo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
what=${1:-all}
OUT=${OUT:-$ROOT/gpu-out}
mkdir -p "$OUT"
budget=${RUN_BUDGET:-250}
X=$(mktemp -d)
tar -C "$X" -xzf bin/gpu/encoder/bundle.tar.gz || { echo "no bundle: run scripts/gpu/bundle_encoder.sh where Go is"; exit 2; }
. scripts/gpu/env.sh
gpu_env "$X/lib"
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

parts=" ${PARTS:-encoder dense transformers torch-dense retrieve} "
limit=${RUN_LIMIT:-0}
left() { (( SECONDS < budget )) || { echo "== skipped $1: ${SECONDS}s of the ${budget}s budget used" | tee -a "$OUT/skipped.log"; return 1; }; }
# want PART NAME: PART is in PARTS and the budget is not spent.
want() { [[ $parts == *" $1 "* ]] && left "$2"; }
# to N: N seconds, cut to end 5 s before RUN_LIMIT (at least 1).
to() {
	local t=$1
	if (( limit > 0 )); then
		local rest=$(( limit - SECONDS - 5 ))
		(( rest < t )) && t=$(( rest > 1 ? rest : 1 ))
	fi
	echo "$t"
}

if [[ $what == tests || $what == all ]]; then
	(cd lib/encoder && MEMPO_REQUIRE_CUDA=1 MEMPO_CUDA_DEBUG=${MEMPO_CUDA_DEBUG:-1} timeout "$(to 120)" "$X/encoder.test" -test.v -test.count=1 -test.run "${TEST_RUN:-.}") >>"$T" 2>&1
	s=$?; [[ $s == 0 ]] || status=$s
	echo "== lib/encoder tests exit $s (${SECONDS}s)" | tee -a "$T"
	(cd lib/retrieval && MEMPO_REQUIRE_CUDA=1 MEMPO_CUDA_DEBUG=${MEMPO_CUDA_DEBUG:-1} timeout "$(to 90)" "$X/retrieval.test" -test.v -test.count=1 -test.run 'GPU') >>"$T" 2>&1
	s=$?; [[ $s == 0 ]] || status=$s
	echo "== lib/retrieval GPU tests exit $s (${SECONDS}s)" | tee -a "$T"
	if [[ -x $X/cuda.test ]]; then
		(cd lib/cuda && MEMPO_REQUIRE_CUDA=1 MEMPO_CUDA_DEBUG=${MEMPO_CUDA_DEBUG:-1} timeout "$(to 60)" "$X/cuda.test" -test.v -test.count=1 -test.run 'Flat|TopK') >>"$T" 2>&1
		s=$?; [[ $s == 0 ]] || status=$s
		echo "== lib/cuda flat-search tests exit $s (${SECONDS}s)" | tee -a "$T"
	fi
	grep -E "^(--- |FAIL|ok|panic)|max \|diff\||top-10|identical" "$T" | head -60
fi
if [[ $what == bench || $what == all ]]; then
	B=$OUT/encoder-bench.log
	if want encoder "encoder (mempo)"; then
		(cd lib/encoder && MEMPO_CUDA_BENCH=1 MEMPO_REQUIRE_CUDA=1 timeout "$(to 100)" "$X/encoder.test" -test.v -test.count=1 -test.run 'TestCUDAEncoderBenchmarks$') >>"$B" 2>&1
		echo "== mempo encoder benchmarks exit $? (${SECONDS}s)" | tee -a "$B"
		if [[ -x $X/encoder-base.test ]] && left "encoder (mempo, base build)"; then
			(cd lib/encoder && MEMPO_CUDA_BENCH=1 MEMPO_REQUIRE_CUDA=1 timeout "$(to 100)" "$X/encoder-base.test" -test.v -test.count=1 -test.run 'TestCUDAEncoderBenchmarks$') >>"$OUT/encoder-bench-base.log" 2>&1
			s=$?
			echo "== mempo encoder benchmarks of the base build ($(cat "$X/base-rev" 2>/dev/null)) exit $s (${SECONDS}s)" | tee -a "$OUT/encoder-bench-base.log"
		fi
	fi
	D=$OUT/dense-bench.log
	if want dense "dense (mempo)"; then
		(cd lib/retrieval && MEMPO_CUDA_BENCH=1 MEMPO_REQUIRE_CUDA=1 timeout "$(to 80)" "$X/retrieval.test" -test.v -test.count=1 -test.run 'TestCUDADenseBenchmarks$') >>"$D" 2>&1
		echo "== mempo dense benchmarks exit $? (${SECONDS}s)" | tee -a "$D"
	fi
	if want transformers "encoder (transformers)"; then
		PYTHONUNBUFFERED=1 timeout "$(to 100)" python3 scripts/bench_encoder.py --threads "$(nproc)" --seconds 1.5 \
			--runs "${TRANSFORMERS_RUNS:-cpu:fp32:16:256,cuda:fp16:64:256,cuda:fp16:128:256,cuda:fp16:256:256,cuda:fp32:128:256,cuda:fp16:1:24,cuda:fp16:256:24}" >>"$B" 2>&1
		echo "== transformers encoder benchmarks exit $? (${SECONDS}s)" | tee -a "$B"
	fi
	if want torch-dense "dense (torch)"; then
		PYTHONUNBUFFERED=1 timeout "$(to 80)" python3 scripts/gpu/bench_dense.py >>"$D" 2>&1
		echo "== torch dense benchmarks exit $? (${SECONDS}s)" | tee -a "$D"
	fi
	if want retrieve "retrieve end to end"; then
		(cd lib/retrieval && MEMPO_CUDA_BENCH=1 MEMPO_REQUIRE_CUDA=1 MEMPO_SERVE_BIN="$X/mempo-serve" timeout "$(to 120)" "$X/retrieval.test" -test.v -test.count=1 -test.run 'TestCUDARetrieveBenchmark$') >>"$OUT/retrieve-bench.log" 2>&1
		echo "== retrieve benchmark exit $? (${SECONDS}s)" | tee -a "$OUT/retrieve-bench.log"
	fi
	P=$OUT/encoder-profile.log
	if want profile "profile"; then
		# One fp16 forward of 128 × 256 tokens by each path (after a
		# warm-up): the default, its 64-row attention tile, unfused; each
		# kernel timed by ncu; transformers' same call under torch.profiler.
		if command -v ncu >/dev/null; then
			(cd lib/encoder && MEMPO_CUDA_PROFILE=1 MEMPO_REQUIRE_CUDA=1 timeout "$(to 90)" ncu --clock-control none --metrics gpu__time_duration.sum --csv \
				"$X/encoder.test" -test.v -test.count=1 -test.run 'TestCUDAEncoderProfile$' >"$OUT/encoder-ncu.csv" 2>>"$P")
			echo "== ncu of the encoder exit $? (${SECONDS}s)" | tee -a "$P"
			python3 scripts/gpu/ncu_summary.py "$OUT/encoder-ncu.csv" warm-up default attn64 unfused 2>&1 | tee -a "$P"
		else
			echo "== no ncu here: the encoder's kernel profile skipped" | tee -a "$P"
		fi
		PYTHONUNBUFFERED=1 timeout "$(to 60)" python3 scripts/bench_encoder.py --seconds 0.5 --profile --runs cuda:fp16:128:256 >>"$P" 2>&1
		echo "== transformers profile exit $? (${SECONDS}s)" | tee -a "$P"
	fi
	grep -h "^BENCH" "$B" "$D" "$OUT/retrieve-bench.log" 2>/dev/null
	[[ -f $OUT/encoder-bench-base.log ]] && grep "^BENCH" "$OUT/encoder-bench-base.log" | sed 's/^BENCH /BENCH base /'
fi
echo "exit status (tests): $status (${SECONDS}s)"
exit $status
