#!/bin/bash
# usage: gpu_stop_bench.sh OUTDIR
# Run from a directory holding cuda.test and selftest.test (this build) and
# cuda_old.test (the build to compare against), copied next to this script
# on the GPU machine. Times the gathering kernel's S2O early-stop rows
# (TestGenBench, 16K and 32K) for both builds, alternating twice; runs the
# gathering kernel's and S2O's device self-test; and counts a few SASS
# instruction kinds in each build's compiled kernels.
set -u
cd "$(dirname "$0")"
O=$1
for r in 1 2; do
  for b in cuda cuda_old; do
    SPARSEATTN_GEN_BENCH_CACHE=/tmp/c_$b SPARSEATTN_GEN_BENCH=16384,32768 SPARSEATTN_GEN_BENCH_ONLY="s2o stop" \
      ./$b.test -test.run 'TestGenBench$' -test.v 2>&1 | grep "N=" | sed "s/^/$b r$r /" >> "$O/bench.txt"
  done
done
cat "$O/bench.txt"
./selftest.test -test.run 'TestRunGen$|TestRunPlanners/s2o' -test.v > "$O/selftest.txt" 2>&1; echo "selftest rc $?"
grep -c -- "--- PASS" "$O/selftest.txt"; grep -- "--- FAIL" "$O/selftest.txt" | head
for b in cuda cuda_old; do
  for f in /tmp/c_$b/*; do
    if cuobjdump -sass "$f" > /tmp/sass.txt 2>/dev/null; then
      echo "$b $f: $(grep -c R2UR /tmp/sass.txt) R2UR, $(grep -c ULOP3 /tmp/sass.txt) ULOP3, $(grep -c BAR.RED /tmp/sass.txt) BAR.RED, $(wc -l < /tmp/sass.txt) lines"
    fi
  done
done
