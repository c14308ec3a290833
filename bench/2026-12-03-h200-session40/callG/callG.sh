#!/bin/bash
# session 40 call G (session 39's planned call G): the landed psa_score (s39k: call F's s39j with its comments and dead bounds cleaned; the same
# SASS under NVRTC 12.4). Compile check under the device's NVRTC 13.0 (every *_WG=1 planner variant unserialized),
# the psa self-test and wide cases, racecheck over the llm case, e2e psa causal 32K and 128K against 295e052 (s39e).
s=$(date +%s)
t() { echo "== $1 at $(( $(date +%s) - s ))s" | tee -a $OUT/log.txt; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/log.txt
SPARSEATTN_COMPILE_ONLY="WG=1" timeout 60 bin/s39k/cuda.test -test.run 'TestCompileBlockMass$' -test.v > $OUT/compile.txt 2>&1
t "compile rc $? serialized $(grep -c 'serialized' $OUT/compile.txt)"
timeout 150 bin/s39k/selftest.test -test.run 'TestRunPlanners/psa' -test.v > $OUT/tests.txt 2>&1
SPARSEATTN_WIDE_PLANNERS=1 timeout 120 bin/s39k/selftest.test -test.run 'TestRunPlannersWide/psa' -test.v >> $OUT/tests.txt 2>&1
t "selftest psa rc $? pass $(grep -c -- '--- PASS' $OUT/tests.txt) fail $(grep -c -- '--- FAIL' $OUT/tests.txt)"
timeout 60 compute-sanitizer --tool racecheck --print-limit 3 bin/s39k/selftest.test -test.run 'TestRunPlanners/psa/llm_workload_N=4096$' -test.v > $OUT/sanitizer.txt 2>&1
t "racecheck rc $? $(grep -E 'RACECHECK SUMMARY' $OUT/sanitizer.txt | sort | uniq -c | tr '\n' ' ')"
for r in 1 2; do for b in s39e s39k; do
  timeout 40 bin/$b/sparseattn e2e --n 32768,131072 --causal true --methods psa --sweep=false --repeat 3 --warmup 1 | sed -E "s/\"method\":\"psa\"/\"method\":\"psa-$b\"/" >> $OUT/ab.jsonl 2>> $OUT/log.txt; t "ab $b r$r rc $?"
done; done
