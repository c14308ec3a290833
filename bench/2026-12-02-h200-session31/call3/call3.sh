#!/bin/bash
# usage: bin/g31/call3.sh — diagnostics at c724cf6: sparge's plan kernels on the llm workload at 8K (TestSpargePlanTimes); ncu of the gathering kernel on a PSA level mix (levels 1-4, 0.25 each) against a gathered plan of about the same work (0.5 of blocks) at 16K
cd "$(dirname "$0")"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/sparge.txt
s=$(date +%s)
SPARSEATTN_SPARGE_BENCH=1 SPARSEATTN_SPARGE_BENCH_WORKLOAD=llm SPARSEATTN_SPARGE_BENCH_N=8192 timeout 60 ./cuda.test -test.run 'TestSpargePlanTimes$' -test.v >> $OUT/sparge.txt 2>&1
SPARSEATTN_SPARGE_BENCH=1 SPARSEATTN_SPARGE_BENCH_N=8192 timeout 60 ./cuda.test -test.run 'TestSpargePlanTimes$' -test.v >> $OUT/sparge.txt 2>&1
echo "sparge at $(( $(date +%s) - s ))s"; grep -E "N=|µs|ms" $OUT/sparge.txt | head -20
export SPARSEATTN_GEN_BENCH_CACHE=/tmp/cubins
for spec in "psa levels 1-4, 0.25:psa" "gathered, 0.5:gath"; do
  only=${spec%%:*}; tag=${spec##*:}
  SPARSEATTN_GEN_BENCH=16384 SPARSEATTN_GEN_BENCH_ONLY="$only" timeout 150 ncu --clock-control none --kernel-name attn_fwd --launch-skip 15 --launch-count 1 --set full -f -o /tmp/gen_$tag ./cuda.test -test.run 'TestGenBench$' -test.v > $OUT/ncu_log_$tag.txt 2>&1
  echo "ncu $tag rc $? at $(( $(date +%s) - s ))s"
  ncu --import /tmp/gen_$tag.ncu-rep --page details > /tmp/gen_${tag}_details.txt
  ncu --import /tmp/gen_$tag.ncu-rep --page source --csv --print-source sass > /tmp/gen_${tag}_sass.csv
  grep -E "attn_fwd|Duration|Executed Instructions |Issue Slots Busy|Registers Per|Achieved Occupancy|Memory Throughput|DRAM Through|Eligible|Warp Cycles" /tmp/gen_${tag}_details.txt | head -20 > $OUT/ncu_$tag.txt
  python3 ncu_sass_summary.py /tmp/gen_${tag}_sass.csv --seg 32 >> $OUT/ncu_$tag.txt 2>&1
  gzip -c /tmp/gen_${tag}_sass.csv > $OUT/gen_${tag}_sass.csv.gz
  cat $OUT/ncu_$tag.txt | head -12
done
echo "total $(( $(date +%s) - s ))s"
