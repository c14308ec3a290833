#!/bin/bash
# usage: bin/c32a/call1.sh — session 32 call 1: branch h-sr32 (sparge_rows_search SEARCH_FAST) self-tests and plan times against main; S2O stop ablations in TestGenBench (main)
cd "$(dirname "$0")"
s=$(date +%s)
t() { echo "== $1 at $(( $(date +%s) - s ))s" | tee -a $OUT/log.txt; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/log.txt
export SPARSEATTN_GEN_BENCH_CACHE=/tmp/cubins
timeout 170 ./selftest_new.test -test.run 'TestRunPlanners/sparge|TestSpargeHeads|TestSpargeTiesAndWideRows|TestRunPlannersWide' -test.v > $OUT/selftest.txt 2>&1; rc=$?
t "selftest rc $rc PASS $(grep -c -- '--- PASS' $OUT/selftest.txt) FAIL $(grep -c -- '--- FAIL' $OUT/selftest.txt) rows!=0 $(grep 'rows differ' $OUT/selftest.txt | grep -vc 'rows differ 0/')"
timeout 60 ./cuda_new.test -test.run 'TestSpargeRowsLayouts|TestSpargePoolMeans' -test.v > $OUT/cuda_sparge.txt 2>&1; rc=$?
t "cuda sparge rc $rc PASS $(grep -c -- '--- PASS' $OUT/cuda_sparge.txt) FAIL $(grep -c -- '--- FAIL' $OUT/cuda_sparge.txt)"
for r in a b; do for b in new old; do
  echo "## $b $r" >> $OUT/sparge_times.txt
  SPARSEATTN_SPARGE_BENCH=1 SPARSEATTN_SPARGE_BENCH_WORKLOAD=llm SPARSEATTN_SPARGE_BENCH_N=8192 timeout 60 ./cuda_$b.test -test.run 'TestSpargePlanTimes$' -test.v >> $OUT/sparge_times.txt 2>&1
done; done; t sparge_times
python3 gpu_e2e_peers.py --n 8192 --rep-ms 100 > $OUT/peers.jsonl 2>> $OUT/log.txt; t peers
for r in a b; do for b in new old; do
  timeout 60 ./sparseattn_$b e2e --n 8192 --causal true --methods dense,sparge --sweep=false --repeat 7 --warmup 2 > $OUT/e2e_${b}_$r.jsonl 2>> $OUT/log.txt
done; done; t e2e
for n in 16384 32768; do
  SPARSEATTN_GEN_BENCH=$n SPARSEATTN_GEN_BENCH_ONLY='identity|gathered, 0.25|s2o stop|first 30|stop never' timeout 150 ./cuda_old.test -test.run 'TestGenBench$' -test.v > $OUT/genbench_$n.txt 2>&1
  t "genbench $n rc $?"
done
grep -E 'N=' $OUT/genbench_*.txt | sed -E 's/ +/ /g'
