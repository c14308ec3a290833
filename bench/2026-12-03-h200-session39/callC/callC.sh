#!/bin/bash
# session 39 call C: psa_score variants against main 4dc5139 (s39a). s39e: warpgroups decoupled (each stages its own
# tile; named barriers within a work item) and descriptors as a 32-bit low word plus a constant high word;
# s39f: the descriptors alone. (Call B's s39b, with the accumulators overwritten by each pair's first wgmma, made
# ptxas wait after every wgmma: psa_score 1.134 -> 1.289 ms at 32K.) Self-test psa on s39e; kernel times
# at 32K and 128K, alternating twice; e2e psa causal at 32K and 128K, alternating twice.
s=$(date +%s)
t() { echo "== $1 at $(( $(date +%s) - s ))s" | tee -a $OUT/log.txt; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/log.txt
for b in s39e; do
  timeout 150 bin/$b/selftest.test -test.run 'TestRunPlanners/psa' -test.v > $OUT/tests_$b.txt 2>&1
  SPARSEATTN_WIDE_PLANNERS=1 timeout 120 bin/$b/selftest.test -test.run 'TestRunPlannersWide/psa' -test.v >> $OUT/tests_$b.txt 2>&1
  t "selftest $b rc $? pass $(grep -c -- '--- PASS' $OUT/tests_$b.txt) fail $(grep -c -- '--- FAIL' $OUT/tests_$b.txt)"
done
for r in 1 2; do for b in s39a s39e s39f; do
  echo "## $b r$r" >> $OUT/kernels.txt
  SPARSEATTN_KERNEL_BENCH=psa SPARSEATTN_PLANNER_BENCH_N=32768,131072 SPARSEATTN_PLANNER_BENCH_BLOCKK=64 timeout 60 bin/$b/cuda.test -test.run 'TestPlannerKernelTimes' -test.v >> $OUT/kernels.txt 2>&1
  t "kernel times $b rc $?"
done; done
for r in 1 2; do for b in s39a s39e s39f; do
  timeout 60 bin/$b/sparseattn e2e --n 32768,131072 --causal true --methods psa --sweep=false --repeat 3 --warmup 1 | sed -E "s/\"method\":\"psa\"/\"method\":\"psa-$b\"/" >> $OUT/ab.jsonl 2>> $OUT/log.txt; t "ab $b r$r rc $?"
done; done
