#!/bin/bash
# Issue 12 chunked-prefill λ counters: the fixed CPU (selftest.test) and
# main's CPU (selftest_oldcpu.test, same new cases) in one call.
cd "$(dirname "$0")"
nproc; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
echo "== fixed CPU: TestRun, two seeds"
./selftest.test -test.run 'TestRun$' -test.v -test.count=2 > $OUT/new.txt 2>&1; echo "rc $?"
grep -E "seed|chunk|λ|--- |^ok|^FAIL" $OUT/new.txt | sed 's/selftest_test.go:20: //'
echo "== fixed CPU: auto mix λ planner cases"
./selftest.test -test.run 'TestRunPlanners/auto_mix_λ' -test.v > $OUT/planners.txt 2>&1; echo "rc $?"
grep -E "^    --- |^--- |^ok|^FAIL" $OUT/planners.txt
./selftest.test -test.run 'TestSpargeHeads' -test.v > $OUT/heads.txt 2>&1; echo "rc $?"
grep -E "^--- |^ok|^FAIL" $OUT/heads.txt
echo "== main's CPU (splits λ rows across 16 workers), same cases"
./selftest_oldcpu.test -test.run 'TestRun$' -test.v > $OUT/old.txt 2>&1; echo "rc $?"
grep -E "seed|chunk|--- |^ok|^FAIL" $OUT/old.txt | sed 's/selftest_test.go:20: //'
