#!/bin/bash
# session 39 call F: psa_score's wgmma under NVRTC 13.0 (C7520: "serialized due to program dependence on
# compiler-inserted WG.AR in divergent path"). s39i: the warpgroup index broadcast from lane 0 (__shfl_sync), so the
# branches on its tile are warp-uniform to the compiler; s39j: that, and no branch around the wgmma (both halves
# always). Compile check (TestCompileBlockMass, *_WG=1) on both; kernel times s39e (295e052), s39i, s39j,
# alternating twice; the self-test and e2e psa causal 32K and 128K (against s39e, twice) on s39i when it compiles
# unserialized.
s=$(date +%s)
t() { echo "== $1 at $(( $(date +%s) - s ))s" | tee -a $OUT/log.txt; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/log.txt
for b in s39i s39j; do
  SPARSEATTN_COMPILE_ONLY="WG=1" timeout 120 bin/$b/cuda.test -test.run 'TestCompileBlockMass$' -test.v > $OUT/compile_$b.txt 2>&1
  t "compile $b rc $? serialized $(grep -c 'serialized' $OUT/compile_$b.txt)"
done
for r in 1 2; do for b in s39e s39i s39j; do
  echo "## $b r$r" >> $OUT/kernels.txt
  SPARSEATTN_KERNEL_BENCH=psa SPARSEATTN_PLANNER_BENCH_N=32768,131072 SPARSEATTN_PLANNER_BENCH_BLOCKK=64 timeout 60 bin/$b/cuda.test -test.run 'TestPlannerKernelTimes' -test.v >> $OUT/kernels.txt 2>&1
  t "kernel times $b rc $?"
done; done
grep -q serialized $OUT/compile_s39i.txt && exit 0
timeout 150 bin/s39i/selftest.test -test.run 'TestRunPlanners/psa' -test.v > $OUT/tests.txt 2>&1
SPARSEATTN_WIDE_PLANNERS=1 timeout 120 bin/s39i/selftest.test -test.run 'TestRunPlannersWide/psa' -test.v >> $OUT/tests.txt 2>&1
t "selftest psa rc $? pass $(grep -c -- '--- PASS' $OUT/tests.txt) fail $(grep -c -- '--- FAIL' $OUT/tests.txt)"
for r in 1 2; do for b in s39e s39i; do
  timeout 60 bin/$b/sparseattn e2e --n 32768,131072 --causal true --methods psa --sweep=false --repeat 3 --warmup 1 | sed -E "s/\"method\":\"psa\"/\"method\":\"psa-$b\"/" >> $OUT/ab.jsonl 2>> $OUT/log.txt; t "ab $b r$r rc $?"
done; done
