#!/usr/bin/env python3
"""Times cuDNN SDPA (PyTorch, tensors already on the GPU) for the
end-to-end table that `sparseattn e2e` fills: B=1, GQA heads, bf16, causal
and not. K and V are expanded to the query heads before timing (cuDNN's
dense work is the same). Prints one JSON object per line.

usage: python3 scripts/gpu_e2e_peers.py [--n 8192,16384] [--hq 32] [--hkv 8] [--d 128]
"""
import argparse
import json

import torch
import triton.testing
from torch.nn.attention import SDPBackend, sdpa_kernel


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", default="8192,16384,32768,65536,131072")
    ap.add_argument("--hq", type=int, default=32)
    ap.add_argument("--hkv", type=int, default=8)
    ap.add_argument("--d", type=int, default=128)
    ap.add_argument("--rep-ms", type=float, default=300)
    a = ap.parse_args()
    name = torch.cuda.get_device_name()
    for n in [int(x) for x in a.n.split(",")]:
        g = torch.Generator(device="cuda").manual_seed(n)
        q = torch.randn(1, a.hq, n, a.d, device="cuda", dtype=torch.bfloat16, generator=g)
        k = torch.randn(1, a.hkv, n, a.d, device="cuda", dtype=torch.bfloat16, generator=g)
        v = torch.randn(1, a.hkv, n, a.d, device="cuda", dtype=torch.bfloat16, generator=g)
        k = k.repeat_interleave(a.hq // a.hkv, dim=1)
        v = v.repeat_interleave(a.hq // a.hkv, dim=1)
        for causal in (False, True):
            with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                f = lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
                ms = triton.testing.do_bench(f, rep=a.rep_ms, return_mode="median")
            flops = 4 * n * n * a.d * a.hq / (2 if causal else 1)
            print(json.dumps({"impl": "cudnn", "n": n, "causal": causal, "ms": ms,
                              "tflops": flops / ms / 1e9, "device": name}), flush=True)
        del q, k, v
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
