#!/usr/bin/env bash
# One device planner kernel under Nsight Compute: a single launch with the
# full section set (clocks not locked, so times read as in the timing
# tests), its details page, and its per-instruction SASS table (stall
# samples, executed instructions) as CSV for scripts/ncu_sass_summary.py.
# Shapes as TestPlannerKernelTimes: B=1, Hq=32, Hkv=8, D=128, bf16, causal,
# 128x64 blocks.
#
# usage: scripts/gpu_planner_ncu.sh BUILD.test PLANNER KERNEL N OUT_DIR [SKIP]   (on the GPU machine)
#   BUILD.test: CGO_ENABLED=0 go test -c -o BUILD.test ./cuda
#   PLANNER: TestPlannerKernelTimes's name (e.g. psa); KERNEL: the kernel (e.g. psa_score)
#   SKIP: launches of KERNEL to skip first (default 1: past the warm-up; a kernel
#   launched twice a plan, such as psa_outliers, counts both)
set -uo pipefail
usage="usage: gpu_planner_ncu.sh BUILD.test PLANNER KERNEL N OUT_DIR [SKIP]"
bin=${1:?$usage}; planner=${2:?$usage}; kernel=${3:?$usage}; n=${4:?$usage}; out=${5:?$usage}; skip=${6:-1}
mkdir -p "$out"
SPARSEATTN_KERNEL_BENCH=$planner SPARSEATTN_PLANNER_BENCH_N=$n ncu --clock-control none --kernel-name "$kernel" \
  --launch-skip "$skip" --launch-count 1 --set full -f -o "$out/$kernel" "$bin" -test.run 'TestPlannerKernelTimes$' > "$out/ncu_log.txt" 2>&1 ||
  { echo "ncu failed: $out/ncu_log.txt" >&2; tail -5 "$out/ncu_log.txt" >&2; exit 1; }
ncu --import "$out/$kernel.ncu-rep" --page details > "$out/${kernel}_details.txt"
ncu --import "$out/$kernel.ncu-rep" --page source --csv --print-source sass > "$out/${kernel}_sass.csv"
grep -E "Duration|Executed Instructions |Issue Slots Busy|Registers Per|Achieved Occupancy|Memory Throughput" "$out/${kernel}_details.txt"
