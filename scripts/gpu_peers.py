#!/usr/bin/env python3
"""Times PyTorch's attention on the GPU for the peer table: SDPA with the
cuDNN and flash (FlashAttention-2) backends, and flex_attention with the
block masks `sparseattn gpubench --mask-dir` wrote (the same masks our
kernels ran). Prints one JSON object per line, like gpubench.

    python3 scripts/gpu_peers.py --n 8192,32768 --mask-dir /tmp/masks
"""
import argparse
import json
import os
import sys

import numpy as np
import torch
import triton.testing
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.nn.attention.flex_attention import BlockMask, flex_attention


def causal_mod(b, h, q, kv):
    return q >= kv


def block_mask(path, heads, n, block, causal, dev):
    """Our uint8 [H, QB, KB] mask as a flex BlockMask: blocks on the causal
    diagonal are partial (mask_mod applies), the others full."""
    qb = kb = n // block
    m = torch.from_numpy(np.fromfile(path, dtype=np.uint8).reshape(heads, qb, kb)).to(dev).bool()
    if causal:
        diag = torch.eye(qb, kb, dtype=torch.bool, device=dev)
        partial, full = m & diag, m & ~diag
    else:
        partial, full = torch.zeros_like(m), m

    def kv(x):
        num = x.sum(-1, dtype=torch.int32)
        idx = torch.argsort(x.to(torch.int8), dim=-1, descending=True, stable=True).to(torch.int32)
        return num[None].contiguous(), idx[None].contiguous()

    pn, pi = kv(partial)
    fn, fi = kv(full)
    return BlockMask.from_kv_blocks(pn, pi, fn, fi, BLOCK_SIZE=block,
                                    mask_mod=causal_mod if causal else None, seq_lengths=(n, n))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", default="8192,16384,32768,65536,131072")
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--d", type=int, default=128)
    ap.add_argument("--block", type=int, default=128)
    ap.add_argument("--causal", default="both")
    ap.add_argument("--densities", default="1,0.5,0.25,0.1")
    ap.add_argument("--mask-dir", required=True)
    ap.add_argument("--rep-ms", type=float, default=300)
    a = ap.parse_args()
    dev = "cuda"
    name = torch.cuda.get_device_name()
    # One compiled kernel per (N, mask_mod): raise dynamo's recompile limit
    # (8 by default), past which it silently runs the unfused fallback.
    torch._dynamo.config.recompile_limit = 64
    torch._dynamo.config.cache_size_limit = 64
    flex = torch.compile(flex_attention, dynamic=False)
    causals = {"both": [False, True], "true": [True], "false": [False]}[a.causal]
    for n in [int(x) for x in a.n.split(",")]:
        g = torch.Generator(device=dev).manual_seed(n)
        q, k, v = (torch.randn(1, a.heads, n, a.d, device=dev, dtype=torch.bfloat16, generator=g) for _ in range(3))
        for causal in causals:
            flops = 4 * n * n * a.d * a.heads * (0.5 if causal else 1)

            def emit(impl, density, fn):
                try:
                    ms = triton.testing.do_bench(fn, warmup=max(25, a.rep_ms / 10), rep=a.rep_ms, return_mode="median")
                except Exception as e:  # report, keep going
                    print(f"{impl} N={n} causal={causal} d={density}: {type(e).__name__}: {e}", file=sys.stderr)
                    return
                print(json.dumps({"impl": impl, "n": n, "heads": a.heads, "d": a.d, "causal": causal, "density": density,
                                  "ms": ms, "tflops": flops / ms / 1e9, "device": name}), flush=True)

            for impl, backend in (("sdpa-cudnn", SDPBackend.CUDNN_ATTENTION), ("sdpa-flash", SDPBackend.FLASH_ATTENTION)):
                def run(backend=backend):
                    with sdpa_kernel([backend]):
                        return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
                emit(impl, 1.0, run)
            for dn in [float(x) for x in a.densities.split(",")]:
                path = os.path.join(a.mask_dir, f"mask_n{n}_c{int(causal)}_d{dn:g}.u8")
                if not os.path.exists(path):
                    print(f"missing {path}", file=sys.stderr)
                    continue
                bm = block_mask(path, a.heads, n, a.block, causal, dev)
                emit("flex" if dn < 1 else "flex-dense", dn, lambda bm=bm: flex(q, k, v, block_mask=bm))
                del bm
        del q, k, v
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
