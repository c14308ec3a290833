#!/bin/bash
# session 33 call C: h-vote2 b11fe1f (vote posted in the next tile's MMA shadow; vote3) and its atomic-word variant (vote3a): self-test, racecheck; h-lvlsort d6a2927 (entries by level, one bias a tile): self-test; TestGenBench main, vote3, vote3a / main, lvl; S2O end to end at 32K
cd "$(dirname "$0")"
s=$(date +%s)
t() { echo "== $1 at $(( $(date +%s) - s ))s" | tee -a $OUT/log.txt; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/log.txt
timeout 100 ./selftest_vote3.test -test.run 'TestRunGen$|TestRunPlanners/s2o' -test.v > $OUT/selftest.txt 2>&1
t "selftest vote3 rc $? pass $(grep -c -- '--- PASS' $OUT/selftest.txt) fail $(grep -c -- '--- FAIL' $OUT/selftest.txt)"
timeout 100 ./selftest_lvl.test -test.run 'TestRunGen$|TestRunPlanners/psa|TestPsaViews' -test.v > $OUT/selftest_lvl.txt 2>&1
t "selftest lvl rc $? pass $(grep -c -- '--- PASS' $OUT/selftest_lvl.txt) fail $(grep -c -- '--- FAIL' $OUT/selftest_lvl.txt)"
timeout 90 compute-sanitizer --tool racecheck --print-limit 3 ./selftest_vote3a.test -test.run 'TestRunGen$' -test.v > $OUT/racecheck_3a.txt 2>&1
t "racecheck vote3a rc $? pass $(grep -c -- '--- PASS' $OUT/racecheck_3a.txt) $(grep -E 'RACECHECK SUMMARY' $OUT/racecheck_3a.txt | tr '\n' ' ')"
./gpu_gen_ab.sh $OUT/ab 16384,32768 'identity|s2o stop|first 30|stop never' ./cuda_main.test ./cuda_vote3.test ./cuda_vote3a.test > /dev/null 2>&1; t "gen_ab stop"
./gpu_gen_ab.sh $OUT/ablvl 16384,32768 'identity|levels|psa' ./cuda_main.test ./cuda_lvl.test > /dev/null 2>&1; t "gen_ab lvl"
python3 gpu_e2e_peers.py --n 32768 --rep-ms 100 > $OUT/peers.jsonl 2>> $OUT/log.txt; t peers
timeout 60 ./sparseattn_vote3 e2e --n 32768 --causal true --methods dense,s2o --target 0.05 --repeat 3 --warmup 1 >> $OUT/ours.jsonl 2>> $OUT/log.txt; t "e2e rc $?"
timeout 60 ./sparseattn_vote3 e2e --n 32768 --causal true --methods s2o --s2o-no-qperm --target 0.05 --repeat 3 --warmup 1 | sed 's/"method":"s2o"/"method":"s2o-fused"/' >> $OUT/ours.jsonl 2>> $OUT/log.txt; t "e2e fused rc $?"
