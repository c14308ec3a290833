#!/bin/bash
# session 38 call B: psa_assign sorting only the heaviest blocks that hold the last cut's mass (psa_select; s38d)
# against s38a (call A's 256-thread psa_assign, whole-row sorts) and main 2e07afb (s37p). Self-test TestRunPlanners/psa
# and the wide psa cases (rows of 1024 and 2048 blocks, causal rows of up to 256) on s38d; psa's kernel times at 32K,
# 64K and 128K on s38a and s38d; e2e psa at 16K-64K both causalities and 128K causal, s37p and s38d alternating twice;
# memcheck and racecheck over the wide psa cases last. Run from the repository root with bin/s37p, bin/s38a, bin/s38d.
s=$(date +%s)
t() { echo "== $1 at $(( $(date +%s) - s ))s" | tee -a $OUT/log.txt; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/log.txt
timeout 150 bin/s38d/selftest.test -test.run 'TestRunPlanners/psa' -test.v > $OUT/tests.txt 2>&1
t "selftest psa rc $? pass $(grep -c -- '--- PASS' $OUT/tests.txt) fail $(grep -c -- '--- FAIL' $OUT/tests.txt)"
SPARSEATTN_WIDE_PLANNERS=1 timeout 150 bin/s38d/selftest.test -test.run 'TestRunPlannersWide/psa' -test.v >> $OUT/tests.txt 2>&1
t "wide psa rc $? pass $(grep -c -- '--- PASS' $OUT/tests.txt) fail $(grep -c -- '--- FAIL' $OUT/tests.txt)"
if grep -q -- "--- FAIL" $OUT/tests.txt; then grep -v "^=== RUN" $OUT/tests.txt | grep -E "FAIL|rror|differ" | head -12 >> $OUT/log.txt; exit 1; fi
for b in s38a s38d; do
  echo "## $b" >> $OUT/kernels.txt
  SPARSEATTN_KERNEL_BENCH=psa SPARSEATTN_PLANNER_BENCH_N=32768,65536,131072 SPARSEATTN_PLANNER_BENCH_BLOCKK=64 timeout 60 bin/$b/cuda.test -test.run 'TestPlannerKernelTimes' -test.v >> $OUT/kernels.txt 2>&1
  t "kernel times $b rc $?"
done
for r in 1 2; do for b in s37p s38d; do
  timeout 60 bin/$b/sparseattn e2e --n 16384,32768,65536 --causal both --methods psa --sweep=false --repeat 3 --warmup 1 | sed -E "s/\"method\":\"psa\"/\"method\":\"psa-$b\"/" >> $OUT/ab.jsonl 2>> $OUT/log.txt; t "ab $b r$r rc $?"
  timeout 40 bin/$b/sparseattn e2e --n 131072 --causal true --methods psa --sweep=false --repeat 3 --warmup 1 | sed -E "s/\"method\":\"psa\"/\"method\":\"psa-$b\"/" >> $OUT/ab.jsonl 2>> $OUT/log.txt; t "ab128 $b r$r rc $?"
done; done
SPARSEATTN_WIDE_PLANNERS=1 timeout 100 compute-sanitizer --tool memcheck --print-limit 3 bin/s38d/selftest.test -test.run 'TestRunPlannersWide/psa' -test.v > $OUT/sanitizer.txt 2>&1
t "memcheck rc $? pass $(grep -c -- '--- PASS' $OUT/sanitizer.txt) $(grep -E 'ERROR SUMMARY' $OUT/sanitizer.txt | tr '\n' ' ')"
SPARSEATTN_WIDE_PLANNERS=1 timeout 110 compute-sanitizer --tool racecheck --print-limit 3 bin/s38d/selftest.test -test.run 'TestRunPlannersWide/psa' -test.v >> $OUT/sanitizer.txt 2>&1
t "racecheck rc $? pass $(grep -c -- '--- PASS' $OUT/sanitizer.txt) $(grep -E 'RACECHECK SUMMARY' $OUT/sanitizer.txt | tr '\n' ' ')"
