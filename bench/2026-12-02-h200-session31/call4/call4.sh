#!/bin/bash
# usage: bin/n31/call4.sh — device checks of m31 (new: psa_score direct reads, csr_rows rework + PDL, psa_outliers16, uni_outlier16) and m31l (lvl: new + the LEVELS producer's shorter per-tile path): unit device tests, self-tests, ptxas; then planner and gen timings against main (old, c724cf6)
cd "$(dirname "$0")"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/checks.txt
s=$(date +%s)
t() { echo "== $1 rc $2 at $(( $(date +%s) - s ))s" | tee -a $OUT/checks.txt; }
timeout 60 ./driver.test -test.run 'TestLaunchDependent|TestLaunchConfigLayout' -test.v >> $OUT/checks.txt 2>&1; t driver $?
timeout 90 ./cuda_new.test -test.run 'TestPsaOutliersDevice|TestUniOutlierDevice|TestAssembleOrder|TestRunnerMatchesHost' -test.v >> $OUT/checks.txt 2>&1; t unit_new $?
SPARSEATTN_SERIAL_ASSEMBLY=1 timeout 60 ./cuda_new.test -test.run 'TestAssembleOrder' -test.v >> $OUT/checks.txt 2>&1; t assemble_serial $?
grep -E "^(=== RUN|--- FAIL|FAIL|ok|PASS)|DependentLaunch|panic" $OUT/checks.txt | grep -v "=== RUN" | tail -15
timeout 200 ./selftest_new.test -test.run 'TestRunPlanners|TestPsaViews' -test.v > $OUT/selftest_new.txt 2>&1; rc=$?
t "selftest_new PASS $(grep -c -- '--- PASS' $OUT/selftest_new.txt) FAIL $(grep -c -- '--- FAIL' $OUT/selftest_new.txt) tie $(grep -c 'tie-break [1-9]' $OUT/selftest_new.txt)" $rc
grep -B3 -A12 -- "--- FAIL" $OUT/selftest_new.txt | grep -v -- "--- PASS" | head -30
timeout 120 ./selftest_lvl.test -test.run 'TestRunGen$|TestRunPlanners/psa' -test.v > $OUT/selftest_lvl.txt 2>&1; rc=$?
t "selftest_lvl PASS $(grep -c -- '--- PASS' $OUT/selftest_lvl.txt) FAIL $(grep -c -- '--- FAIL' $OUT/selftest_lvl.txt)" $rc
grep -B3 -A12 -- "--- FAIL" $OUT/selftest_lvl.txt | grep -v -- "--- PASS" | head -30
SPARSEATTN_GEN_PTXAS=1 timeout 60 ./cuda_lvl.test -test.run 'TestGenWSPtxas' -test.v > $OUT/ptxas.txt 2>&1; t ptxas_lvl $?
grep -E "lvl|FAIL|skip" $OUT/ptxas.txt | head -8
export SPARSEATTN_GEN_BENCH_CACHE=/tmp/cubins
for b in old lvl old lvl; do
  SPARSEATTN_GEN_BENCH=16384,32768 SPARSEATTN_GEN_BENCH_ONLY=levels timeout 60 ./cuda_$b.test -test.run 'TestGenBench$' -test.v 2>&1 | grep -E "N=" | sed "s/^/$b /" >> $OUT/gen.txt
done
t gen 0; grep -E "levels" $OUT/gen.txt | sed -E 's/ +/ /g; s/bf16_d128\S+//' 
