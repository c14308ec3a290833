#!/bin/bash
# usage: bin/k28/kern.sh — every device planner's kernels one by one (TestPlannerKernelTimes), 8K and 32K causal
cd "$(dirname "$0")"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/device.txt
SPARSEATTN_KERNEL_BENCH=1 SPARSEATTN_PLANNER_BENCH_N=8192,32768 timeout 120 ./cuda.test -test.run 'TestPlannerKernelTimes$' -test.v > $OUT/kernels.txt 2>&1; echo "rc $?"
sed 's/.*planner_kernels_test.go:[0-9]*: //' $OUT/kernels.txt
