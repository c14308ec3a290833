#!/bin/bash
# session 39 call A: Nsight Compute of psa_score (wgmma) at 32K and psa_assign at 128K on main 4dc5139 (bin/s39a),
# causal, 128x64 blocks, pseudo-random inputs (TestPlannerKernelTimes); SASS summaries of both.
s=$(date +%s)
t() { echo "== $1 at $(( $(date +%s) - s ))s" | tee -a $OUT/log.txt; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/log.txt
export SPARSEATTN_PLANNER_BENCH_BLOCKK=64
timeout 200 scripts/gpu_planner_ncu.sh bin/s39a/cuda.test psa psa_score 32768 $OUT/score32k >> $OUT/log.txt 2>&1; t "ncu score rc $?"
python3 scripts/ncu_sass_summary.py $OUT/score32k/psa_score_sass.csv > $OUT/score32k/summary.txt 2>&1
timeout 250 scripts/gpu_planner_ncu.sh bin/s39a/cuda.test psa psa_assign 131072 $OUT/assign128k >> $OUT/log.txt 2>&1; t "ncu assign rc $?"
python3 scripts/ncu_sass_summary.py $OUT/assign128k/psa_assign_sass.csv > $OUT/assign128k/summary.txt 2>&1
rm -f $OUT/*/*.ncu-rep $OUT/*/*_sass.csv
