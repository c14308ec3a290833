#!/bin/bash
# session 37 call B: psa_score on warpgroup MMA (PSA_WG; s37p, branch h-psawg 7013655) against 6cc3a07 (s37b: bm_mass on
# wgmma, psa_score on mma.sync). Self-test TestRunPlanners for psa, xattn and auto on s37p (stops on a failure); psa's
# kernel times at 32K and 128K (TestPlannerKernelTimes, pseudo-random inputs); e2e psa 8K-64K both causalities and 128K
# causal at its defaults, s37b then s37p; psa at 128-key blocks (8K-32K causal); then issue 12's full end-to-end table
# on s37p with cuDNN in the same call; memcheck over TestRunPlanners/psa last.
cd "$(dirname "$0")"
s=$(date +%s)
t() { echo "== $1 at $(( $(date +%s) - s ))s" | tee -a $OUT/log.txt; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/log.txt
timeout 200 ./s37p/selftest.test -test.run 'TestRunPlanners/(psa|xattn|auto)' -test.v > $OUT/tests.txt 2>&1
t "selftest s37p rc $? pass $(grep -c -- '--- PASS' $OUT/tests.txt) fail $(grep -c -- '--- FAIL' $OUT/tests.txt)"
if grep -q -- "--- FAIL" $OUT/tests.txt; then grep -v "^=== RUN" $OUT/tests.txt | grep -E "FAIL|rror|differ" | head -12 >> $OUT/log.txt; exit 1; fi
SPARSEATTN_KERNEL_BENCH=psa SPARSEATTN_PLANNER_BENCH_N=32768,131072 SPARSEATTN_PLANNER_BENCH_BLOCKK=64 timeout 60 ./s37p/cuda.test -test.run 'TestPlannerKernelTimes' -test.v > $OUT/kernels.txt 2>&1
t "kernel times rc $?"
for b in s37b s37p; do
  timeout 60 ./$b/sparseattn e2e --n 8192,16384,32768,65536 --causal both --methods psa --sweep=false --repeat 3 --warmup 1 | sed -E "s/\"method\":\"psa\"/\"method\":\"psa-$b\"/" >> $OUT/ab.jsonl 2>> $OUT/log.txt; t "ab $b rc $?"
  timeout 40 ./$b/sparseattn e2e --n 131072 --causal true --methods psa --sweep=false --repeat 3 --warmup 1 | sed -E "s/\"method\":\"psa\"/\"method\":\"psa-$b\"/" >> $OUT/ab.jsonl 2>> $OUT/log.txt; t "ab128 $b rc $?"
done
timeout 40 ./s37p/sparseattn e2e --n 8192,16384,32768 --causal true --methods psa --block-k 128 --sweep=false --repeat 3 --warmup 1 | sed -E "s/\"method\":\"psa\"/\"method\":\"psa-k128\"/" >> $OUT/ab.jsonl 2>> $OUT/log.txt; t "psa block-k 128 rc $?"
timeout 60 python3 gpu_e2e_peers.py --n 8192,16384,32768,65536,131072 --rep-ms 100 > $OUT/peers.jsonl 2>> $OUT/log.txt; t "peers rc $?"
for nt in 8192:40:both 16384:40:both 32768:60:both 65536:110:both 131072:110:true; do
  IFS=: read n tt c <<< "$nt"
  timeout $tt ./s37p/sparseattn e2e --n $n --causal $c --target 0.05 --repeat 3 --warmup 1 >> $OUT/ours.jsonl 2>> $OUT/log.txt; t "e2e $n rc $?"
done
python3 gpu_e2e_table.py $OUT > $OUT/table.md 2>> $OUT/log.txt
timeout 40 compute-sanitizer --tool memcheck --print-limit 3 ./s37p/selftest.test -test.run 'TestRunPlanners/psa' -test.v > $OUT/sanitizer.txt 2>&1
t "memcheck rc $? pass $(grep -c -- '--- PASS' $OUT/sanitizer.txt) $(grep -E 'ERROR SUMMARY' $OUT/sanitizer.txt | tr '\n' ' ')"
