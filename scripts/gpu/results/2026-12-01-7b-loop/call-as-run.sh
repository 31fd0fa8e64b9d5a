#!/usr/bin/env bash
# usage: call.sh lora|full  (on the device, repository root)
set -u
MODE=$1
B=/tmp/b7
if [[ ! -x $B/mempo-update ]]; then mkdir -p $B && tar -xzf .work/lean/bundle.tgz -C $B && gunzip -c .work/lean/tokenizer.json.gz >$B/tokenizer.json; fi
L=/tmp/logs-$MODE; mkdir -p $L
TORCH='env LENS=3840,1792,768,256 TASKS=8 G=16 OUTLEN=256 MICRO_TOKENS=4096 STEPS=2 PYTHONUNBUFFERED=1 python3 scripts/gpu/bench_7b_torch.py'
if [[ $MODE == lora ]]; then
  ( . scripts/gpu/env.sh; gpu_env $B/lib
    cd lib/cuda && MEMPO_REQUIRE_CUDA=1 timeout 60 $B/cuda.test -test.v -test.count=1 -test.run 'AdamW'
    cd ../update && MEMPO_REQUIRE_CUDA=1 timeout 90 $B/update.test -test.v -test.count=1 -test.run 'DeviceOptimizer'
    cd ../model && MEMPO_REQUIRE_CUDA=1 timeout 60 $B/model.test -test.v -test.count=1 -test.run 'TightPool|CUDAPool' ) >$L/tests.log 2>&1
  grep -E '^(--- |ok|FAIL|PASS)' $L/tests.log | tee $OUT/summary.txt
  OUT=$L DEADLINE=${DEADLINE:-400} timeout 420 bash scripts/gpu/loop_7b.sh lora $B $B/tokenizer.json
  timeout 110 bash -c "$TORCH" >$L/torch.log 2>&1; grep BENCH $L/torch.log
else
  OUT=$L DEADLINE=${DEADLINE:-545} AFTER="$TORCH" timeout 560 bash scripts/gpu/loop_7b.sh full $B $B/tokenizer.json
fi
cp $L/loop-$MODE.log $OUT/ 2>/dev/null
tar -czf $OUT/logs-$MODE.tgz -C $L .
df -h / /dev/shm | tail -2
