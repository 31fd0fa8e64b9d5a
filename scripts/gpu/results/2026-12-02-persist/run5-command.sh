#!/usr/bin/env bash
# decode: tests of the landed code (dec_persist off by default, held to separate launches by the tests);
# separate launches (graph) against dec_persist (graph-persist), twice each, alternating, at 0.5B and 7B
set -u
B=/tmp/p5; mkdir -p $B && { [ -x $B/model.test ] || tar -xzf .work/p5/b.tgz -C $B; }
BUNDLE=$B VERSIONS=new MODELS=qwen2.5-0.5b,qwen2.5-7b MODES=graph,graph-persist,graph,graph-persist TEST_TIMEOUT=180 BENCH_TIMEOUT=240 bash $B/run_decode_ab.sh
