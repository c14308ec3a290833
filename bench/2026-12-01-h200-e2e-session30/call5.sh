#!/bin/bash
# usage: bin/e30/call5.sh — issue 12's end-to-end table at main 46890c4 (this session's planners): cuDNN SDPA peers, then every method at its default and sparsest setting within rel-L1 0.05, causal and not, 8K-128K, in the same call
cd "$(dirname "$0")"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/device.txt
s=$(date +%s)
timeout 90 python3 gpu_e2e_peers.py --n 8192,16384,32768,65536,131072 --rep-ms 100 > $OUT/peers.jsonl 2> $OUT/peers_err.txt
echo "peers rc $? rows $(wc -l < $OUT/peers.jsonl) at $(( $(date +%s) - s ))s"
for nt in 8192:40 16384:50 32768:70 65536:110 131072:220; do
  n=${nt%:*}; t=${nt#*:}
  timeout $t ./sparseattn e2e --n $n --causal both --target 0.05 --repeat 3 --warmup 1 > $OUT/ours_$n.jsonl 2> $OUT/err_$n.txt
  echo "N=$n rc $? rows $(wc -l < $OUT/ours_$n.jsonl) at $(( $(date +%s) - s ))s"
done
cat $OUT/ours_*.jsonl > $OUT/ours.jsonl; rm $OUT/ours_*.jsonl
tail -n 2 $OUT/err_*.txt | head -20
