#!/usr/bin/env bash
# Gathering-kernel variants side by side: TestGenBench's rows (time over
# work · our dense time, each build against its own dense run) for every
# build, alternating twice at each length, so that a kernel change is read
# against the build before it on the same machine start; then one table,
# build by build. B=1, Hq=32, Hkv=8, D=128, bf16, causal, 128x64 blocks.
#
# usage: scripts/gpu_gen_ab.sh OUT_DIR NS ROWS BUILD.test[@KERNEL_DIR] ...   (on the GPU machine)
#   NS: lengths, comma-separated (e.g. 16384,32768)
#   ROWS: SPARSEATTN_GEN_BENCH_ONLY, |-separated row names (e.g. 's2o stop|psa levels')
#   each BUILD.test: CGO_ENABLED=0 go test -c -o BUILD.test ./cuda, one per variant;
#   @KERNEL_DIR runs it with that directory's kernel files (Tactics.KernelDir,
#   SPARSEATTN_KERNEL_DIR), so one build measures several kernel variants
# Writes OUT_DIR/genbench.txt (raw lines) and OUT_DIR/genbench_table.txt.
set -uo pipefail # no -e: every build runs even when one fails
usage="usage: gpu_gen_ab.sh OUT_DIR NS ROWS BUILD.test ..."
out=${1:?$usage}
ns=${2:?$usage}
rows=${3:?$usage}
shift 3
[ $# -ge 1 ] || { echo "$usage" >&2; exit 2; }
mkdir -p "$out"
export SPARSEATTN_GEN_BENCH_CACHE=${SPARSEATTN_GEN_BENCH_CACHE:-/tmp/gen_ab_cubins}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$out/device.txt"
for n in ${ns//,/ }; do
  for r in 1 2; do
    for arg in "$@"; do
      b=${arg%%@*} kd="" label=$(basename "${arg%%@*}" .test)
      [[ $arg == *@* ]] && kd=${arg#*@} label="$label@$(basename "$kd")"
      SPARSEATTN_KERNEL_DIR=$kd SPARSEATTN_GEN_BENCH=$n SPARSEATTN_GEN_BENCH_ONLY="$rows" timeout 120 "$b" -test.run 'TestGenBench$' -test.v 2>&1 |
        grep -E 'N=|FAIL|panic' | sed "s|.*gen_bench_test.go:[0-9]*: |$label r$r |" >> "$out/genbench.txt"
    done
  done
done
python3 - "$out/genbench.txt" > "$out/genbench_table.txt" <<'PY'
import re, sys, collections
tab = collections.OrderedDict()
builds = []
for line in open(sys.argv[1]):
    m = re.match(r'(\S+) r\d N=(\d+) (.*?)\s+\S+_gen\S*\s+([\d.]+) ms.*time/\(work·dense\) ([\d.]+)', line)
    if not m:
        continue
    b, n, name, ms, ratio = m.groups()
    if b not in builds:
        builds.append(b)
    tab.setdefault((int(n), name), collections.defaultdict(list))[b].append(f"{ms} ({ratio})")
print("| N | plan | " + " | ".join(builds) + " |")
print("|---|---|" + "---|" * len(builds))
for (n, name), per in tab.items():
    print(f"| {n // 1024}K | {name} | " + " | ".join(", ".join(per[b]) for b in builds) + " |")
PY
cat "$out/genbench_table.txt"
