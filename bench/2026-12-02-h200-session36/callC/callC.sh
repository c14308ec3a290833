#!/bin/bash
# session 36 call C: the gathering kernel with the next row staged a row ahead (s36c: S2O's rows and PSA's levels;
# s36b: S2O's rows only) and drained tiles zero-filled, against d151d87 (old). Self-test TestRunGen and
# TestRunPlanners/s2o and psa on s36c, falling back to s36b where s36c fails; e2e s2o and psa causal 8K-32K at their
# defaults, old and new alternating twice; e2e 32K and 64K causal dense,s2o,psa with the sweep; racecheck and memcheck.
cd "$(dirname "$0")"
s=$(date +%s)
t() { echo "== $1 at $(( $(date +%s) - s ))s" | tee -a $OUT/log.txt; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/log.txt
new=s36c; ms=s2o,psa
timeout 110 ./s36c/selftest.test -test.run 'TestRunGen$|TestRunPlanners/(s2o|psa)' -test.v > $OUT/tests.txt 2>&1
t "selftest s36c rc $? pass $(grep -c -- '--- PASS' $OUT/tests.txt) fail $(grep -c -- '--- FAIL' $OUT/tests.txt)"
if grep -q -- "--- FAIL" $OUT/tests.txt; then
  grep -v "^=== RUN" $OUT/tests.txt | grep -E "err=[^<]|--- FAIL" | head -8 >> $OUT/log.txt
  new=s36b; ms=s2o
  timeout 90 ./s36b/selftest.test -test.run 'TestRunGen$|TestRunPlanners/s2o' -test.v > $OUT/tests_b.txt 2>&1
  t "selftest s36b rc $? pass $(grep -c -- '--- PASS' $OUT/tests_b.txt) fail $(grep -c -- '--- FAIL' $OUT/tests_b.txt)"
  if grep -q -- "--- FAIL" $OUT/tests_b.txt; then grep -v "^=== RUN" $OUT/tests_b.txt | grep -E "err=[^<]" | head -5 >> $OUT/log.txt; exit 1; fi
fi
for r in 1 2; do for b in old $new; do
  timeout 50 ./$b/sparseattn e2e --n 8192,16384,32768 --causal true --methods $ms --sweep=false --repeat 3 --warmup 1 | sed -E "s/\"method\":\"(s2o|psa)\"/\"method\":\"\1-$b\"/" >> $OUT/ab.jsonl 2>> $OUT/log.txt; t "ab $b r$r rc $?"
done; done
for nt in 32768:50 65536:90; do
  IFS=: read n tt <<< "$nt"
  timeout $tt ./$new/sparseattn e2e --n $n --causal true --methods dense,$ms --target 0.05 --repeat 3 --warmup 1 >> $OUT/ours.jsonl 2>> $OUT/log.txt; t "e2e $new $n rc $?"
done
timeout 40 python3 gpu_e2e_peers.py --n 32768,65536 --rep-ms 100 > $OUT/peers.jsonl 2>> $OUT/log.txt; t "peers rc $?"
python3 gpu_e2e_table.py $OUT > $OUT/table.md 2>> $OUT/log.txt
timeout 75 compute-sanitizer --tool racecheck --print-limit 3 ./$new/selftest.test -test.run 'TestRunGen$' -test.v > $OUT/sanitizer.txt 2>&1
t "racecheck $new rc $? pass $(grep -c -- '--- PASS' $OUT/sanitizer.txt) $(grep -E 'RACECHECK SUMMARY' $OUT/sanitizer.txt | tr '\n' ' ')"
timeout 20 compute-sanitizer --tool memcheck --print-limit 3 ./$new/selftest.test -test.run 'TestRunGen$' -test.v >> $OUT/sanitizer.txt 2>&1
t "memcheck $new rc $? pass $(grep -c -- '--- PASS' $OUT/sanitizer.txt) $(grep -E 'ERROR SUMMARY' $OUT/sanitizer.txt | tr '\n' ' ')"
