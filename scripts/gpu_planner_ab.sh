#!/usr/bin/env bash
# Device planner variants side by side: each build's per-kernel times
# (TestPlannerKernelTimes: an event after each launch) and whole-plan
# times against its own dense run (TestPlannerTimes), the builds
# alternating twice in one call, so that a change is read against the
# build before it on the same machine start. B=1, Hq=32, Hkv=8, D=128,
# bf16, causal, 128x64 blocks.
#
# usage: scripts/gpu_planner_ab.sh OUT_DIR PLANNERS NS BUILD.test ...   (on the GPU machine)
#   PLANNERS: TestPlannerTimes's names, comma-separated (e.g. psa,unisparse)
#   NS: lengths, comma-separated (e.g. 8192,32768)
#   each BUILD.test: CGO_ENABLED=0 go test -c -o BUILD.test ./cuda, one per variant
set -uo pipefail  # no -e: every build runs even when one fails
out=${1:?usage: gpu_planner_ab.sh OUT_DIR PLANNERS NS BUILD.test ...}
planners=${2:?usage: gpu_planner_ab.sh OUT_DIR PLANNERS NS BUILD.test ...}
ns=${3:?usage: gpu_planner_ab.sh OUT_DIR PLANNERS NS BUILD.test ...}
shift 3
[ $# -ge 1 ] || { echo "usage: gpu_planner_ab.sh OUT_DIR PLANNERS NS BUILD.test ..." >&2; exit 2; }
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$out/device.txt"
for r in 1 2; do
  for b in "$@"; do
    SPARSEATTN_KERNEL_BENCH=$planners SPARSEATTN_PLANNER_BENCH_N=$ns "$b" -test.run 'TestPlannerKernelTimes$' -test.v 2>&1 |
      grep "N=" | sed "s|.*planner_kernels_test.go:[0-9]*: |$(basename "$b") r$r |" | tee -a "$out/kernels.txt"
  done
done
for b in "$@"; do
  SPARSEATTN_PLANNER_BENCH=$planners SPARSEATTN_PLANNER_BENCH_N=$ns "$b" -test.run 'TestPlannerTimes$' -test.v 2>&1 |
    grep -E "%" | sed "s|.*go:[0-9]*: |$(basename "$b") |" | tee -a "$out/plannertimes.txt"
done
