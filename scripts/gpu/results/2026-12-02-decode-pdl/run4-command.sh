#!/usr/bin/env bash
# decode: tests; attn_split_sub (graph) against attn_split_merged (graph-attn1); ncu of the 0.5B batch-1 step
set -u
B=/tmp/dec4; mkdir -p $B && { [ -x $B/model.test ] || tar -xzf .work/dec4/b.tgz -C $B; }
BUNDLE=$B VERSIONS=new MODES=graph,graph-attn1 TEST_TIMEOUT=150 BENCH_TIMEOUT=170 bash $B/run_decode_ab.sh
( . scripts/gpu/env.sh; gpu_env $B/lib; cd lib/model
  MEMPO_CUDA_BENCH=1 MEMPO_CUDA_DECODE_BENCH_MODES=graph MEMPO_CUDA_DECODE_BENCH_MODELS=qwen2.5-0.5b timeout 100 \
  ncu --graph-profiling node --clock-control none --metrics gpu__time_duration.sum,dram__bytes_read.sum --csv \
    --launch-skip 6000 --launch-count 360 $B/model.test -test.count=1 -test.run '^TestCUDADecodeBenchmarks$' > $OUT/ncu-05b.csv 2> $OUT/ncu-05b.err
  echo "ncu rc $?" )
python3 $B/ncu_kernels.py $OUT/ncu-05b.csv 2>&1 | tee $OUT/ncu-05b.txt | head -14
