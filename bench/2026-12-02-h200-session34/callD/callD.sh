#!/bin/bash
# session 34 call D: the gathering kernel's 128-key tiles (KT 128) on the device: TestRunGen (new BlockK 128/256 cases) and the S2O planner cases, racecheck and memcheck of TestRunGen; S2O end to end at 128-key blocks against 64 (causal 32K, 64K, 128K), cuDNN in the same call
cd "$(dirname "$0")"
s=$(date +%s)
t() { echo "== $1 at $(( $(date +%s) - s ))s" | tee -a $OUT/log.txt; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/log.txt
timeout 100 ./selftest.test -test.run 'TestRunGen$|TestRunPlanners/s2o' -test.v > $OUT/tests.txt 2>&1
t "selftest rc $? pass $(grep -c -- '--- PASS' $OUT/tests.txt) fail $(grep -c -- '--- FAIL' $OUT/tests.txt)"
timeout 80 compute-sanitizer --tool racecheck --print-limit 3 ./selftest.test -test.run 'TestRunGen$' -test.v > $OUT/sanitizer.txt 2>&1
t "racecheck rc $? pass $(grep -c -- '--- PASS' $OUT/sanitizer.txt) $(grep -E 'RACECHECK SUMMARY' $OUT/sanitizer.txt | tr '\n' ' ')"
timeout 80 compute-sanitizer --tool memcheck --print-limit 3 ./selftest.test -test.run 'TestRunGen$' -test.v >> $OUT/sanitizer.txt 2>&1
t "memcheck rc $? pass $(grep -c -- '--- PASS' $OUT/sanitizer.txt) $(grep -E 'ERROR SUMMARY' $OUT/sanitizer.txt | tr '\n' ' ')"
timeout 60 python3 gpu_e2e_peers.py --n 32768,65536,131072 --rep-ms 100 > $OUT/peers.jsonl 2>> $OUT/log.txt; t peers
for nt in 32768:40 65536:60 131072:110; do
  IFS=: read n tt <<< "$nt"
  timeout $tt ./sparseattn e2e --n $n --causal true --methods dense,s2o --block-k 128 --target 0.05 --repeat 3 --warmup 1 | sed 's/"method":"s2o"/"method":"s2o-k128"/' >> $OUT/ours.jsonl 2>> $OUT/log.txt; t "e2e k128 $n rc $?"
done
timeout 40 ./sparseattn e2e --n 32768 --causal true --methods s2o --target 0.05 --repeat 3 --warmup 1 >> $OUT/ours.jsonl 2>> $OUT/log.txt; t "e2e k64 32K rc $?"
