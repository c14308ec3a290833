#!/bin/bash
# session 36 call D: only the zero-filled drain (V copies issued past an S2O stop copy nothing; s36z) against d151d87 (old).
# Self-test TestRunGen and TestRunPlanners/s2o on s36z (stops there on a failure); e2e s2o causal 8K-32K at its default,
# old and s36z alternating three times; racecheck over TestRunGen.
cd "$(dirname "$0")"
s=$(date +%s)
t() { echo "== $1 at $(( $(date +%s) - s ))s" | tee -a $OUT/log.txt; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/log.txt
timeout 90 ./s36z/selftest.test -test.run 'TestRunGen$|TestRunPlanners/s2o' -test.v > $OUT/tests.txt 2>&1
t "selftest s36z rc $? pass $(grep -c -- '--- PASS' $OUT/tests.txt) fail $(grep -c -- '--- FAIL' $OUT/tests.txt)"
if grep -q -- "--- FAIL" $OUT/tests.txt; then grep -v "^=== RUN" $OUT/tests.txt | grep -E "err=[^<]|--- FAIL" | head -8 >> $OUT/log.txt; exit 1; fi
for r in 1 2 3; do for b in old s36z; do
  timeout 40 ./$b/sparseattn e2e --n 8192,16384,32768 --causal true --methods s2o --sweep=false --repeat 3 --warmup 1 | sed -E "s/\"method\":\"s2o\"/\"method\":\"s2o-$b\"/" >> $OUT/ab.jsonl 2>> $OUT/log.txt; t "ab $b r$r rc $?"
done; done
timeout 70 compute-sanitizer --tool racecheck --print-limit 3 ./s36z/selftest.test -test.run 'TestRunGen$' -test.v > $OUT/sanitizer.txt 2>&1
t "racecheck s36z rc $? pass $(grep -c -- '--- PASS' $OUT/sanitizer.txt) $(grep -E 'RACECHECK SUMMARY' $OUT/sanitizer.txt | tr '\n' ' ')"
