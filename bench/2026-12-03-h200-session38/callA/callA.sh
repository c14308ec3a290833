#!/bin/bash
# session 38 call A: psa_assign with a thread per 8 blocks of the longest row (s38a: 128 threads at 64K, 256 at 128K,
# 8 register positions each) and a thread per 4 (s38c) against main 2e07afb (s37p: 64 threads, 16 and 32 positions).
# Self-test TestRunPlanners/psa and the wide psa cases (rows of 1024 and 2048 blocks) on s38a; psa's kernel times at
# 32K, 64K and 128K on s37p and s38a; e2e psa at 32K and 64K both causalities and 128K causal, alternating twice;
# memcheck and racecheck over the wide psa cases last. Run from the repository root with bin/s37p, bin/s38a, bin/s38c.
s=$(date +%s)
t() { echo "== $1 at $(( $(date +%s) - s ))s" | tee -a $OUT/log.txt; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/log.txt
timeout 150 bin/s38a/selftest.test -test.run 'TestRunPlanners/psa' -test.v > $OUT/tests.txt 2>&1
t "selftest psa rc $? pass $(grep -c -- '--- PASS' $OUT/tests.txt) fail $(grep -c -- '--- FAIL' $OUT/tests.txt)"
SPARSEATTN_WIDE_PLANNERS=1 timeout 120 bin/s38a/selftest.test -test.run 'TestRunPlannersWide/psa' -test.v >> $OUT/tests.txt 2>&1
t "wide psa rc $? pass $(grep -c -- '--- PASS' $OUT/tests.txt) fail $(grep -c -- '--- FAIL' $OUT/tests.txt)"
if grep -q -- "--- FAIL" $OUT/tests.txt; then grep -v "^=== RUN" $OUT/tests.txt | grep -E "FAIL|rror|differ" | head -12 >> $OUT/log.txt; exit 1; fi
for b in s37p s38a; do
  echo "## $b" >> $OUT/kernels.txt
  SPARSEATTN_KERNEL_BENCH=psa SPARSEATTN_PLANNER_BENCH_N=32768,65536,131072 SPARSEATTN_PLANNER_BENCH_BLOCKK=64 timeout 60 bin/$b/cuda.test -test.run 'TestPlannerKernelTimes' -test.v >> $OUT/kernels.txt 2>&1
  t "kernel times $b rc $?"
done
for r in 1 2; do for b in s37p s38a s38c; do
  timeout 60 bin/$b/sparseattn e2e --n 32768,65536 --causal both --methods psa --sweep=false --repeat 3 --warmup 1 | sed -E "s/\"method\":\"psa\"/\"method\":\"psa-$b\"/" >> $OUT/ab.jsonl 2>> $OUT/log.txt; t "ab $b r$r rc $?"
  timeout 40 bin/$b/sparseattn e2e --n 131072 --causal true --methods psa --sweep=false --repeat 3 --warmup 1 | sed -E "s/\"method\":\"psa\"/\"method\":\"psa-$b\"/" >> $OUT/ab.jsonl 2>> $OUT/log.txt; t "ab128 $b r$r rc $?"
done; done
SPARSEATTN_WIDE_PLANNERS=1 timeout 100 compute-sanitizer --tool memcheck --print-limit 3 bin/s38a/selftest.test -test.run 'TestRunPlannersWide/psa' -test.v > $OUT/sanitizer.txt 2>&1
t "memcheck rc $? pass $(grep -c -- '--- PASS' $OUT/sanitizer.txt) $(grep -E 'ERROR SUMMARY' $OUT/sanitizer.txt | tr '\n' ' ')"
SPARSEATTN_WIDE_PLANNERS=1 timeout 100 compute-sanitizer --tool racecheck --print-limit 3 bin/s38a/selftest.test -test.run 'TestRunPlannersWide/psa' -test.v >> $OUT/sanitizer.txt 2>&1
t "racecheck rc $? pass $(grep -c -- '--- PASS' $OUT/sanitizer.txt) $(grep -E 'RACECHECK SUMMARY' $OUT/sanitizer.txt | tr '\n' ' ')"
