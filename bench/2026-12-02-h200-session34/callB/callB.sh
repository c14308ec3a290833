#!/bin/bash
# session 34 call B (main e437478: wide dense by default, ONE_TILE): device tests (gathering and S2O planners with ONE_TILE, runners wide/narrow, concurrency), then issue 12's end-to-end table 8K-32K, both causalities, every method, cuDNN in the same call
cd "$(dirname "$0")"
s=$(date +%s)
t() { echo "== $1 at $(( $(date +%s) - s ))s" | tee -a $OUT/log.txt; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/log.txt
timeout 150 ./selftest.test -test.run 'TestRunGen$|TestRunPlanners/s2o|TestRunPlanners/dense' -test.v > $OUT/tests.txt 2>&1
t "selftest rc $? pass $(grep -c -- '--- PASS' $OUT/tests.txt) fail $(grep -c -- '--- FAIL' $OUT/tests.txt)"
timeout 120 ./cuda.test -test.run 'TestRunnerWideTiles|TestRunnerMatchesHost|TestRunnerConcurrent|TestAllocPastMemory|TestRunnerFusedQKV' -test.v >> $OUT/tests.txt 2>&1
t "cuda runners rc $? pass $(grep -c -- '--- PASS' $OUT/tests.txt) fail $(grep -c -- '--- FAIL' $OUT/tests.txt)"
timeout 90 python3 gpu_e2e_peers.py --n 8192,16384,32768 --rep-ms 100 > $OUT/peers.jsonl 2>> $OUT/log.txt; t peers
for nt in 8192:60 16384:70 32768:100; do
  n=${nt%:*}; tt=${nt#*:}
  timeout $tt ./sparseattn e2e --n $n --causal both --target 0.05 --repeat 3 --warmup 1 >> $OUT/ours.jsonl 2>> $OUT/log.txt; t "e2e $n rc $?"
done
