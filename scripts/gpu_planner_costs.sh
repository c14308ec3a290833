#!/usr/bin/env bash
# Device planning costs: every kernel of every device planner timed alone
# (TestPlannerKernelTimes: an event after each launch) and whole plans
# against our dense run (TestPlannerTimes), B=1, Hq=32, Hkv=8, D=128, bf16,
# causal, 128x64 blocks.
#
# usage: scripts/gpu_planner_costs.sh BIN_DIR OUT_DIR   (on the GPU machine)
#   BIN_DIR holds cuda.test, built here with
#   CGO_ENABLED=0 go test -c -o BIN_DIR/cuda.test ./cuda
#   NS overrides the lengths (default 8192,32768); PLANNERS the planners
#   (TestPlannerTimes's names, comma-separated; default every one).
set -euo pipefail
bin=${1:?usage: gpu_planner_costs.sh BIN_DIR OUT_DIR}
out=${2:?usage: gpu_planner_costs.sh BIN_DIR OUT_DIR}
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$out/device.txt"
export SPARSEATTN_PLANNER_BENCH_N=${NS:-8192,32768}
SPARSEATTN_KERNEL_BENCH=${PLANNERS:-1} "$bin/cuda.test" -test.run 'TestPlannerKernelTimes$' -test.v | tee "$out/kernels.txt"
SPARSEATTN_PLANNER_BENCH=${PLANNERS:-1} "$bin/cuda.test" -test.run 'TestPlannerTimes$' -test.v | tee "$out/plannertimes.txt"
