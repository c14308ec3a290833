#!/bin/bash
# session 36 call A (d151d87): self-test TestRunGen plus TestRunPlanners/s2o and psa on the copy_rows refactor;
# issue 12's full end-to-end table, 8K-64K both causalities and 128K causal, cuDNN in the same call; racecheck and memcheck last.
cd "$(dirname "$0")"
s=$(date +%s)
t() { echo "== $1 at $(( $(date +%s) - s ))s" | tee -a $OUT/log.txt; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/log.txt
timeout 120 ./selftest.test -test.run 'TestRunGen$|TestRunPlanners/(s2o|psa)' -test.v > $OUT/tests.txt 2>&1
t "selftest rc $? pass $(grep -c -- '--- PASS' $OUT/tests.txt) fail $(grep -c -- '--- FAIL' $OUT/tests.txt)"
grep -- '--- FAIL' $OUT/tests.txt | head -20 >> $OUT/log.txt
timeout 60 python3 gpu_e2e_peers.py --n 8192,16384,32768,65536,131072 --rep-ms 100 > $OUT/peers.jsonl 2>> $OUT/log.txt; t "peers rc $?"
for nt in 8192:40:both 16384:40:both 32768:60:both 65536:110:both 131072:110:true; do
  IFS=: read n tt c <<< "$nt"
  timeout $tt ./sparseattn e2e --n $n --causal $c --target 0.05 --repeat 3 --warmup 1 >> $OUT/ours.jsonl 2>> $OUT/log.txt; t "e2e $n rc $?"
done
python3 gpu_e2e_table.py $OUT > $OUT/table.md 2>> $OUT/log.txt
timeout 45 compute-sanitizer --tool racecheck --print-limit 3 ./selftest.test -test.run 'TestRunGen$' -test.v > $OUT/sanitizer.txt 2>&1
t "racecheck rc $? pass $(grep -c -- '--- PASS' $OUT/sanitizer.txt) $(grep -E 'RACECHECK SUMMARY' $OUT/sanitizer.txt | tr '\n' ' ')"
timeout 15 compute-sanitizer --tool memcheck --print-limit 3 ./selftest.test -test.run 'TestRunGen$' -test.v >> $OUT/sanitizer.txt 2>&1
t "memcheck rc $? pass $(grep -c -- '--- PASS' $OUT/sanitizer.txt) $(grep -E 'ERROR SUMMARY' $OUT/sanitizer.txt | tr '\n' ' ')"
