#!/usr/bin/env bash
# Diagnoses short problems on many cores: non-causal N=1024, H=8, D=128 with
# several worker counts and tile sizes, against causal. Run on the device
# with bin/sparseattn carried.
set -u
b=./bin/sparseattn
common="--workload random --kv-heads 8 --repeat 21 --warmup 3"
for w in 1 4 8 16; do
  echo "workers=$w"; $b bench $common --causal false --n 1024 --workers $w | tail -1
done
for bs in "64 64" "128 64" "128 128" "32 64"; do
  set -- $bs
  echo "blocks=$1x$2"; $b bench $common --causal false --n 1024,2048 --block-q $1 --block-k $2 | tail -2
done
echo "causal"; $b bench $common --causal true --n 1024 | tail -1
