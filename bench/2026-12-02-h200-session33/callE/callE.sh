#!/bin/bash
# session 33 call E: main with the vote in the MMA shadow, fused S2O default, PSA entries by level and the τ 0.003 sweep point: racecheck of the gathering self-test; end to end causal 64K/128K (s2o, psa) and non-causal 32K/64K (dense, s2o, psa) with cuDNN
cd "$(dirname "$0")"
s=$(date +%s)
t() { echo "== $1 at $(( $(date +%s) - s ))s" | tee -a $OUT/log.txt; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/log.txt
timeout 90 compute-sanitizer --tool racecheck --print-limit 3 ./selftest.test -test.run 'TestRunGen$' -test.v > $OUT/racecheck.txt 2>&1
t "racecheck rc $? pass $(grep -c -- '--- PASS' $OUT/racecheck.txt) $(grep -E 'RACECHECK SUMMARY' $OUT/racecheck.txt | tr '\n' ' ')"
python3 gpu_e2e_peers.py --n 32768,65536,131072 --rep-ms 100 > $OUT/peers.jsonl 2>> $OUT/log.txt; t peers
for n in 65536 131072; do
  timeout 100 ./sparseattn e2e --n $n --causal true --methods dense,s2o,psa --target 0.05 --repeat 3 --warmup 1 >> $OUT/ours.jsonl 2>> $OUT/log.txt; t "e2e causal $n rc $?"
done
for n in 32768 65536; do
  timeout 100 ./sparseattn e2e --n $n --causal false --methods dense,s2o,psa --target 0.05 --repeat 3 --warmup 1 >> $OUT/ours.jsonl 2>> $OUT/log.txt; t "e2e non-causal $n rc $?"
done
