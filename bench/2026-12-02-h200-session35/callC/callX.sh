#!/bin/bash
# session 35: xattn bm_mass 3 stages (nst3, 773523c) and L2 prefetch (pf, e4b0fbf) against base (562d62c), branch h-xattn.
# Self-test of plan equality (xattn, unisparse) on the pf build; planner A/B at 32K causal, 128x128 blocks.
cd "$(dirname "$0")"
s=$(date +%s)
t() { echo "== $1 at $(( $(date +%s) - s ))s" | tee -a $OUT/xa_log.txt; }
timeout 80 ./selftest.test -test.run 'TestRunPlanners/(xattn|unisparse)' -test.v > $OUT/xa_tests.txt 2>&1
t "xa selftest rc $? pass $(grep -c -- '--- PASS' $OUT/xa_tests.txt) fail $(grep -c -- '--- FAIL' $OUT/xa_tests.txt) differ $(grep -c 'rows differ' $OUT/xa_tests.txt)"
SPARSEATTN_PLANNER_BENCH_BLOCKK=128 timeout 110 ./gpu_planner_ab.sh $OUT/xa_ab128 xattn 32768 ./base.test ./nst3.test ./pf.test > /dev/null 2>&1; t "xa ab128 rc $?"
