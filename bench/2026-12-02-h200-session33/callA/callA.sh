#!/bin/bash
# session 33 call A: the BlockK-128 stop cases of the gathering self-test on the device; S2O end to end at 32K/64K causal: default, fused (--s2o-no-qperm), BlockK 128
cd "$(dirname "$0")"
s=$(date +%s)
t() { echo "== $1 at $(( $(date +%s) - s ))s" | tee -a $OUT/log.txt; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/log.txt
timeout 150 ./selftest_main.test -test.run 'TestRunGen$|TestRunPlanners/s2o' -test.v > $OUT/selftest.txt 2>&1
t "selftest rc $? pass $(grep -c -- '--- PASS' $OUT/selftest.txt) fail $(grep -c -- '--- FAIL' $OUT/selftest.txt)"
python3 gpu_e2e_peers.py --n 32768,65536 --rep-ms 100 > $OUT/peers.jsonl 2>> $OUT/log.txt; t peers
for n in 32768 65536; do
  timeout 60 ./sparseattn e2e --n $n --causal true --methods dense,s2o --target 0.05 --repeat 3 --warmup 1 >> $OUT/ours.jsonl 2>> $OUT/log.txt; t "e2e $n default rc $?"
  timeout 60 ./sparseattn e2e --n $n --causal true --methods s2o --s2o-no-qperm --target 0.05 --repeat 3 --warmup 1 | sed 's/"method":"s2o"/"method":"s2o-fused"/' >> $OUT/ours.jsonl 2>> $OUT/log.txt; t "e2e $n fused rc $?"
done
timeout 60 ./sparseattn e2e --n 32768 --causal true --methods dense,s2o --block-k 128 --target 0.05 --repeat 3 --warmup 1 | sed 's/"method":"\([a-z0-9]*\)"/"method":"\1-k128"/' >> $OUT/ours.jsonl 2>> $OUT/log.txt; t "e2e 32768 k128 rc $?"
