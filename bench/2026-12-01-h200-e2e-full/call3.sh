#!/bin/bash
# usage: bin/full27/call3.sh — issue 12 item 6 in one call: cuDNN SDPA and every method end to end (default and the sparsest setting within rel-L1 0.05), causal and not, 8K-128K
cd "$(dirname "$0")"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/device.txt
s=$(date +%s)
timeout 70 python3 gpu_e2e_peers.py --n 8192,16384,32768,65536,131072 --rep-ms 150 > $OUT/peers.jsonl; echo "peers rc $? $(( $(date +%s) - s ))s"
for nt in 8192:35 16384:45 32768:65 65536:110 131072:200; do
  n=${nt%:*}; t=${nt#*:}
  timeout $t ./sparseattn e2e --n $n --causal both --target 0.05 --repeat 3 --warmup 1 > $OUT/ours_$n.jsonl 2> $OUT/err_$n.txt
  echo "N=$n rc $? rows $(wc -l < $OUT/ours_$n.jsonl) at $(( $(date +%s) - s ))s"
done
cat $OUT/ours_*.jsonl > $OUT/ours.jsonl; rm $OUT/ours_*.jsonl
tail -3 $OUT/err_*.txt | head -20
