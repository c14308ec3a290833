#!/bin/bash
# usage: bin/c32d/call4.sh — session 32 call 4: branch h-vote, the vote posted during the next S MMA: gathering and S2O self-tests, synccheck/racecheck on the stop cases, TestGenBench against main, end to end s2o at 32K causal
cd "$(dirname "$0")"
s=$(date +%s)
t() { echo "== $1 at $(( $(date +%s) - s ))s" | tee -a $OUT/log.txt; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/log.txt
export SPARSEATTN_GEN_BENCH_CACHE=/tmp/cubins
timeout 150 ./selftest_new.test -test.run 'TestRunGen$|TestRunPlanners/s2o' -test.v > $OUT/selftest.txt 2>&1; rc=$?
t "selftest rc $rc PASS $(grep -c -- '--- PASS' $OUT/selftest.txt) FAIL $(grep -c -- '--- FAIL' $OUT/selftest.txt) rows!=0 $(grep 'rows differ' $OUT/selftest.txt | grep -vc 'rows differ 0/')"
grep -E -- '--- FAIL|panic|timed out' $OUT/selftest.txt | head
[ $rc = 0 ] || { tail -30 $OUT/selftest.txt; exit 1; }
for tool in synccheck:new synccheck:old racecheck:new; do b=${tool#*:}; tool=${tool%:*}
  timeout 100 compute-sanitizer --tool $tool --print-limit 3 ./selftest_$b.test -test.run 'TestRunGen$' -test.v > $OUT/sanitizer.txt.$tool.$b 2>&1
  t "$tool $b rc $? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $OUT/sanitizer.txt.$tool.$b | sort | uniq -c | tr '\n' ' ')"
done
cat $OUT/sanitizer.txt.* > $OUT/sanitizer.txt; rm $OUT/sanitizer.txt.*
for n in 16384 32768; do for b in new old new old; do
  echo "## $b" >> $OUT/genbench_$n.txt
  SPARSEATTN_GEN_BENCH=$n SPARSEATTN_GEN_BENCH_ONLY='identity|gathered, 0.25|s2o stop|first 30|stop never' timeout 80 ./cuda_$b.test -test.run 'TestGenBench$' -test.v 2>&1 | grep -E 'N=|FAIL|panic' >> $OUT/genbench_$n.txt
  t "genbench $n $b"
done; done
python3 gpu_e2e_peers.py --n 32768 --rep-ms 100 > $OUT/e2e.jsonl 2>> $OUT/log.txt; t peers
for b in new old new; do
  timeout 60 ./sparseattn_$b e2e --n 32768 --causal true --methods dense,s2o --sweep=false --repeat 5 --warmup 1 | sed "s/^{/{\"build\":\"$b\",/" >> $OUT/e2e.jsonl 2>> $OUT/log.txt; t "e2e $b"
done
