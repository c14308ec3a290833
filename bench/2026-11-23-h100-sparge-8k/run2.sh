#!/bin/bash
# Run 2 (final) of the sparge8k brief: self-test, device tests, timings new (cuda) vs main 8ec66a6 (cuda_old), ncu.
B=bin/sparge8k
S=$OUT/selftest.txt; D=$OUT/tests.txt; T=$OUT/bench.txt; N=$OUT/ncu.txt
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $T; date -u >> $T
timeout 60 $B/selftest.test -test.run 'TestRunPlanners/sparge|TestSpargeHeads|TestSpargeTiesAndWideRows' -test.v > $S 2>&1; rs=$?; echo "selftest rc=$rs" >> $S
timeout 45 $B/cuda.test -test.run 'TestSpargePoolMeans|TestSpargeRowsLayouts' -test.v > $D 2>&1; rd=$?; echo "device tests rc=$rd" >> $D
grep -E "^(---|ok|FAIL|PASS)|rc=|rows differ [1-9]|differ [1-9]|panic|rror" $S $D | grep -v "    --- PASS" | tail -24
grep -E "rows a block" $D | head -20
b8() { echo "=== $1 $2 N=$3" >> $T; SPARSEATTN_SPARGE_BENCH=1 SPARSEATTN_SPARGE_BENCH_WORKLOAD=$2 SPARSEATTN_SPARGE_BENCH_N=$3 timeout $4 $B/$1.test -test.run TestSpargePlanTimes -test.v >> $T 2>&1; }
for bin in cuda cuda_old; do b8 $bin offset 8192 25; b8 $bin llm 8192 30; done
for bin in cuda cuda_old; do echo "=== $bin planner times" >> $T; SPARSEATTN_PLANNER_BENCH=sparge SPARSEATTN_PLANNER_BENCH_N=8192,32768 timeout 25 $B/$bin.test -test.run TestPlannerTimes -test.v >> $T 2>&1; done
grep -E "===|CLI's default\)|sparge_pool instead|dense run|sparge  " $T | head -40
timeout 50 $B/selftest_s.test -test.run 'TestRunPlanners/sparge|TestSpargeHeads|TestSpargeTiesAndWideRows' -test.v > $OUT/selftest_s.txt 2>&1; echo "selftest_s (sparge_pool only) rc=$?"
for bin in cuda cuda_old; do b8 $bin offset 131072 30; done
grep -E "N=131072.*(CLI's default\)|dense run)" $T | head
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
echo "=== new, llm 8K, CDF default: pool and rows" >> $N
SPARSEATTN_SPARGE_BENCH=1 SPARSEATTN_SPARGE_BENCH_WORKLOAD=llm SPARSEATTN_SPARGE_BENCH_N=8192 timeout 40 $NCU --clock-control none --set full -k regex:'sparge_pool|sparge_rows' --launch-skip 22 --launch-count 2 $B/cuda.test -test.run TestSpargePlanTimes >> $N 2>&1
grep -E "^  [a-z_]+.*\(|Duration|Registers Per|Achieved Occupancy|Memory Throughput|Compute \(SM\)|Executed Instructions  " $N | head -20
