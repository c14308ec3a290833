#!/bin/bash
# session 39 call E: does the device's NVRTC serialize the warpgroup MMAs (ptxas C7515)? TestCompileBlockMass now
# fails on that report. s39g: the kernels of 295e052; s39h: psa_score with its accumulators pinned ahead of the
# wgmma fence. Both compiled with the device's NVRTC (every *_WG=1 planner variant, cubins kept for s39h), the
# gathering kernel's ptxas report (TestGenWSPtxas); then kernel times and e2e psa causal at 32K and 128K, s39e
# (295e052) against s39h, alternating twice, and the psa self-test on s39h.
s=$(date +%s)
t() { echo "== $1 at $(( $(date +%s) - s ))s" | tee -a $OUT/log.txt; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/log.txt
(ls -la /usr/local/cuda/lib64/libnvrtc.so* 2>&1; nvcc --version 2>&1 | tail -2; python3 -c "import torch; print('torch cuda', torch.version.cuda)") >> $OUT/log.txt 2>&1
for b in s39g s39h; do
  mkdir -p $OUT/cubin_$b
  SPARSEATTN_COMPILE_CUBIN_DIR=$OUT/cubin_$b SPARSEATTN_COMPILE_ONLY="WG=1" timeout 120 bin/$b/cuda.test -test.run 'TestCompileBlockMass$' -test.v > $OUT/compile_$b.txt 2>&1
  t "compile $b rc $? serialized $(grep -c 'serialized' $OUT/compile_$b.txt)"
done
rm -rf $OUT/cubin_s39g
SPARSEATTN_GEN_PTXAS=1 timeout 150 bin/s39h/cuda.test -test.run 'TestGenWSPtxas$' -test.v > $OUT/genptxas.txt 2>&1
t "gen ptxas rc $? serialized $(grep -c 'serialized' $OUT/genptxas.txt)"
for r in 1 2; do for b in s39e s39h; do
  echo "## $b r$r" >> $OUT/kernels.txt
  SPARSEATTN_KERNEL_BENCH=psa SPARSEATTN_PLANNER_BENCH_N=32768,131072 SPARSEATTN_PLANNER_BENCH_BLOCKK=64 timeout 60 bin/$b/cuda.test -test.run 'TestPlannerKernelTimes' -test.v >> $OUT/kernels.txt 2>&1
  t "kernel times $b rc $?"
done; done
timeout 150 bin/s39h/selftest.test -test.run 'TestRunPlanners/psa' -test.v > $OUT/tests.txt 2>&1
SPARSEATTN_WIDE_PLANNERS=1 timeout 120 bin/s39h/selftest.test -test.run 'TestRunPlannersWide/psa' -test.v >> $OUT/tests.txt 2>&1
t "selftest psa rc $? pass $(grep -c -- '--- PASS' $OUT/tests.txt) fail $(grep -c -- '--- FAIL' $OUT/tests.txt)"
for r in 1 2; do for b in s39e s39h; do
  timeout 60 bin/$b/sparseattn e2e --n 32768,131072 --causal true --methods psa --sweep=false --repeat 3 --warmup 1 | sed -E "s/\"method\":\"psa\"/\"method\":\"psa-$b\"/" >> $OUT/ab.jsonl 2>> $OUT/log.txt; t "ab $b r$r rc $?"
done; done
