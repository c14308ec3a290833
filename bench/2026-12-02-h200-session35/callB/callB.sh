#!/bin/bash
# session 35 call B: racecheck and memcheck over TestRunGen on the split-barrier kernel (01e65f5);
# e2e causal 32K-128K: dense and s2o at 128-key blocks, s2o at its 64-key default, cuDNN in the same call.
cd "$(dirname "$0")"
s=$(date +%s)
t() { echo "== $1 at $(( $(date +%s) - s ))s" | tee -a $OUT/log.txt; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/log.txt
timeout 80 compute-sanitizer --tool racecheck --print-limit 3 ./selftest.test -test.run 'TestRunGen$' -test.v > $OUT/sanitizer.txt 2>&1
t "racecheck rc $? pass $(grep -c -- '--- PASS' $OUT/sanitizer.txt) $(grep -E 'RACECHECK SUMMARY' $OUT/sanitizer.txt | tr '\n' ' ')"
timeout 80 compute-sanitizer --tool memcheck --print-limit 3 ./selftest.test -test.run 'TestRunGen$' -test.v >> $OUT/sanitizer.txt 2>&1
t "memcheck rc $? pass $(grep -c -- '--- PASS' $OUT/sanitizer.txt) $(grep -E 'ERROR SUMMARY' $OUT/sanitizer.txt | tr '\n' ' ')"
timeout 60 python3 gpu_e2e_peers.py --n 32768,65536,131072 --rep-ms 100 > $OUT/peers.jsonl 2>> $OUT/log.txt; t "peers rc $?"
for nt in 32768:40 65536:60 131072:110; do
  IFS=: read n tt <<< "$nt"
  timeout $tt ./sparseattn e2e --n $n --causal true --methods dense,s2o --block-k 128 --target 0.05 --repeat 3 --warmup 1 | sed 's/"method":"s2o"/"method":"s2o-k128"/' >> $OUT/ours.jsonl 2>> $OUT/log.txt; t "e2e k128 $n rc $?"
done
for nt in 32768:40 65536:60; do
  IFS=: read n tt <<< "$nt"
  timeout $tt ./sparseattn e2e --n $n --causal true --methods s2o --target 0.05 --repeat 3 --warmup 1 >> $OUT/ours.jsonl 2>> $OUT/log.txt; t "e2e k64 $n rc $?"
done
python3 gpu_e2e_table.py $OUT > $OUT/table.md 2>> $OUT/log.txt
