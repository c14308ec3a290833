#!/bin/bash
# session 36 call B (d151d87): why S2O's end-to-end run costs more than TestGenBench's stop rows.
# ncu (full set) of the attn_fwd launches of e2e 16K causal s2o tau 0.02 (dense reference, then s2o's run);
# e2e s2o causal 8K-32K at its default under each launch order; racecheck over TestRunGen.
cd "$(dirname "$0")"
s=$(date +%s)
t() { echo "== $1 at $(( $(date +%s) - s ))s" | tee -a $OUT/log.txt; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/log.txt
mkdir -p /tmp/ncu
timeout 150 ncu --clock-control none --kernel-name attn_fwd --launch-count 3 --set full --import-source no -f -o /tmp/ncu/s2o16k \
  ./sparseattn e2e --n 16384 --causal true --methods s2o --sweep=false --s2o-tau 0.02 --repeat 1 --warmup 0 > /tmp/ncu/log.txt 2>&1
t "ncu rc $?"; tail -3 /tmp/ncu/log.txt >> $OUT/log.txt
ncu --import /tmp/ncu/s2o16k.ncu-rep --page details > /tmp/ncu/details.txt 2>&1
ncu --import /tmp/ncu/s2o16k.ncu-rep --page source --csv --print-source sass > /tmp/ncu/sass.csv 2>&1
python3 ncu_sass_summary.py /tmp/ncu/sass.csv > /tmp/ncu/summary.txt 2>&1
grep -E "attn_fwd|Duration|Elapsed Cycles|SM Active Cycles|Executed Instructions |Issue Slots Busy|Registers Per|Grid Size|imbalance|Imbalance" /tmp/ncu/details.txt > $OUT/ncu_keys.txt
tar czf $OUT/ncu.tgz -C /tmp/ncu details.txt sass.csv summary.txt log.txt; t "ncu export"
for lo in auto head longest; do
  timeout 60 ./sparseattn e2e --n 8192,16384,32768 --causal true --methods s2o --sweep=false --launch-order $lo --repeat 3 --warmup 1 | sed "s/\"method\":\"s2o\"/\"method\":\"s2o-$lo\"/" >> $OUT/ours.jsonl 2>> $OUT/log.txt; t "e2e $lo rc $?"
done
timeout 75 compute-sanitizer --tool racecheck --print-limit 3 ./selftest.test -test.run 'TestRunGen$' -test.v > $OUT/sanitizer.txt 2>&1
t "racecheck rc $? pass $(grep -c -- '--- PASS' $OUT/sanitizer.txt) $(grep -E 'RACECHECK SUMMARY' $OUT/sanitizer.txt | tr '\n' ' ')"
