#!/bin/bash
# usage: bin/e31/call5.sh — main at 15d53d2 (new) against c724cf6 (old): planner kernel and whole-plan times alternating (psa, unisparse, sparge at 8K and 32K), whole plans with csr_rows launched serially, the psa-views and auto self-tests, and end to end (cuDNN first) at 8K and 32K causal for sparge, psa and unisparse
cd "$(dirname "$0")"
s=$(date +%s)
t() { echo "== $1 at $(( $(date +%s) - s ))s" | tee -a $OUT/log.txt; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/log.txt
timeout 200 ./gpu_planner_ab.sh /tmp/ab psa,unisparse,sparge 8192,32768 ./cuda_old.test ./cuda_new.test > /dev/null 2>&1
cp /tmp/ab/kernels.txt $OUT/ab_kernels.txt; cp /tmp/ab/plannertimes.txt $OUT/ab_plans.txt; t ab
SPARSEATTN_SERIAL_ASSEMBLY=1 SPARSEATTN_PLANNER_BENCH=psa,unisparse,sparge SPARSEATTN_PLANNER_BENCH_N=8192,32768 timeout 60 ./cuda_new.test -test.run 'TestPlannerTimes$' -test.v 2>&1 | grep -E "%" | sed 's|.*go:[0-9]*: |serial |' >> $OUT/ab_plans.txt; t serial
grep -E "psa|unisparse|sparge" $OUT/ab_plans.txt | sed -E 's/ +/ /g' | head -30
timeout 100 ./selftest_new.test -test.run 'TestPsaViews|TestRunPlanners/auto' -test.v > $OUT/selftest.txt 2>&1; rc=$?
t "selftest rc $rc PASS $(grep -c -- '--- PASS' $OUT/selftest.txt) FAIL $(grep -c -- '--- FAIL' $OUT/selftest.txt) rows!=0 $(grep 'rows differ' $OUT/selftest.txt | grep -vc 'rows differ 0/')"
python3 gpu_e2e_peers.py --n 8192,32768 --rep-ms 100 > $OUT/peers.jsonl 2>> $OUT/log.txt; t peers
timeout 90 ./sparseattn e2e --n 8192 --causal true --methods dense,sparge --target 0.05 --repeat 5 --warmup 1 > $OUT/ours_8192.jsonl 2>> $OUT/log.txt; t e2e8k
timeout 150 ./sparseattn e2e --n 32768 --causal true --methods dense,sparge,unisparse,psa --target 0.05 --repeat 5 --warmup 1 > $OUT/ours_32768.jsonl 2>> $OUT/log.txt; t e2e32k
