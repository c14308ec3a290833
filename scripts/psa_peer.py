#!/usr/bin/env python3
"""Times the PSA authors' public Triton kernels (ziplab/Pyramid-Sparse-Attention,
package psa_triton, plug-and-play PSAAttention with its default config) as a
peer for our PSA rows, with cuDNN SDPA dense in the same run. The package is
not part of this repository: pass the folder that holds psa_triton/ (a copy
of the repository's src/ directory, carried to the GPU machine).

PSAAttention is non-causal and takes K and V with as many heads as Q, so K
and V are expanded from Hkv to Hq heads first (the dense work is the same).
Inputs are random normal bf16 (never zeros). Its default mask mode is top-k
with fixed per-level quotas (10% of the KV blocks at full resolution, 5%
pooled 2x, 20% pooled 8x, the rest skipped), so the work it does does not
depend on the values: "work" below is that share of a dense pass,
sum over levels of quota / pooling. Reported per N, medians of
triton.testing.do_bench:
  psa_total   estimation (sampled pooling attention, mask) plus the kernel
  psa_kernel  the sparse kernel alone, on a mask computed once
  cudnn       SDPA dense, non-causal
with the output's rel-L1 against dense SDPA on these random inputs. Prints
one JSON object per line.

usage: python3 scripts/psa_peer.py --psa-path DIR [--n 16384,32768] [--hq 32] [--hkv 8] [--d 128]
"""
import argparse
import json
import sys
import types


def import_psa(path):
    sys.path.insert(0, path)
    try:
        import einops  # noqa: F401  (only its video pipeline needs it)
    except ImportError:
        stub = types.ModuleType("einops")

        def rearrange(*_a, **_k):
            raise NotImplementedError("einops is not installed")

        stub.rearrange = rearrange
        sys.modules["einops"] = stub
    import psa_triton.attention as attn
    return attn


def work_share(ratios):
    """The share of a dense pass the config's quotas do: a level pooled p
    times scores 1/p of its blocks' keys; level 0 skips."""
    return sum((hi - lo) / p for p, (lo, hi) in ratios.items() if p > 0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--psa-path", required=True, help="folder holding the psa_triton package")
    ap.add_argument("--n", default="16384,32768")
    ap.add_argument("--hq", type=int, default=32)
    ap.add_argument("--hkv", type=int, default=8)
    ap.add_argument("--d", type=int, default=128)
    ap.add_argument("--rep-ms", type=float, default=300)
    a = ap.parse_args()

    import torch
    import triton.testing
    from torch.nn.attention import SDPBackend, sdpa_kernel

    attn = import_psa(a.psa_path)
    name = torch.cuda.get_device_name()
    cfg = attn.PSAConfig()
    share = work_share(cfg.mask_ratios)
    for n in [int(x) for x in a.n.split(",")]:
        g = torch.Generator(device="cuda").manual_seed(n)
        q = torch.randn(1, a.hq, n, a.d, device="cuda", dtype=torch.bfloat16, generator=g)
        k = torch.randn(1, a.hkv, n, a.d, device="cuda", dtype=torch.bfloat16, generator=g)
        v = torch.randn(1, a.hkv, n, a.d, device="cuda", dtype=torch.bfloat16, generator=g)
        k = k.repeat_interleave(a.hq // a.hkv, dim=1).contiguous()
        v = v.repeat_interleave(a.hq // a.hkv, dim=1).contiguous()
        base = {"n": n, "causal": False, "hq": a.hq, "hkv": a.hkv, "d": a.d, "device": name}

        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            dense = torch.nn.functional.scaled_dot_product_attention(q, k, v)
            ms = triton.testing.do_bench(lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v),
                                         rep=a.rep_ms, return_mode="median")
        print(json.dumps({**base, "impl": "cudnn", "ms": ms, "work": 1.0}), flush=True)

        psa = attn.PSAAttention(cfg)
        out = psa(q, k, v)
        rel = ((out.float() - dense.float()).abs().sum() / dense.float().abs().sum()).item()
        ms = triton.testing.do_bench(lambda: psa(q, k, v), rep=a.rep_ms, return_mode="median")
        print(json.dumps({**base, "impl": "psa_total", "ms": ms, "work": share, "rel_l1": rel}), flush=True)

        with torch.no_grad():
            pooling, _ = attn._compute_attention_pooling(q, k, v, cfg)
            mask = attn.transfer_attn_to_mask(pooling, cfg.mask_ratios, text_length=0,
                                              mode=f"{cfg.mask_mode}_newtype", blocksize=cfg.block_n,
                                              compute_tile=cfg.tile_n)
        ms = triton.testing.do_bench(lambda: psa.sparse_attention_fn(q, k, v, mask, None),
                                     rep=a.rep_ms, return_mode="median")
        print(json.dumps({**base, "impl": "psa_kernel", "ms": ms, "work": share}), flush=True)
        del q, k, v, dense, out, mask, pooling
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
