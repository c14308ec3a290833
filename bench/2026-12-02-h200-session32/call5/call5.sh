#!/bin/bash
# usage: bin/c32e/call5.sh — session 32 call 5: h-vote v1 (cuda_new, sparseattn_new) against v1d (one quad sum) and main (cuda_old): v1d self-test, TestGenBench alternating, cuDNN and end to end s2o (causal, 8K to 128K) with v1
cd "$(dirname "$0")"
s=$(date +%s)
t() { echo "== $1 at $(( $(date +%s) - s ))s" | tee -a $OUT/log.txt; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/log.txt
export SPARSEATTN_GEN_BENCH_CACHE=/tmp/cubins
timeout 100 ./selftest_v1d.test -test.run 'TestRunGen$|TestRunPlanners/s2o' -test.v > $OUT/selftest_v1d.txt 2>&1; rc=$?
t "selftest v1d rc $rc PASS $(grep -c -- '--- PASS' $OUT/selftest_v1d.txt) FAIL $(grep -c -- '--- FAIL' $OUT/selftest_v1d.txt) rows!=0 $(grep 'rows differ' $OUT/selftest_v1d.txt | grep -vc 'rows differ 0/')"
for n in 16384 32768; do for b in new v1d old new v1d old; do
  echo "## $b" >> $OUT/genbench.txt
  SPARSEATTN_GEN_BENCH=$n SPARSEATTN_GEN_BENCH_ONLY='identity|gathered, 0.25|s2o stop|first 30|stop never' timeout 60 ./cuda_$b.test -test.run 'TestGenBench$' -test.v 2>&1 | grep -E 'N=|FAIL|panic' >> $OUT/genbench.txt
done; t "genbench $n"; done
python3 gpu_e2e_peers.py --n 8192,16384,32768,65536,131072 --rep-ms 100 > $OUT/peers.jsonl 2>> $OUT/log.txt; t peers
for n in 8192 16384 32768 65536 131072; do
  timeout 100 ./sparseattn_new e2e --n $n --causal true --methods dense,s2o --target 0.05 --repeat 3 --warmup 1 >> $OUT/ours.jsonl 2>> $OUT/log.txt; t "e2e $n rc $?"
done
