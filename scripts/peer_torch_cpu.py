#!/usr/bin/env python3
"""Times PyTorch's CPU scaled_dot_product_attention, the peer for
`sparseattn bench` on the CPU, on the same shapes and thread count.

Inputs are random normal float32 tensors [1, H, N, D] (never zeros); each
point is the median of --repeat runs after --warmup runs, timed with
time.perf_counter (CPU work is synchronous). Prints one JSON object.
"""
import argparse
import json
import statistics
import time

import torch
import torch.nn.functional as F


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", default="1024,2048,4096,8192")
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--d", type=int, default=128)
    ap.add_argument("--causal", default="true")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--threads", type=int, default=0, help="0 keeps torch's default")
    a = ap.parse_args()
    if a.threads:
        torch.set_num_threads(a.threads)
    causal = a.causal == "true"
    rows = []
    for n in [int(x) for x in a.n.split(",")]:
        g = torch.Generator().manual_seed(n)
        q, k, v = (torch.randn(1, a.heads, n, a.d, generator=g) for _ in range(3))
        times = []
        for i in range(a.warmup + a.repeat):
            t0 = time.perf_counter()
            F.scaled_dot_product_attention(q, k, v, is_causal=causal)
            dt = time.perf_counter() - t0
            if i >= a.warmup:
                times.append(dt)
        t = statistics.median(times)
        pairs = n * (n + 1) / 2 if causal else n * n
        flops = pairs * a.heads * 2 * (a.d + a.d)
        rows.append({"n": n, "method": "torch-sdpa-cpu", "ms": t * 1e3, "dense_equivalent_gflops": flops / t / 1e9})
    print(json.dumps({"torch": torch.__version__, "threads": torch.get_num_threads(),
                      "heads": a.heads, "d": a.d, "causal": causal, "repeat": a.repeat, "rows": rows}, indent=2))


if __name__ == "__main__":
    main()
