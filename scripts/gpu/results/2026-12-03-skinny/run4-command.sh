#!/usr/bin/env bash
# ncu of the 705th launch of skinny_bf16_m32 in TestCUDASkinnyBenchmarks (meant as the 7B gate+up product at 32 rows;
# the count was off: it profiled the 7B o product at 32 rows, run 3's build)
set -u
B=/tmp/sk4; mkdir -p /tmp && tar -xJf .work/sk4.tar.xz -C /tmp
. scripts/gpu/env.sh; gpu_env $B/lib; cd lib/model
S="--section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section SchedulerStats --section Occupancy --section LaunchStats --section SourceCounters"
MEMPO_CUDA_BENCH=1 timeout 200 ncu --clock-control none $S --kernel-name skinny_bf16_m32 --launch-skip 704 --launch-count 1 \
  $B/model.test -test.count=1 -test.run '^TestCUDASkinnyBenchmarks$' > $OUT/ncu-skinny.txt 2> $OUT/ncu-skinny.err
echo "ncu rc $?"
grep -E "Duration|DRAM Throughput|Memory Throughput|Compute \(SM\)|Registers Per|Achieved Occupancy|Theoretical Occupancy|Block Limit|Warp Cycles Per Issued|Issue Slots|Stall|L1/TEX Hit|L2 Hit|Mem Busy|Max Bandwidth|smsp__pcsamp|Local" $OUT/ncu-skinny.txt | head -60
grep -B2 -A12 "Warp State Statistics" $OUT/ncu-skinny.txt | tail -30
