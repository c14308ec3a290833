#!/bin/bash
# usage: bin/fin/run.sh — the full device self-test and the new assembly/pool tests on the landed build
cd "$(dirname "$0")"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
./cuda.test -test.run 'TestAssembleOrder|TestSpargePoolMeans|TestRunnerConcurrent|TestRunnerMatchesHost' -test.v 2>&1 | grep -E "^(---|ok|FAIL|PASS)|rows," | tee $OUT/cudatests.txt
timeout 420 ./selftest.test -test.v > $OUT/selftest.txt 2>&1; echo "selftest rc $?"
echo "PASS lines: $(grep -c -- '--- PASS' $OUT/selftest.txt)  FAIL lines: $(grep -c -- '--- FAIL' $OUT/selftest.txt)"
grep -E "rows differ [1-9]" $OUT/selftest.txt | head -5; tail -2 $OUT/selftest.txt
