#!/bin/bash
# usage: bin/c32b/call2.sh — session 32 call 2: sparge plan times (h-sr32 against main, llm 8K); STOP-kernel ablations (STOPX) and producer/consumer register splits in TestGenBench (branch h-stopx)
cd "$(dirname "$0")"
s=$(date +%s)
t() { echo "== $1 at $(( $(date +%s) - s ))s" | tee -a $OUT/log.txt; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/log.txt
export SPARSEATTN_GEN_BENCH_CACHE=/tmp/cubins
for r in a b; do for b in new old; do
  echo "## $b $r" >> $OUT/sparge_times.txt
  SPARSEATTN_SPARGE_BENCH=1 SPARSEATTN_SPARGE_BENCH_WORKLOAD=llm SPARSEATTN_SPARGE_BENCH_N=8192 timeout 60 ./cuda_$b.test -test.run 'TestSpargePlanTimes$' -test.v >> $OUT/sparge_times.txt 2>&1
done; done; t sparge_times
for x in 0 1 2 3 4 5; do
  only='identity|stop never fires'; [ $x = 0 ] && only='identity|stop never fires|s2o stop|first 30'
  echo "## STOPX=$x" >> $OUT/stopx.txt
  SPARSEATTN_GEN_DEFS="-DSTOPX=$x" SPARSEATTN_GEN_BENCH=16384 SPARSEATTN_GEN_BENCH_ONLY="$only" timeout 100 ./cuda_x.test -test.run 'TestGenBench$' -test.v 2>&1 | grep -E 'N=|FAIL|panic' >> $OUT/stopx.txt
  t "stopx $x"
done
for n in 16384 32768; do for rg in "40 232" "56 224" "72 216" "40 232"; do set -- $rg
  echo "## P=$1 C=$2" >> $OUT/regs_$n.txt
  SPARSEATTN_GEN_DEFS="-DPRODUCER_REGS=$1 -DCONSUMER_REGS=$2" SPARSEATTN_GEN_BENCH=$n SPARSEATTN_GEN_BENCH_ONLY='identity|gathered|s2o stop|first 30|levels' timeout 120 ./cuda_x.test -test.run 'TestGenBench$' -test.v 2>&1 | grep -E 'N=|FAIL|panic' >> $OUT/regs_$n.txt
  t "regs $n $1/$2"
done; done
sed -E 's/ +/ /g; s/gen_bench_test.go:[0-9]+: //' $OUT/stopx.txt | cut -c1-220
