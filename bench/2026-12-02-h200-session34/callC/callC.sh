#!/bin/bash
# session 34 call C: the self-test's dense planner rows and the fused-QKV runner test after their fix; issue 12's end-to-end table at 64K and 128K (every method, causal; non-causal 64K), cuDNN in the same call; then the block-sparse methods at 128-key blocks (--block-k 128) at 32K causal
cd "$(dirname "$0")"
s=$(date +%s)
t() { echo "== $1 at $(( $(date +%s) - s ))s" | tee -a $OUT/log.txt; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/log.txt
timeout 60 ./selftest.test -test.run 'TestRunPlanners/dense' -test.v > $OUT/tests.txt 2>&1
t "selftest dense rc $? pass $(grep -c -- '--- PASS' $OUT/tests.txt) fail $(grep -c -- '--- FAIL' $OUT/tests.txt)"
timeout 60 ./cuda.test -test.run 'TestRunnerFusedQKV|TestRunnerMatchesHost' -test.v >> $OUT/tests.txt 2>&1
t "cuda rc $? pass $(grep -c -- '--- PASS' $OUT/tests.txt) fail $(grep -c -- '--- FAIL' $OUT/tests.txt)"
timeout 90 python3 gpu_e2e_peers.py --n 32768,65536,131072 --rep-ms 100 > $OUT/peers.jsonl 2>> $OUT/log.txt; t peers
timeout 110 ./sparseattn e2e --n 65536 --causal both --target 0.05 --repeat 3 --warmup 1 >> $OUT/ours.jsonl 2>> $OUT/log.txt; t "e2e 64K rc $?"
timeout 190 ./sparseattn e2e --n 131072 --causal true --target 0.05 --repeat 3 --warmup 1 >> $OUT/ours.jsonl 2>> $OUT/log.txt; t "e2e 128K rc $?"
for n in 32768; do
  timeout 80 ./sparseattn e2e --n $n --causal true --block-k 128 --methods dense,sparge,unisparse,xattn,flexprefill,minference,window --target 0.05 --repeat 3 --warmup 1 > $OUT/k128_$n.jsonl 2>> $OUT/log.txt; t "e2e k128 $n rc $?"
done
cat $OUT/k128_*.jsonl > $OUT/ours_k128.jsonl; rm $OUT/k128_*.jsonl
