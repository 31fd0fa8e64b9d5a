#!/usr/bin/env bash
# decode: the change's tests, then graph (per-row attention at large batch), graph-split (split attention at every batch), graph-serial
set -u
B=/tmp/dec2; mkdir -p $B && { [ -x $B/model.test ] || tar -xzf .work/dec2/b.tgz -C $B; }
BUNDLE=$B VERSIONS=new MODES=graph,graph-split,graph-serial TEST_TIMEOUT=150 BENCH_TIMEOUT=200 bash $B/run_decode_ab.sh
