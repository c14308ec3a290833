#!/usr/bin/env python3
"""Writes small Q/K/V files with the real PyTorch, safetensors and NumPy
writers, for tensorfile's interoperability tests (tensorfile/testdata).

Element i (row-major) of every tensor is ((i*7919 + seed) % 1000 - 500) / 64,
exact in float32 and float16; bfloat16 rounds it to nearest even. The Go test
recomputes the same values. Run where torch and numpy are installed:
    python3 scripts/make_testdata.py OUTDIR
"""
import os
import sys

import numpy as np
import torch


def values(shape, seed, dtype):
    n = int(np.prod(shape))
    i = torch.arange(n, dtype=torch.int64)
    x = (((i * 7919 + seed) % 1000) - 500).to(torch.float64) / 64
    return x.reshape(shape).to(dtype)


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    # GQA in SDPA layout: q [1, 4, 9, 8], k/v [1, 2, 9, 8].
    shapes = {"q": (1, 4, 9, 8), "k": (1, 2, 9, 8), "v": (1, 2, 9, 8)}
    seeds = {"q": 1, "k": 2, "v": 3}
    try:
        from safetensors.torch import save_file
        for dt, name in ((torch.bfloat16, "bf16"), (torch.float16, "f16"), (torch.float32, "f32")):
            save_file({k: values(s, seeds[k], dt) for k, s in shapes.items()},
                      os.path.join(out, f"torch_qkv_{name}.safetensors"), metadata={"made_by": "make_testdata.py"})
    except ImportError:
        print("safetensors not installed; skipping .safetensors", file=sys.stderr)
    # NumPy: one .npy per tensor (float32, FlashAttention layout [B, N, H, D]),
    # and an .npz (float16, compressed) in SDPA layout.
    for k, s in shapes.items():
        np.save(os.path.join(out, f"numpy_{k}_bnhd.npy"),
                values(s, seeds[k], torch.float32).permute(0, 2, 1, 3).contiguous().numpy())
    np.savez_compressed(os.path.join(out, "numpy_qkv_f16.npz"),
                        **{k: values(s, seeds[k], torch.float16).numpy() for k, s in shapes.items()})
    np.save(os.path.join(out, "numpy_f64.npy"), values((3, 5), 4, torch.float64).numpy())
    print("torch", torch.__version__, "numpy", np.__version__)
    for f in sorted(os.listdir(out)):
        print(f, os.path.getsize(os.path.join(out, f)))


if __name__ == "__main__":
    main()
