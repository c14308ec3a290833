#!/bin/bash
# session 35 call C: PSA's levels kernel at 128-slot tiles (2 stages). Self-test TestRunGen and psa planners; racecheck/memcheck;
# TestGenBench 32K levels rows, default (KT 128) against SPARSEATTN_GEN_NARROW=1 (KT 64, 4 stages), alternating twice;
# e2e dense,psa 32K causal with cuDNN in the same call.
cd "$(dirname "$0")"
s=$(date +%s)
t() { echo "== $1 at $(( $(date +%s) - s ))s" | tee -a $OUT/log.txt; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/log.txt
timeout 100 ./selftest.test -test.run 'TestRunGen$|TestRunPlanners/psa' -test.v > $OUT/tests.txt 2>&1
t "selftest rc $? pass $(grep -c -- '--- PASS' $OUT/tests.txt) fail $(grep -c -- '--- FAIL' $OUT/tests.txt)"
grep -- '--- FAIL' $OUT/tests.txt | head -20 >> $OUT/log.txt
timeout 70 compute-sanitizer --tool racecheck --print-limit 3 ./selftest.test -test.run 'TestRunGen$' -test.v > $OUT/sanitizer.txt 2>&1
t "racecheck rc $? pass $(grep -c -- '--- PASS' $OUT/sanitizer.txt) $(grep -E 'RACECHECK SUMMARY' $OUT/sanitizer.txt | tr '\n' ' ')"
timeout 30 compute-sanitizer --tool memcheck --print-limit 3 ./selftest.test -test.run 'TestRunGen$' -test.v >> $OUT/sanitizer.txt 2>&1
t "memcheck rc $? pass $(grep -c -- '--- PASS' $OUT/sanitizer.txt) $(grep -E 'ERROR SUMMARY' $OUT/sanitizer.txt | tr '\n' ' ')"
export SPARSEATTN_GEN_BENCH_CACHE=/tmp/gb
for r in 1 2; do for nar in 0 1; do
  SPARSEATTN_GEN_NARROW=$nar SPARSEATTN_GEN_BENCH=32768 SPARSEATTN_GEN_BENCH_ONLY='levels' timeout 45 ./cuda.test -test.run 'TestGenBench$' -test.v 2>&1 | grep -E 'N=|FAIL|panic' | sed "s|.*gen_bench_test.go:[0-9]*: |narrow=$nar r$r |" >> $OUT/genbench.txt
done; done; t genbench
timeout 20 python3 gpu_e2e_peers.py --n 32768 --rep-ms 100 > $OUT/peers.jsonl 2>> $OUT/log.txt; t "peers rc $?"
timeout 35 ./sparseattn e2e --n 32768 --causal true --methods dense,psa --target 0.05 --repeat 3 --warmup 1 >> $OUT/ours.jsonl 2>> $OUT/log.txt; t "e2e 32K rc $?"
python3 gpu_e2e_table.py $OUT > $OUT/table.md 2>> $OUT/log.txt
