#!/usr/bin/env bash
# decode: tests (dec_persist against separate launches bit for bit, the barrier timeout fallback);
# the step with dec_persist (graph) against separate launches (graph-sep), all three shapes
set -u
B=/tmp/p1; mkdir -p $B && { [ -x $B/model.test ] || tar -xzf .work/p1/b.tgz -C $B; }
BUNDLE=$B VERSIONS=new MODES=graph,graph-sep TEST_TIMEOUT=180 BENCH_TIMEOUT=200 bash $B/run_decode_ab.sh
cp $OUT/decode-tests.log $OUT/run1-decode-tests.log 2>/dev/null
grep -E "dec_persist|persist|gave up" $OUT/decode-tests.log | head -20
