#!/usr/bin/env bash
# On the GPU machine, from the repository root, the bundle unpacked in /tmp/b (mempo-update, cuda.test and
# update.test in bin/, lib/, env.sh, tokenizer.json, make_long_rollouts.py, and cfg4.json =
# scripts/gpu/results/2026-12-02-7b/qwen2.5-7b-4layers.json): the optimizer tests, then a model of Qwen2.5-7B's
# width with 4 of its 28 layers (2.02 B parameters: the embedding and LM head whole) and one full-parameter
# 8-bit update over 16 rows of 4,096 ids, its peak GPU memory printed and sampled by nvidia-smi (docs/BENCHMARKS.md).
set -uo pipefail
R=$PWD D=/tmp/b B=/tmp/b/bin
. $D/env.sh; gpu_env $D/lib
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee $OUT/run.log
t=$(date +%s)
{ cd $R/lib/cuda && MEMPO_REQUIRE_CUDA=1 $B/cuda.test -test.v -test.count=1 -test.run 'AdamW8KernelMatchesOptim|AdamWKernelMatchesOptim'
  cd $R/lib/update && MEMPO_REQUIRE_CUDA=1 $B/update.test -test.v -test.count=1 -test.run 'DeviceOptimizer'; } 2>&1 | tee $OUT/tests.log | grep -E '^(---|ok|FAIL|PASS)|:[0-9]+:' | cut -c1-300
echo "tests $(( $(date +%s) - t )) s" | tee -a $OUT/run.log
cd $R
W=/tmp/w4; mkdir -p $W /dev/shm/s4
t=$(date +%s); $B/mempo-update init --config $D/cfg4.json --dtype bf16 --tokenizer $D/tokenizer.json --out $W/m0 --seed 1 2>&1 | tee -a $OUT/run.log; echo "init $(( $(date +%s) - t )) s" | tee -a $OUT/run.log
python3 $D/make_long_rollouts.py $W/long.jsonl --tasks 2 --group 8 --context 4000 --output 96
nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 100 > $W/mem.log & M=$!
t=$(date +%s); $B/mempo-update --device cuda-bf16 --optim-state 8bit --recompute --micro-tokens 4096 --lr 1e-6 --kl-coef 0 --model $W/m0 --rollouts $W/long.jsonl --out $W/f1 --optimizer-dir /dev/shm/s4 2>&1 | tr '\r' '\n' | tail -5 | tee -a $OUT/run.log
echo "update $(( $(date +%s) - t )) s; nvidia-smi peak $(sort -n $W/mem.log | tail -1) MiB" | tee -a $OUT/run.log; kill $M
cat $W/f1/update_metrics.jsonl | tee -a $OUT/run.log; du -sb $W/f1 /dev/shm/s4 | tee -a $OUT/run.log
