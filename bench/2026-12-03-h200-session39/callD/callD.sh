#!/bin/bash
# session 39 call D: Nsight Compute of psa_score (warpgroups decoupled, 295e052 = bin/s39e) and of both
# psa_outliers16 launches (queries, keys) at 32K causal, 128x64 blocks, pseudo-random inputs; SASS summaries.
s=$(date +%s)
t() { echo "== $1 at $(( $(date +%s) - s ))s" | tee -a $OUT/log.txt; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/log.txt
export SPARSEATTN_PLANNER_BENCH_BLOCKK=64
timeout 200 scripts/gpu_planner_ncu.sh bin/s39e/cuda.test psa psa_score 32768 $OUT/score32k >> $OUT/log.txt 2>&1; t "ncu score rc $?"
python3 scripts/ncu_sass_summary.py $OUT/score32k/psa_score_sass.csv --seg 24 > $OUT/score32k/summary.txt 2>&1
timeout 200 scripts/gpu_planner_ncu.sh bin/s39e/cuda.test psa psa_outliers16 32768 $OUT/outl32k 2 >> $OUT/log.txt 2>&1; t "ncu outliers rc $?"
python3 scripts/ncu_sass_summary.py $OUT/outl32k/psa_outliers16_sass.csv > $OUT/outl32k/summary.txt 2>&1
rm -f $OUT/*/*.ncu-rep
gzip $OUT/*/*_sass.csv
