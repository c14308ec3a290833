#!/bin/bash
# Run 1 of the sparge8k brief (the first sparge_pool_vec, replaced before run 2): self-test, pool means, timings new (cuda: sorted select; cuda_a: without) vs main 8ec66a6 (cuda_old), ncu.
B=bin/sparge8k
S=$OUT/selftest.txt; T=$OUT/bench.txt; N=$OUT/ncu.txt
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $T
date -u >> $T
timeout 60 $B/selftest.test -test.run 'TestRunPlanners/sparge|TestSpargeHeads|TestSpargeTiesAndWideRows' -test.v > $S 2>&1; echo "selftest rc=$?" >> $S
for bin in cuda cuda_a; do timeout 20 $B/$bin.test -test.run 'TestSpargePoolMeans' -test.v >> $S 2>&1; echo "$bin poolmeans rc=$?" >> $S; done
for bin in cuda cuda_a cuda_old; do
  echo "=== $bin offset 1.5" >> $T
  SPARSEATTN_SPARGE_BENCH=1 SPARSEATTN_SPARGE_BENCH_N=8192 timeout 20 $B/$bin.test -test.run TestSpargePlanTimes -test.v >> $T 2>&1
  echo "=== $bin llm" >> $T
  SPARSEATTN_SPARGE_BENCH=1 SPARSEATTN_SPARGE_BENCH_WORKLOAD=llm SPARSEATTN_SPARGE_BENCH_N=8192 timeout 30 $B/$bin.test -test.run TestSpargePlanTimes -test.v >> $T 2>&1
  [ $bin = cuda_a ] && continue
  echo "=== $bin planner times" >> $T
  SPARSEATTN_PLANNER_BENCH=sparge SPARSEATTN_PLANNER_BENCH_N=8192,32768 timeout 25 $B/$bin.test -test.run TestPlannerTimes -test.v >> $T 2>&1
done
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
echo "=== new, llm, CDF default: pool and rows" >> $N
SPARSEATTN_SPARGE_BENCH=1 SPARSEATTN_SPARGE_BENCH_WORKLOAD=llm SPARSEATTN_SPARGE_BENCH_N=8192 timeout 40 $NCU --clock-control none --set full -k regex:'sparge_pool|sparge_rows' --launch-skip 22 --launch-count 2 $B/cuda.test -test.run TestSpargePlanTimes >> $N 2>&1
