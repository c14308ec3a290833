#!/bin/bash
# session 39 call B: psa_score's warpgroups decoupled (each stages its own tile, named barriers within a work item;
# the pair's first wgmma overwrites the accumulators; descriptors by offset), build s39b, against main 4dc5139 (s39a).
# Self-test TestRunPlanners/psa and the wide psa cases on s39b; racecheck and memcheck over three psa cases; kernel times at
# 32K and 128K on both; e2e psa at 32K both causalities and 128K causal, alternating twice.
s=$(date +%s)
t() { echo "== $1 at $(( $(date +%s) - s ))s" | tee -a $OUT/log.txt; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/log.txt
timeout 150 bin/s39b/selftest.test -test.run 'TestRunPlanners/psa' -test.v > $OUT/tests.txt 2>&1
t "selftest psa rc $? pass $(grep -c -- '--- PASS' $OUT/tests.txt) fail $(grep -c -- '--- FAIL' $OUT/tests.txt)"
SPARSEATTN_WIDE_PLANNERS=1 timeout 120 bin/s39b/selftest.test -test.run 'TestRunPlannersWide/psa' -test.v >> $OUT/tests.txt 2>&1
t "wide psa rc $? pass $(grep -c -- '--- PASS' $OUT/tests.txt) fail $(grep -c -- '--- FAIL' $OUT/tests.txt)"
if grep -q -- "--- FAIL" $OUT/tests.txt; then grep -v "^=== RUN" $OUT/tests.txt | grep -E "FAIL|rror|differ" | head -12 >> $OUT/log.txt; exit 1; fi
for b in s39a s39b; do
  echo "## $b" >> $OUT/kernels.txt
  SPARSEATTN_KERNEL_BENCH=psa SPARSEATTN_PLANNER_BENCH_N=32768,131072 SPARSEATTN_PLANNER_BENCH_BLOCKK=64 timeout 60 bin/$b/cuda.test -test.run 'TestPlannerKernelTimes' -test.v >> $OUT/kernels.txt 2>&1
  t "kernel times $b rc $?"
done
for r in 1 2; do for b in s39a s39b; do
  timeout 60 bin/$b/sparseattn e2e --n 32768 --causal both --methods psa --sweep=false --repeat 3 --warmup 1 | sed -E "s/\"method\":\"psa\"/\"method\":\"psa-$b\"/" >> $OUT/ab.jsonl 2>> $OUT/log.txt; t "ab $b r$r rc $?"
  timeout 40 bin/$b/sparseattn e2e --n 131072 --causal true --methods psa --sweep=false --repeat 3 --warmup 1 | sed -E "s/\"method\":\"psa\"/\"method\":\"psa-$b\"/" >> $OUT/ab.jsonl 2>> $OUT/log.txt; t "ab128 $b r$r rc $?"
done; done
timeout 150 compute-sanitizer --tool racecheck --print-limit 3 bin/s39b/selftest.test -test.run 'TestRunPlanners/psa/(causal_GQA_ragged_N=1000_D128|llm_workload_N=4096|non-causal_N=1500_D64_f16_BNHD)$' -test.v > $OUT/sanitizer.txt 2>&1
t "racecheck rc $? pass $(grep -c -- '--- PASS' $OUT/sanitizer.txt) $(grep -E 'RACECHECK SUMMARY' $OUT/sanitizer.txt | sort | uniq -c | tr '\n' ' ')"
timeout 100 compute-sanitizer --tool memcheck --print-limit 3 bin/s39b/selftest.test -test.run 'TestRunPlanners/psa/(causal_GQA_ragged_N=1000_D128|llm_workload_N=4096|non-causal_N=1500_D64_f16_BNHD)$' -test.v >> $OUT/sanitizer.txt 2>&1
t "memcheck rc $? pass $(grep -c -- '--- PASS' $OUT/sanitizer.txt) $(grep -E 'ERROR SUMMARY' $OUT/sanitizer.txt | sort | uniq -c | tr '\n' ' ')"
