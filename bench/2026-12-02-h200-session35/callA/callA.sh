#!/bin/bash
# session 35 call A: split K/V barriers in the gathering kernel. Self-test (TestRunGen, s2o, psa) on the new kernel;
# TestGenBench A/B at 32K: new kernel vs the old (kd_old) at 128-key blocks, and 64-key tiles (GEN_NARROW) on the new kernel; and at 64-key blocks new vs old.
cd "$(dirname "$0")"
s=$(date +%s)
t() { echo "== $1 at $(( $(date +%s) - s ))s" | tee -a $OUT/log.txt; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/log.txt
timeout 150 ./selftest.test -test.run 'TestRunGen$|TestRunPlanners/(s2o|psa)' -test.v > $OUT/tests.txt 2>&1
t "selftest rc $? pass $(grep -c -- '--- PASS' $OUT/tests.txt) fail $(grep -c -- '--- FAIL' $OUT/tests.txt)"
grep -- '--- FAIL' $OUT/tests.txt | head -20 >> $OUT/log.txt
R='identity|gathered, 0.25|s2o stop|stop never'
SPARSEATTN_GEN_BENCH_BLOCKK=128 ./gpu_gen_ab.sh $OUT/ab128 32768 "$R" ./cuda.test ./cuda.test@$PWD/kd_old > /dev/null 2>&1; t "ab128"
SPARSEATTN_GEN_NARROW=1 SPARSEATTN_GEN_BENCH_BLOCKK=128 ./gpu_gen_ab.sh $OUT/ab128n 32768 "$R" ./cuda.test ./cuda.test@$PWD/kd_old > /dev/null 2>&1; t "ab128 narrow"
./gpu_gen_ab.sh $OUT/ab64 32768 "$R" ./cuda.test ./cuda.test@$PWD/kd_old > /dev/null 2>&1; t "ab64"
