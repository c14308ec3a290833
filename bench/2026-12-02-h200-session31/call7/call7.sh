#!/bin/bash
# usage: bin/v31/call7.sh — main at 3288c13 (psaBuf scratch refactor): psa self-test and TestPsaViews
cd "$(dirname "$0")"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/selftest.txt
timeout 150 ./selftest.test -test.run 'TestRunPlanners/psa|TestPsaViews' -test.v >> $OUT/selftest.txt 2>&1; rc=$?
echo "rc $rc PASS $(grep -c -- '--- PASS' $OUT/selftest.txt) FAIL $(grep -c -- '--- FAIL' $OUT/selftest.txt) plans $(grep -c 'rows differ' $OUT/selftest.txt) differing $(grep 'rows differ' $OUT/selftest.txt | grep -vc 'rows differ 0/')"
