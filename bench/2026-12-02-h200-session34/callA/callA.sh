#!/bin/bash
# session 34 call A: TestRunGen (warp_scan on the device), TestRunnerWideTiles, TestGenBench main vs SUB1 kernel dir, e2e 32K causal dense (BlockK 64 / wide tiles) and s2o (main / SUB1) with cuDNN
cd "$(dirname "$0")"
s=$(date +%s)
t() { echo "== $1 at $(( $(date +%s) - s ))s" | tee -a $OUT/log.txt; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/log.txt
timeout 120 ./selftest.test -test.run 'TestRunGen$' -test.v > $OUT/tests.txt 2>&1
t "selftest TestRunGen rc $? pass $(grep -c -- '--- PASS' $OUT/tests.txt) fail $(grep -c -- '--- FAIL' $OUT/tests.txt)"
timeout 90 ./cuda.test -test.run 'TestRunnerWideTiles|TestRunnerMatchesHost' -test.v >> $OUT/tests.txt 2>&1
t "cuda wide rc $? pass $(grep -c -- '--- PASS' $OUT/tests.txt) fail $(grep -c -- '--- FAIL' $OUT/tests.txt)"
SPARSEATTN_KERNEL_DIR=$PWD/kd_sub1 timeout 100 ./selftest.test -test.run 'TestRunGen$|TestRunPlanners/s2o' -test.v > $OUT/tests_sub1.txt 2>&1
t "selftest sub1 rc $? pass $(grep -c -- '--- PASS' $OUT/tests_sub1.txt) fail $(grep -c -- '--- FAIL' $OUT/tests_sub1.txt)"
./gpu_gen_ab.sh $OUT/ab 16384,32768 'identity|s2o stop|first 30|stop never' ./cuda.test ./cuda.test@$PWD/kd_sub1 > /dev/null 2>&1; t "gen_ab"
python3 gpu_e2e_peers.py --n 32768 --rep-ms 100 > $OUT/peers.jsonl 2>> $OUT/log.txt; t peers
timeout 60 ./sparseattn e2e --n 32768 --causal true --methods dense,s2o --target 0.05 --repeat 3 --warmup 1 >> $OUT/ours.jsonl 2>> $OUT/log.txt; t "e2e rc $?"
timeout 60 ./sparseattn e2e --n 32768 --causal true --methods dense --dense-wide-tiles --repeat 3 --warmup 1 | sed 's/"method":"dense"/"method":"dense-wide"/' >> $OUT/ours.jsonl 2>> $OUT/log.txt; t "e2e wide rc $?"
timeout 60 ./sparseattn e2e --n 32768 --causal true --methods s2o --kernel-dir $PWD/kd_sub1 --target 0.05 --repeat 3 --warmup 1 | sed 's/"method":"s2o"/"method":"s2o-sub1"/' >> $OUT/ours.jsonl 2>> $OUT/log.txt; t "e2e sub1 rc $?"
timeout 60 ./sparseattn e2e --n 32768 --causal false --methods dense --dense-wide-tiles --repeat 3 --warmup 1 | sed 's/"method":"dense"/"method":"dense-wide"/' >> $OUT/ours.jsonl 2>> $OUT/log.txt; t "e2e wide nc rc $?"
timeout 60 ./sparseattn e2e --n 32768 --causal false --methods dense --repeat 3 --warmup 1 >> $OUT/ours.jsonl 2>> $OUT/log.txt; t "e2e nc rc $?"
