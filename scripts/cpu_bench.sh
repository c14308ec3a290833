#!/usr/bin/env bash
# usage: scripts/cpu_bench.sh [OUTDIR] [SECTION...]
#
# Reproduces every CPU table of BENCHMARKS.md on this machine, with the
# peer in the same run where there is one: dense prefill (against PyTorch's
# CPU SDPA when python3 can import torch), decode and chunked prefill with
# the input check's share (against the plain read bandwidth, and torch),
# S2O's gathered tiles against dense, planning cost at 16K, and dense and
# decode by process CPU time (cputime: the issue-16 tables, which hold
# better than wall-clock rates on a shared machine; for a before/after,
# run two builds' cpu.test alternately).
# SECTION is any of: info dense decode prefill s2o plan cputime (default:
# all).
# Writes one file per table under OUTDIR (default bench/cpu-$(date +%F)),
# each starting with the command that made it and the load at the time.
# Run it on a quiet machine for absolute numbers; on a shared one, the
# ratios inside one run (ours against the peer, s2o against dense) hold
# better than the absolute times.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-bench/cpu-$(date +%F)}
shift || true
sections=${*:-info dense decode prefill s2o plan cputime}
mkdir -p "$out"
bin=$(mktemp -d)/sparseattn
go build -o "$bin" ./cmd/sparseattn

# The peer: the first python3 that imports torch (pyenv's python3 may lack
# Debian's python3-torch, which /usr/bin/python3 has). OPENBLAS_CORETYPE is
# passed through as set (Debian's OpenBLAS picks AVX2 kernels unless told
# SkylakeX); the file headers record it.
peer=()
for py in python3 /usr/bin/python3; do
  if "$py" -c 'import torch' 2>/dev/null; then
    peer=(--peer "$py scripts/peer_torch_cpu.py --threads $(nproc)")
    break
  fi
done

# run FILE CMD...: records the command, commit and load, then the output.
run() {
  local f=$out/$1
  shift
  {
    echo "\$ $*"
    echo "# commit $(git rev-parse --short HEAD), $(date -u +%FT%TZ), load: $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "# OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset} LD_PRELOAD=${LD_PRELOAD:-unset}"
    "$@"
  } 2>&1 | tee "$f"
}

for s in $sections; do
  case $s in
  info)
    run info.txt "$bin" info
    lscpu > "$out/lscpu.txt"
    ;;
  dense)
    for d in 128 64; do
      for causal in true false; do
        run "dense_d${d}_causal_${causal}.txt" "$bin" bench --workload random --causal $causal --d $d \
          --n 1024,2048,4096,8192 --heads 8 --kv-heads 8 --repeat 5 --warmup 1 "${peer[@]}"
      done
    done
    ;;
  decode)
    for h in 8 32; do
      run "decode_hq${h}.txt" "$bin" bench --workload random --causal true --decode --n 4096,16384,65536 \
        --heads $h --kv-heads 8 --repeat 31 --warmup 3 "${peer[@]}"
    done
    ;;
  prefill)
    for h in 8 32; do
      for nq in 16 64 256 1024; do
        run "prefill_hq${h}_nq${nq}.txt" "$bin" bench --workload random --causal true --nq $nq --n 16384 \
          --heads $h --kv-heads 8 --repeat 5 --warmup 1 "${peer[@]}"
      done
    done
    ;;
  s2o)
    go test -c -o "$out/s2o.test" ./method/s2o
    run s2o_gather.txt "$out/s2o.test" -test.run '^$' -test.bench GatherPerBlock -test.count 5
    rm -f "$out/s2o.test"
    ;;
  plan)
    run plan_16k.txt "$bin" eval --workload llm --n 16384 --repeat 3 --warmup 1 \
      --methods dense,sparge,unisparse,psa,s2o,xattn,flexprefill,minference,window
    # Each planner's share of one dense pass in the same iteration (wall
    # and process CPU time), issue 16 item 5: at most 10%, oracle exempt.
    go test -c -o "$out/root.test" .
    run plan_cost_16k.txt "$out/root.test" -test.run '^$' -test.bench 'PlanCost16K/all$' \
      -test.benchtime 1x -test.count 3
    rm -f "$out/root.test"
    ;;
  cputime)
    go test -c -o "$out/cpu.test" ./cpu
    run cputime.txt "$out/cpu.test" -test.run '^$' \
      -test.bench 'DenseCPUTime|DecodeCPUTime|ReadBandwidthCPUTime' -test.benchtime 6x -test.count 3
    rm -f "$out/cpu.test"
    ;;
  *)
    echo "unknown section $s (want info dense decode prefill s2o plan cputime)" >&2
    exit 2
    ;;
  esac
done
