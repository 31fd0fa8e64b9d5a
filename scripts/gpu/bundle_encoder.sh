#!/usr/bin/env bash
# Builds bin/gpu/encoder/bundle.tar.gz, what scripts/gpu/run_encoder.sh needs
# on the GPU machine (it has no Go): the test binaries of lib/encoder,
# lib/retrieval and lib/cuda (GPU tests; the benchmarks are tests gated by
# MEMPO_CUDA_BENCH=1), mempo-serve (the end-to-end /retrieve benchmark runs
# it), and in lib/ the shared libraries they link that the GPU image may
# lack (OpenBLAS and its Fortran runtime), as scripts/gpu/bundle.sh gathers
# them. Compressed, since the device tool carries at most 64 MiB.
# With BASE_REV=<git revision>, it adds encoder-base.test, lib/encoder's test
# binary built from that revision (a temporary worktree), so that
# run_encoder.sh benchmarks the build before a change beside it on the same
# machine.
#   usage: [BASE_REV=main] scripts/gpu/bundle_encoder.sh      then carry bin/gpu/encoder
set -euo pipefail
cd "$(dirname "$0")/../.."
. scripts/gpu/libs.sh
D=bin/gpu/encoder
S=$(mktemp -d)
trap 'rm -rf "$S"' EXIT
mkdir -p "$D" "$S/lib"
export CGO_ENABLED=1
FLAGS=(-trimpath -ldflags "-s -w")
go test -c "${FLAGS[@]}" -o "$S/encoder.test" ./lib/encoder
go test -c "${FLAGS[@]}" -o "$S/retrieval.test" ./lib/retrieval
go test -c "${FLAGS[@]}" -o "$S/cuda.test" ./lib/cuda
go build "${FLAGS[@]}" -o "$S/mempo-serve" ./cmd/mempo-serve
if [[ -n ${BASE_REV:-} ]]; then
	W=$(mktemp -d)
	git worktree add -q --detach "$W/base" "$BASE_REV"
	(cd "$W/base" && go test -c "${FLAGS[@]}" -o "$S/encoder-base.test" ./lib/encoder)
	git rev-parse --short "$BASE_REV" >"$S/base-rev"
	git worktree remove --force "$W/base"
	rm -rf "$W"
fi
copy_libs "$S" "$S/lib"
tar -C "$S" -czf "$D/bundle.tar.gz.tmp" .
mv "$D/bundle.tar.gz.tmp" "$D/bundle.tar.gz"
du -sh "$S"/* "$S"/lib/* "$D/bundle.tar.gz" | sort -h
echo "bundle ready: $D/bundle.tar.gz (carry bin/gpu/encoder; run scripts/gpu/run_encoder.sh there)"
