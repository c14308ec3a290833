#!/bin/bash
# usage: bin/g31/call2.sh — the gathering kernel's K/V slots (GenStages 2, 3, 4) on S2O stop plans and gathers (TestGenBench) and on S2O end to end at 32K causal; BenchmarkPlanCold at 8K (main at the commit of this build)
cd "$(dirname "$0")"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/gen.txt
s=$(date +%s)
export SPARSEATTN_GEN_BENCH_CACHE=/tmp/cubins
for st in 4 2 3 4 2; do
  echo "== stages $st" >> $OUT/gen.txt
  SPARSEATTN_GEN_STAGES=$st SPARSEATTN_GEN_BENCH=16384,32768 SPARSEATTN_GEN_BENCH_ONLY=" " timeout 120 ./cuda.test -test.run 'TestGenBench$' -test.v 2>&1 | grep -E "N=|FAIL|ok|panic" >> $OUT/gen.txt
  echo "stages $st at $(( $(date +%s) - s ))s"
done
grep -E "stages|s2o|0.25 of|dense " $OUT/gen.txt | sed -E 's/ +/ /g' | head -60
for st in 4 2 3; do
  timeout 150 ./sparseattn e2e --n 32768 --causal true --methods dense,s2o --target 0.05 --repeat 3 --warmup 1 --gen-stages $st > $OUT/e2e_s2o_st$st.jsonl 2> $OUT/e2e_err_$st.txt
  echo "e2e stages $st rc $? at $(( $(date +%s) - s ))s"
done
timeout 100 ./cuda.test -test.run '^$' -test.bench 'BenchmarkPlanCold' -test.benchtime 200x > $OUT/cold.txt 2>&1
echo "cold rc $? at $(( $(date +%s) - s ))s"; grep -E "Benchmark|ok" $OUT/cold.txt
