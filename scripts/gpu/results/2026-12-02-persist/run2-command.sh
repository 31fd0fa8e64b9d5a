#!/usr/bin/env bash
# decode: tests; dec_persist with L2 prefetches (graph), without (graph-nopf), separate launches (graph-sep); phase traces
set -u
B=/tmp/p2; mkdir -p $B && { [ -x $B/model.test ] || tar -xzf .work/p2/b.tgz -C $B; }
BUNDLE=$B VERSIONS=new MODES=graph,graph-nopf,graph-sep TEST_TIMEOUT=180 BENCH_TIMEOUT=200 bash $B/run_decode_ab.sh
cp $OUT/decode-tests.log $OUT/run2-decode-tests.log 2>/dev/null
grep -E "dec_persist|persist|gave up" $OUT/decode-tests.log | head -20
