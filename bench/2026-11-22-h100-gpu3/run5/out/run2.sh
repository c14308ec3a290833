#!/bin/bash
cd /tmp/res/out
SA=/tmp/sa2
{ time $SA tune --workload llm --n 4096 --heads 8 --kv-heads 2 --calib 3 --holdout 3 ; } > d1b.txt 2>&1
{ time $SA tune --workload llm --n 4096 --heads 8 --kv-heads 2 --calib 3 --holdout 3 --margin 0.2 ; } > d1m.txt 2>&1
{ time $SA tune --workload video --heads 4 --kv-heads 4 --calib 3 --holdout 3 ; } > d2b.txt 2>&1
{ time $SA tune --workload llm --n 16384 --heads 8 --kv-heads 2 --calib 1 --l1 0.05 --l2 0.05 --json ; } > c2_16384.txt 2>&1
echo alldone > done2.txt
