#!/bin/bash
# session 33 call D: main 0ecaf30 (vote in the MMA shadow, fused S2O default) and h-lvlsort c1c7872 on it (PSA entries by level, one bias a tile): self-test of the candidate; TestGenBench main vs lvl on PSA rows; end to end 8K-128K causal (dense, s2o; psa both builds) with cuDNN; ncu of the STOP kernel against the plain one on the same rows
cd "$(dirname "$0")"
s=$(date +%s)
t() { echo "== $1 at $(( $(date +%s) - s ))s" | tee -a $OUT/log.txt; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/log.txt
timeout 120 ./selftest_lvl.test -test.run 'TestRunGen$|TestRunPlanners/s2o|TestRunPlanners/psa|TestPsaViews' -test.v > $OUT/selftest.txt 2>&1
t "selftest rc $? pass $(grep -c -- '--- PASS' $OUT/selftest.txt) fail $(grep -c -- '--- FAIL' $OUT/selftest.txt)"
./gpu_gen_ab.sh /tmp/ab 16384,32768 'identity|levels|psa' ./cuda_main.test ./cuda_lvl.test > /dev/null 2>&1; cat /tmp/ab/genbench.txt /tmp/ab/genbench_table.txt > $OUT/genbench.txt; t "gen_ab lvl"
python3 gpu_e2e_peers.py --n 8192,16384,32768,65536,131072 --rep-ms 100 > $OUT/peers.jsonl 2>> $OUT/log.txt; t peers
for n in 8192 16384 32768 65536 131072; do
  timeout 100 ./sparseattn_main e2e --n $n --causal true --methods dense,s2o --target 0.05 --repeat 3 --warmup 1 >> $OUT/ours.jsonl 2>> $OUT/log.txt; t "e2e s2o $n rc $?"
done
for n in 16384 32768 65536; do
  timeout 60 ./sparseattn_main e2e --n $n --causal true --methods psa --target 0.05 --repeat 3 --warmup 1 >> $OUT/ours.jsonl 2>> $OUT/log.txt; t "e2e psa main $n rc $?"
  timeout 60 ./sparseattn_lvl e2e --n $n --causal true --methods psa --target 0.05 --repeat 3 --warmup 1 | sed 's/"method":"psa"/"method":"psa-lvlsort"/' >> $OUT/ours.jsonl 2>> $OUT/log.txt; t "e2e psa lvl $n rc $?"
done
for row in 'first 30 blocks, no stop' 'first 30 blocks, stop never'; do
  SPARSEATTN_GEN_BENCH=16384 SPARSEATTN_GEN_BENCH_ONLY="$row" timeout 90 ncu --clock-control none --kernel-name attn_fwd --launch-skip 16 --launch-count 1 --set full -f -o /tmp/ncu_row ./cuda_main.test -test.run 'TestGenBench$' > /tmp/ncu_log.txt 2>&1
  t "ncu '$row' rc $?"
  { echo "### $row"; ncu --import /tmp/ncu_row.ncu-rep --page details | grep -E 'Duration|Executed Instructions |Issue Slots Busy|Registers Per|Warp Cycles Per Issued|No Eligible'; ncu --import /tmp/ncu_row.ncu-rep --page source --csv --print-source sass > /tmp/row_sass.csv; python3 ncu_sass_summary.py /tmp/row_sass.csv; } >> $OUT/ncu.txt 2>&1
done
t done
