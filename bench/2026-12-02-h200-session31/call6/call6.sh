#!/bin/bash
# usage: bin/f31/call6.sh — main at 4437146 (csr_rows plain by default): psa with psa_score's direct reads (direct) against the same build with psaDirect off (gath), alternating; TestAssembleOrder; end to end (cuDNN first) at 8K (sparge) and 32K (sparge, unisparse, psa) causal
cd "$(dirname "$0")"
s=$(date +%s)
t() { echo "== $1 at $(( $(date +%s) - s ))s" | tee -a $OUT/log.txt; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/log.txt
timeout 150 ./gpu_planner_ab.sh /tmp/ab psa,sparge 8192,32768 ./cuda_gath.test ./cuda_direct.test > /dev/null 2>&1
cp /tmp/ab/kernels.txt $OUT/ab_kernels.txt; cp /tmp/ab/plannertimes.txt $OUT/ab_plans.txt; t ab
grep -E "psa|sparge" $OUT/ab_plans.txt | sed -E 's/ +/ /g'
timeout 60 ./cuda_direct.test -test.run 'TestAssembleOrder' -test.v 2>&1 | grep -E "^(--- |ok|FAIL|PASS)" | tee -a $OUT/log.txt; t assemble
python3 gpu_e2e_peers.py --n 8192,32768 --rep-ms 100 > $OUT/peers.jsonl 2>> $OUT/log.txt; t peers
timeout 90 ./sparseattn e2e --n 8192 --causal true --methods dense,sparge --target 0.05 --repeat 5 --warmup 1 > $OUT/ours_8192.jsonl 2>> $OUT/log.txt; t e2e8k
timeout 150 ./sparseattn e2e --n 32768 --causal true --methods dense,sparge,unisparse,psa --target 0.05 --repeat 5 --warmup 1 > $OUT/ours_32768.jsonl 2>> $OUT/log.txt; t e2e32k
