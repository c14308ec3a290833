#!/bin/bash
# usage: bin/c32f/call6.sh — session 32 call 6: h-vote v1d (the landed stop vote): racecheck of the gathering self-test, cuDNN and end to end s2o, causal, 32K to 128K
cd "$(dirname "$0")"
s=$(date +%s)
t() { echo "== $1 at $(( $(date +%s) - s ))s" | tee -a $OUT/log.txt; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/log.txt
timeout 80 compute-sanitizer --tool racecheck --print-limit 3 ./selftest_v1d.test -test.run 'TestRunGen$' -test.v > $OUT/racecheck.txt 2>&1
t "racecheck rc $? $(grep -E 'RACECHECK SUMMARY' $OUT/racecheck.txt | tr '\n' ' ')"
python3 gpu_e2e_peers.py --n 32768,65536,131072 --rep-ms 100 > $OUT/peers.jsonl 2>> $OUT/log.txt; t peers
for n in 32768 65536 131072; do
  timeout 80 ./sparseattn_v1d e2e --n $n --causal true --methods dense,s2o --target 0.05 --repeat 3 --warmup 1 >> $OUT/ours.jsonl 2>> $OUT/log.txt; t "e2e $n rc $?"
done
