#!/usr/bin/env bash
# Builds bin/gpu/, everything the GPU machine needs (it has no Go): the five
# commands, the test binaries of lib/cuda and lib/model (kernel sandbox,
# transformers parity on CUDA, and the CUDA benchmarks, which are a test
# gated by MEMPO_CUDA_BENCH=1), and the shared libraries they link that the
# GPU machine's image may lack (OpenBLAS and its Fortran runtime), in
# bin/gpu/lib. scripts/gpu/run.sh runs it there.
#   usage: scripts/gpu/bundle.sh [--no-cmds]
set -euo pipefail
cd "$(dirname "$0")/../.."
. scripts/gpu/libs.sh
B=bin/gpu
mkdir -p "$B/lib"
export CGO_ENABLED=1
FLAGS=(-trimpath -ldflags "-s -w")
go test -c "${FLAGS[@]}" -o "$B/cuda.test" ./lib/cuda
go test -c "${FLAGS[@]}" -o "$B/model.test" ./lib/model
go test -c "${FLAGS[@]}" -o "$B/update.test" ./lib/update
if [[ "${1:-}" != "--no-cmds" ]]; then
	for c in mempo-index mempo-serve mempo-rollout mempo-update mempo-score; do
		go build "${FLAGS[@]}" -o "$B/$c" "./cmd/$c"
	done
fi
copy_libs "$B" "$B/lib"
du -sh "$B" "$B"/* "$B"/lib/* | sort -h | tail -20
echo "bundle ready in $B (carry it to the GPU machine and run scripts/gpu/run.sh there)"
