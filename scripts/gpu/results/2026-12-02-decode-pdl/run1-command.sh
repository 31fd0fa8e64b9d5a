#!/usr/bin/env bash
# decode A/B: the change (graph with overlapped launches, graph-serial without) against main's build, same call
set -u
B=/tmp/dec1; mkdir -p $B && { [ -x $B/model.test ] || tar -xzf .work/dec1/b.tgz -C $B; }
BUNDLE=$B MODES=graph,graph-serial TEST_TIMEOUT=150 BENCH_TIMEOUT=150 bash $B/run_decode_ab.sh
