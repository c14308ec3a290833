#!/usr/bin/env python3
"""Times PyTorch's CPU scaled dot-product attention, the peer for
`sparseattn bench` on the CPU (`--peer "python3 scripts/peer_torch_cpu.py"`),
on the same shapes and thread count.

usage: peer_torch_cpu.py [--n 1024,2048] [--nq Q] [--heads H] [--kv-heads HKV]
                         [--d D] [--causal true|false] [--repeat R] [--warmup W]
                         [--threads T]

Inputs are random normal float32 tensors, q [1, H, Nq, D] and k, v
[1, HKV, N, D] (never zeros); with Nq < N the queries are the last Nq tokens
(causal masking as in `sparseattn bench --nq`). GQA repeats K and V per
query head outside the timed call. Each point is the median of --repeat
runs after --warmup runs, timed with time.perf_counter (CPU work is
synchronous). Prints one JSON object with the settings the peer ran with:
torch version and build configuration (BLAS, ISA), threads, allocator
(LD_PRELOAD), OPENBLAS_CORETYPE and the attention implementation used
(F.scaled_dot_product_attention from torch 2.0; before that the private
F._scaled_dot_product_attention of 1.13, else softmax(QKᵀ)V in plain ops).
"""
import argparse
import json
import math
import os
import statistics
import time

import torch
import torch.nn.functional as F


def attention_fn(causal_mask):
    if hasattr(F, "scaled_dot_product_attention"):
        return "F.scaled_dot_product_attention", lambda q, k, v, causal: F.scaled_dot_product_attention(
            q, k, v, attn_mask=causal_mask(q, k) if causal and q.shape[2] != k.shape[2] else None,
            is_causal=causal and q.shape[2] == k.shape[2])
    if hasattr(F, "_scaled_dot_product_attention"):  # torch 1.13: (out, weights)
        def f(q, k, v, causal):
            mask = causal_mask(q, k) if causal else None
            return F._scaled_dot_product_attention(q, k, v, mask, 0.0, False, False)[0]
        return "F._scaled_dot_product_attention (torch 1.13)", f

    def plain(q, k, v, causal):
        s = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
        if causal:
            s = s + causal_mask(q, k)
        return torch.softmax(s, dim=-1) @ v
    return "softmax(QK^T/sqrt(D))V", plain


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", default="1024,2048,4096,8192")
    ap.add_argument("--nq", type=int, default=0, help="queries: the last nq tokens; 0 = N")
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--kv-heads", type=int, default=0, help="0 = --heads")
    ap.add_argument("--d", type=int, default=128)
    ap.add_argument("--causal", default="true")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--threads", type=int, default=0, help="0 keeps torch's default")
    a = ap.parse_args()
    if a.threads:
        torch.set_num_threads(a.threads)
    causal = a.causal == "true"
    hkv = a.kv_heads or a.heads

    def causal_mask(q, k):  # additive; queries are the last Nq of N tokens
        nq, nk = q.shape[2], k.shape[2]
        i = torch.arange(nq).unsqueeze(1) + (nk - nq)
        j = torch.arange(nk).unsqueeze(0)
        return torch.zeros(nq, nk).masked_fill(j > i, float("-inf"))

    impl, attend = attention_fn(causal_mask)
    rows = []
    with torch.no_grad():
        for n in [int(x) for x in a.n.split(",")]:
            nq = a.nq or n
            g = torch.Generator().manual_seed(n)
            q = torch.randn(1, a.heads, nq, a.d, generator=g)
            k, v = (torch.randn(1, hkv, n, a.d, generator=g) for _ in range(2))
            if hkv != a.heads:
                k, v = (x.repeat_interleave(a.heads // hkv, dim=1) for x in (k, v))
            times = []
            for i in range(a.warmup + a.repeat):
                t0 = time.perf_counter()
                attend(q, k, v, causal)
                dt = time.perf_counter() - t0
                if i >= a.warmup:
                    times.append(dt)
            t = statistics.median(times)
            pairs = sum(min(n, n - nq + i + 1) for i in range(nq)) if causal else nq * n
            flops = pairs * a.heads * 2 * (a.d + a.d)
            rows.append({"n": n, "nq": nq, "method": "torch-sdpa-cpu", "ms": t * 1e3,
                         "dense_equivalent_gflops": flops / t / 1e9})
    with open("/proc/self/maps") as f:  # the BLAS library actually loaded (Debian: an alternative)
        libs = sorted({l.split()[-1] for l in f if "blas" in l.lower() and "/" in l})
    config = torch.__config__.show()
    blas = [l.strip() for l in config.splitlines() if "BLAS" in l or "CPU capability" in l]
    print(json.dumps({
        "torch": torch.__version__, "impl": impl, "threads": torch.get_num_threads(),
        "blas_and_isa": blas, "blas_libraries": libs, "mkldnn": torch.backends.mkldnn.is_available(),
        "OPENBLAS_CORETYPE": os.environ.get("OPENBLAS_CORETYPE", "(unset)"),
        "allocator": os.environ.get("LD_PRELOAD", "") or "glibc malloc (no LD_PRELOAD)",
        "heads": a.heads, "kv_heads": hkv, "d": a.d, "causal": causal, "repeat": a.repeat,
        "rows": rows}, indent=2))


if __name__ == "__main__":
    main()
