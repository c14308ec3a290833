#!/bin/bash
SA=/tmp/sa
{ time $SA tune --workload llm --n 4096 --heads 8 --kv-heads 2 --calib 3 --holdout 3 --out /tmp/res/llm4k.json ; } > d1.txt 2>&1
{ time $SA tune --workload video --heads 4 --kv-heads 4 --calib 3 --holdout 3 --out /tmp/res/video.json ; } > d2.txt 2>&1
for n in 2048 4096 8192 16384; do
  { time $SA tune --workload llm --n $n --heads 8 --kv-heads 2 --calib 1 --l1 0.05 --l2 0.05 --json ; } > c2_$n.txt 2>&1
done
{ time $SA tune --workload llm --n 8192 --heads 32 --kv-heads 8 --calib 3 --out /tmp/res/llm8k32.json ; } > t32.txt 2>&1
echo alldone > done.txt
