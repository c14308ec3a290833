#!/bin/bash
# session 38 call C: the landed psa_assign (70c896b, bin/s38e) under the self-test: TestRunPlanners/psa and the wide
# psa cases, the new causal one (rows of 1-256 blocks) included. Run from the repository root with bin/s38e carried:
#   CGO_ENABLED=0 go test -c -ldflags='-s -w' -o bin/s38e/selftest.test ./cuda/selftest
timeout 100 bin/s38e/selftest.test -test.run 'TestRunPlanners/psa' -test.v > $OUT/tests.txt 2>&1
echo "psa rc $? pass $(grep -c -- '--- PASS' $OUT/tests.txt) fail $(grep -c -- '--- FAIL' $OUT/tests.txt)"
SPARSEATTN_WIDE_PLANNERS=1 timeout 60 bin/s38e/selftest.test -test.run 'TestRunPlannersWide/psa' -test.v >> $OUT/tests.txt 2>&1
echo "wide rc $? pass $(grep -c -- '--- PASS' $OUT/tests.txt) fail $(grep -c -- '--- FAIL' $OUT/tests.txt)"
