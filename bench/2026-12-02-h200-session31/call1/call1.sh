#!/bin/bash
# usage: bin/m31/call1.sh — main (586ecca): ncu of psa_score and psa_outliers at 32K, sparge_pool_vec and sparge_rows_search at 8K; kernel times psa 32K and sparge 8K
cd "$(dirname "$0")"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/kernels.txt
s=$(date +%s)
SPARSEATTN_KERNEL_BENCH=psa,sparge SPARSEATTN_PLANNER_BENCH_N=8192,32768 timeout 60 ./cuda.test -test.run 'TestPlannerKernelTimes$' -test.v >> $OUT/kernels.txt 2>&1; echo "kernels rc $? at $(( $(date +%s) - s ))s"
grep -E "psa|sparge|dense" $OUT/kernels.txt | head -20
for spec in "psa psa_score 32768 1" "psa psa_outliers 32768 2" "sparge sparge_pool_vec 8192 1" "sparge sparge_rows_search 8192 1"; do
  set -- $spec
  timeout 90 ./gpu_planner_ncu.sh ./cuda.test $1 $2 $3 /tmp/ncu_$2 $4 > $OUT/ncu_$2.txt 2>&1
  echo "ncu $2 rc $? at $(( $(date +%s) - s ))s"; cat $OUT/ncu_$2.txt
  python3 ncu_sass_summary.py /tmp/ncu_$2/$2_sass.csv --seg 24 >> $OUT/ncu_$2.txt 2>&1
  grep -E "Duration|Throughput|Registers|Occupancy|Issue|Eligible|Stall|Executed Ipc|L2 Hit|L1/TEX Hit|Bank" /tmp/ncu_$2/$2_details.txt | head -40 >> $OUT/ncu_$2.txt
  [ $2 = sparge_rows_search ] || gzip -c /tmp/ncu_$2/$2_sass.csv > $OUT/$2_sass.csv.gz
done
echo "total $(( $(date +%s) - s ))s"
