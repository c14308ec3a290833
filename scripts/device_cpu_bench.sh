#!/usr/bin/env bash
# Runs on the lent device machine: our CPU executor and PyTorch's CPU SDPA
# on the same host, same shapes, same thread count, in one run. Expects the
# binary at bin/sparseattn (build here with
#   CGO_ENABLED=0 go build -o bin/sparseattn ./cmd/sparseattn
# and carry bin/sparseattn). Writes JSON under $OUT.
set -euo pipefail
out=${OUT:-/tmp/out}
mkdir -p "$out"
threads=$(nproc)
./bin/sparseattn info | tee "$out/info.txt"
python3 -c 'import torch; print("torch", torch.__version__, "threads", torch.get_num_threads())'
for causal in true false; do
  ./bin/sparseattn bench --workload random --n 1024,2048,4096,8192 --heads 8 --kv-heads 8 --d 128 \
    --causal $causal --repeat 7 --warmup 2 --json > "$out/ours_causal_$causal.json"
  python3 scripts/peer_torch_cpu.py --n 1024,2048,4096,8192 --heads 8 --d 128 --causal $causal \
    --repeat 7 --warmup 2 --threads "$threads" > "$out/torch_causal_$causal.json"
done
./bin/sparseattn eval --repeat 3 --warmup 1 | tee "$out/eval_default.txt"
python3 - "$out" <<'PY'
import json, sys, os
out = sys.argv[1]
for causal in ("true", "false"):
    ours = json.load(open(os.path.join(out, f"ours_causal_{causal}.json")))
    peer = json.load(open(os.path.join(out, f"torch_causal_{causal}.json")))
    print(f"causal={causal}  peak {ours['fma_peak_gflops']['all_cores']:.0f} GFLOPS ({ours['fma_peak_gflops']['kind']})")
    print(f"{'N':>6} {'ours ms':>9} {'ours GF':>8} {'%peak':>6} {'torch ms':>9} {'torch GF':>9} {'ours/torch':>10}")
    for a, b in zip(ours["rows"], peer["rows"]):
        print(f"{a['n']:>6} {a['ms']:>9.1f} {a['dense_equivalent_gflops']:>8.1f} {a['percent_of_peak']:>6.1f} {b['ms']:>9.1f} {b['dense_equivalent_gflops']:>9.1f} {b['ms']/a['ms']:>9.2f}x")
PY
