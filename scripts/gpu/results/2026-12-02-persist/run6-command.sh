#!/usr/bin/env bash
# decode: the landed main (dec_persist by default from a hidden size of 3072): tests, then the default step (graph)
# against separate launches (graph-sep) at all three shapes
set -u
B=/tmp/p6; mkdir -p $B && { [ -x $B/model.test ] || tar -xzf .work/p6/b.tgz -C $B; }
BUNDLE=$B VERSIONS=new MODES=graph,graph-sep TEST_TIMEOUT=180 BENCH_TIMEOUT=240 bash $B/run_decode_ab.sh
