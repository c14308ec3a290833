#!/bin/bash
# usage: bin/s26/r3.sh — sparge 8K plan with the query pooling in the rows kernel, against cuda_old.test; exactness
cd "$(dirname "$0")"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
./cuda.test -test.run 'TestSpargePoolMeans|TestAssembleOrder|TestSpargeRowsLayouts' -test.v 2>&1 | grep -E "^(---|ok|FAIL|PASS)|rows,|differ|want|CPU" | head -60 | tee $OUT/cudatests.txt
export SPARSEATTN_SPARGE_BENCH=1 SPARSEATTN_SPARGE_BENCH_N=8192
for b in cuda_old cuda cuda_old cuda; do
  echo "== $b llm"; SPARSEATTN_SPARGE_BENCH_WORKLOAD=llm ./$b.test -test.run 'TestSpargePlanTimes$' -test.v 2>&1 | grep -E "dense run|CDF τ=0.95 \(θ|no QPOOL|top-k" 
done 2>&1 | tee $OUT/llm8k.txt
echo "== cuda offset 1.5"; ./cuda.test -test.run 'TestSpargePlanTimes$' -test.v 2>&1 | grep -E "dense run|CDF τ=0.95 \(θ|no QPOOL" | tee $OUT/offset8k.txt
for b in cuda_old cuda; do echo "== $b"; SPARSEATTN_PLANNER_BENCH=sparge SPARSEATTN_PLANNER_BENCH_N=8192,32768 ./$b.test -test.run 'TestPlannerTimes$' -test.v 2>&1 | grep -E "ms|%" | head -12; done 2>&1 | tee $OUT/plannertimes.txt
timeout 280 ./selftest.test -test.run 'TestRunPlanners|TestSpargeHeads|TestSpargeTiesAndWideRows' -test.v > $OUT/selftest.txt 2>&1; echo "selftest rc $?"
grep -E "^--- |^FAIL|^PASS" $OUT/selftest.txt | head; grep -E "FAIL" $OUT/selftest.txt | head -20
