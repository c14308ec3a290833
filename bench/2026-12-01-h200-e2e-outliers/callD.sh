#!/bin/bash
# usage: bin/d28/callD.sh — the unisparse self-test on the 32x2 split build (b), then issue 12's e2e table (every method at its default and sparsest setting within rel-L1 0.05, causal and not, 8K-128K) with build b if it passed, else a; cuDNN peers ran in callC
cd "$(dirname "$0")"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/device.txt
s=$(date +%s)
timeout 60 ./selftest_b.test -test.run 'TestRunPlanners/(unisparse|auto)' -test.v > $OUT/selftest_b.txt 2>&1; rc=$?
SPARSEATTN_WIDE_PLANNERS=1 timeout 20 ./selftest_b.test -test.run 'TestRunPlannersWide/unisparse' -test.v >> $OUT/selftest_b.txt 2>&1; rc2=$?
echo "selftest_b rc $rc $rc2 PASS $(grep -c -- '--- PASS' $OUT/selftest_b.txt) FAIL $(grep -c -- '--- FAIL' $OUT/selftest_b.txt) at $(( $(date +%s) - s ))s"
bin=./sparseattn_a; if [ $rc = 0 ] && [ $rc2 = 0 ]; then bin=./sparseattn_b; fi; echo "e2e with $bin" | tee $OUT/bin.txt
for nt in 8192:40 16384:50 32768:70 65536:110 131072:300; do
  n=${nt%:*}; t=${nt#*:}
  timeout $t $bin e2e --n $n --causal both --target 0.05 --repeat 3 --warmup 1 > $OUT/ours_$n.jsonl 2> $OUT/err_$n.txt
  echo "N=$n rc $? rows $(wc -l < $OUT/ours_$n.jsonl) at $(( $(date +%s) - s ))s"
done
cat $OUT/ours_*.jsonl > $OUT/ours.jsonl; rm $OUT/ours_*.jsonl
tail -n 3 $OUT/err_*.txt | head -30
