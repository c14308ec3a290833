#!/bin/bash
# session 33 call B: h-vote2 (stop votes as tagged words, no barriers): gathering self-test and racecheck; TestGenBench main vs vote2; S2O end to end 32K-128K causal, Q_perm and fused
cd "$(dirname "$0")"
s=$(date +%s)
t() { echo "== $1 at $(( $(date +%s) - s ))s" | tee -a $OUT/log.txt; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/log.txt
timeout 100 ./selftest_vote2.test -test.run 'TestRunGen$|TestRunPlanners/s2o' -test.v > $OUT/selftest.txt 2>&1
t "selftest rc $? pass $(grep -c -- '--- PASS' $OUT/selftest.txt) fail $(grep -c -- '--- FAIL' $OUT/selftest.txt)"
timeout 90 compute-sanitizer --tool racecheck --print-limit 3 ./selftest_vote2.test -test.run 'TestRunGen$' -test.v > $OUT/racecheck.txt 2>&1
t "racecheck rc $? $(grep -E 'RACECHECK SUMMARY' $OUT/racecheck.txt | tr '\n' ' ')"
./gpu_gen_ab.sh $OUT/ab 16384,32768 'identity|s2o stop|first 30|stop never' ./cuda_main.test ./cuda_vote2.test > /dev/null 2>&1; t "gen_ab"
python3 gpu_e2e_peers.py --n 32768,65536,131072 --rep-ms 100 > $OUT/peers.jsonl 2>> $OUT/log.txt; t peers
for n in 32768 65536 131072; do
  timeout 90 ./sparseattn_vote2 e2e --n $n --causal true --methods dense,s2o --target 0.05 --repeat 3 --warmup 1 >> $OUT/ours.jsonl 2>> $OUT/log.txt; t "e2e $n rc $?"
  timeout 90 ./sparseattn_vote2 e2e --n $n --causal true --methods s2o --s2o-no-qperm --target 0.05 --repeat 3 --warmup 1 | sed 's/"method":"s2o"/"method":"s2o-fused"/' >> $OUT/ours.jsonl 2>> $OUT/log.txt; t "e2e $n fused rc $?"
done
