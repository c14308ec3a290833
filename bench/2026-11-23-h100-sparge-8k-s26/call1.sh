#!/bin/bash
# usage: bin/s26/pool.sh — sparge pool variants and an ncu profile of the default
cd "$(dirname "$0")"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
SPARSEATTN_SPARGE_BENCH=1 SPARSEATTN_SPARGE_BENCH_N=8192 ./cuda.test -test.run 'TestSpargePoolVariants$' -test.v 2>&1 | grep -v "^=== RUN" | tee $OUT/variants.txt
SPARSEATTN_SPARGE_BENCH=1 SPARSEATTN_SPARGE_BENCH_N=8192 timeout 150 ncu --kernel-name sparge_pool_vec --launch-skip 3 --launch-count 1 \
  --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section SchedulerStats --section Occupancy --section LaunchStats --section InstructionStats \
  ./cuda.test -test.run 'TestSpargePoolVariants$' > $OUT/ncu.txt 2>&1
grep -E "Duration|Throughput|Issued|Eligible|Stall|Warp Cycles|Achieved|Executed Ipc|Registers|Theoretical Occ|DRAM|Instructions" $OUT/ncu.txt | head -60
