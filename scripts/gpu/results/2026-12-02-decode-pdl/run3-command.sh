#!/usr/bin/env bash
# decode: tests; bench of the fused small step (graph) against its parts apart (graph-rope-cols1) and gemv2 off (graph-cols1);
# ncu of the 0.5B batch-1 step's graph nodes; the rollout benchmark with the new step
set -u
B=/tmp/dec3; mkdir -p $B && { [ -x $B/model.test ] || tar -xzf .work/dec3/b.tgz -C $B; }
BUNDLE=$B VERSIONS=new MODES=graph,graph-rope-cols1,graph-cols1 TEST_TIMEOUT=150 BENCH_TIMEOUT=200 bash $B/run_decode_ab.sh
( . scripts/gpu/env.sh; gpu_env $B/lib; cd lib/model
  MEMPO_CUDA_BENCH=1 MEMPO_CUDA_DECODE_BENCH_MODES=graph MEMPO_CUDA_DECODE_BENCH_MODELS=qwen2.5-0.5b timeout 150 \
  ncu --graph-profiling node --clock-control none --metrics gpu__time_duration.sum,dram__bytes_read.sum --csv \
    --launch-skip 6000 --launch-count 390 $B/model.test -test.count=1 -test.run '^TestCUDADecodeBenchmarks$' > $OUT/ncu-05b.csv 2> $OUT/ncu-05b.err
  echo "ncu rc $?" )
python3 $B/ncu_kernels.py $OUT/ncu-05b.csv 2>&1 | tee $OUT/ncu-05b.txt | head -30
tail -3 $OUT/ncu-05b.err
( . scripts/gpu/env.sh; gpu_env $B/lib
  BIN=$B/bin DATA=$B/hotpotqa QWEN_TOKENIZER=$B/tokenizer.json CONFIG=qwen2.5-0.5b DEVICE=cuda-bf16 G=16 TURNS=8 FORCE=7 \
  STEP=32 OBS=256 BATCH=1024 MODES="overlap" TIMEOUT=120 bash scripts/bench_rollout.sh 64 /tmp/roll ) > $OUT/rollout.log 2>&1
grep -E "^==|mempo-rollout:" $OUT/rollout.log | cut -c1-900
