#!/usr/bin/env bash
# Runs the demo on the GPU machine (which has no Go) with the commands of a
# bundle made by scripts/gpu/bundle.sh (bin/gpu): `demo.sh run` is one demo
# (scripts/demo/run.sh), `demo.sh check` is make demo-check's three seeds
# (scripts/demo/check.sh, the seeds in parallel). Both use PRESET=gpu unless
# told otherwise (run.sh's comment on it; docs/DEMO.md's three-seed GPU
# table). Any knob of run.sh passes through the environment.
#   usage: scripts/gpu/demo.sh [run|check]      (default: run)
set -euo pipefail
cd "$(dirname "$0")/../.."
[ -x bin/gpu/mempo-update ] || { echo "no bin/gpu/mempo-update: run scripts/gpu/bundle.sh where Go is" >&2; exit 2; }
. scripts/gpu/env.sh
gpu_env "$PWD/bin/gpu/lib"
export BIN=bin/gpu DEVICE=${DEVICE:-cuda} PRESET=${PRESET:-gpu} PARALLEL=${PARALLEL:-1}
case ${1:-run} in
run) exec bash scripts/demo/run.sh ;;
check) exec bash scripts/demo/check.sh ;;
*) echo "usage: $0 [run|check]" >&2; exit 2 ;;
esac
