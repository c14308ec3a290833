#!/bin/bash
# session 34 call E (main 8K-128K table): issue 12's end-to-end table with the wide dense default, block masks at 128-key blocks, PSA and S2O at 64 (e2e's defaults), both causalities to 64K, causal at 128K, cuDNN in the same call
cd "$(dirname "$0")"
s=$(date +%s)
t() { echo "== $1 at $(( $(date +%s) - s ))s" | tee -a $OUT/log.txt; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/log.txt
timeout 60 python3 gpu_e2e_peers.py --n 8192,16384,32768,65536,131072 --rep-ms 100 > $OUT/peers.jsonl 2>> $OUT/log.txt; t peers
for nt in 8192:40:both 16384:40:both 32768:60:both 65536:130:both 131072:120:true; do
  IFS=: read n tt c <<< "$nt"
  timeout $tt ./sparseattn e2e --n $n --causal $c --target 0.05 --repeat 3 --warmup 1 >> $OUT/ours.jsonl 2>> $OUT/log.txt; t "e2e $n rc $?"
done
