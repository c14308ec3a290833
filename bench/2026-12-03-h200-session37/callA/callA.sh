#!/bin/bash
# session 37 call A: bm_mass on warpgroup MMA (BM_WG; s37, and s37n3 with three stages) against main 55bc79c (old).
# Self-test TestRunPlanners for xattn, unisparse and auto on s37 (stops on a failure), TestUniOutlierDevice;
# e2e xattn and unisparse 8K-64K both causalities at their defaults, old / s37 / s37n3 alternating twice;
# memcheck and racecheck over TestRunPlanners/xattn.
cd "$(dirname "$0")"
s=$(date +%s)
t() { echo "== $1 at $(( $(date +%s) - s ))s" | tee -a $OUT/log.txt; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/log.txt
timeout 200 ./s37/selftest.test -test.run 'TestRunPlanners/(xattn|unisparse|auto)' -test.v > $OUT/tests.txt 2>&1
t "selftest s37 rc $? pass $(grep -c -- '--- PASS' $OUT/tests.txt) fail $(grep -c -- '--- FAIL' $OUT/tests.txt)"
timeout 60 ./s37/cuda.test -test.run 'TestUniOutlierDevice' -test.v >> $OUT/tests.txt 2>&1
t "cuda.test s37 rc $? pass $(grep -c -- '--- PASS' $OUT/tests.txt) fail $(grep -c -- '--- FAIL' $OUT/tests.txt)"
if grep -q -- "--- FAIL" $OUT/tests.txt; then grep -v "^=== RUN" $OUT/tests.txt | grep -E "FAIL|rror|differ" | head -12 >> $OUT/log.txt; exit 1; fi
for r in 1 2; do for b in s37old s37 s37n3; do
  timeout 60 ./$b/sparseattn e2e --n 8192,16384,32768,65536 --causal both --methods xattn,unisparse --sweep=false --repeat 3 --warmup 1 | sed -E "s/\"method\":\"(xattn|unisparse)\"/\"method\":\"\1-$b\"/" >> $OUT/ab.jsonl 2>> $OUT/log.txt; t "ab $b r$r rc $?"
done; done
timeout 60 compute-sanitizer --tool memcheck --print-limit 3 ./s37/selftest.test -test.run 'TestRunPlanners/xattn' -test.v > $OUT/sanitizer.txt 2>&1
t "memcheck rc $? pass $(grep -c -- '--- PASS' $OUT/sanitizer.txt) $(grep -E 'ERROR SUMMARY' $OUT/sanitizer.txt | tr '\n' ' ')"
timeout 90 compute-sanitizer --tool racecheck --print-limit 3 ./s37/selftest.test -test.run 'TestRunPlanners/xattn' -test.v >> $OUT/sanitizer.txt 2>&1
t "racecheck rc $? pass $(grep -c -- '--- PASS' $OUT/sanitizer.txt) $(grep -E 'RACECHECK SUMMARY' $OUT/sanitizer.txt | tr '\n' ' ')"
