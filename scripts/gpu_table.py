#!/usr/bin/env python3
"""Merges gpubench and gpu_peers.py JSON lines into the GPU peer tables
(markdown): dense against cuDNN, FA2 and flex_attention, and block-sparse
against flex_attention with the same mask.

    python3 scripts/gpu_table.py ours.jsonl peers.jsonl
"""
import json
import sys

rows = [json.loads(l) for f in sys.argv[1:] for l in open(f) if l.startswith("{")]
by = {(r["impl"], r["n"], r["causal"], r["density"]): r for r in rows}
keys = sorted({(r["n"], r["causal"]) for r in rows})
dens = sorted({r["density"] for r in rows if r["density"] < 1}, reverse=True)
dev = next((r["device"] for r in rows if "device" in r), "?")


def get(impl, n, c, d=1.0):
    return by.get((impl, n, c, d))


def cell(r):
    return f"{r['ms']:.2f} ({r['tflops']:.0f})" if r else "-"


print(f"Device: {dev}. B=1, H=32, D=128, bf16; ms (TFLOPs, dense-equivalent for sparse), median.\n")
print("| N | causal | ours dense | SDPA cuDNN | SDPA flash (FA2) | flex dense | ours/cuDNN | ours/FA2 |")
print("|---|---|---|---|---|---|---|---|")
for n, c in keys:
    o, cu, fa, fx = get("ours-dense", n, c), get("sdpa-cudnn", n, c), get("sdpa-flash", n, c), get("flex-dense", n, c)
    r1 = f"{o['tflops'] / cu['tflops']:.2f}" if o and cu else "-"
    r2 = f"{o['tflops'] / fa['tflops']:.2f}" if o and fa else "-"
    print(f"| {n // 1024}K | {'yes' if c else 'no'} | {cell(o)} | {cell(cu)} | {cell(fa)} | {cell(fx)} | {r1} | {r2} |")

print("\nBlock-sparse, random 128×128 block masks (the same mask for both), ms. "
      "d = kept fraction of visible blocks from our device counters; "
      "cost = ours sparse / (d × ours dense), target ≤ 1.15 plus the plan's upload: "
      "limit = 1.15 × d × ours dense + upload, met when ours sparse ≤ limit; flex/ours > 1 means ours is faster.\n")
print("| N | causal | density | d (counters) | ours sparse | cost vs d×dense | plan upload ms | limit ms | met | flex | flex/ours |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
for n, c in keys:
    o = get("ours-dense", n, c)
    for dn in dens:
        s, f = get("ours-sparse", n, c, dn), get("flex", n, c, dn)
        if not s:
            continue
        d = 1 - s["sparsity"]
        cost, limit, met = "-", "-", "-"
        if o:
            cost = f"{s['ms'] / (d * o['ms']):.2f}"
            lim = 1.15 * d * o["ms"] + s["plan_upload_ms"]
            limit, met = f"{lim:.3f}", ("yes" if s["ms"] <= lim else "no")
        fm = f"{f['ms']:.2f}" if f else "-"
        sp = f"{f['ms'] / s['ms']:.2f}" if f else "-"
        print(f"| {n // 1024}K | {'yes' if c else 'no'} | {dn:g} | {d:.3f} | {s['ms']:.3f} | {cost} | {s['plan_upload_ms']:.2f} | {limit} | {met} | {fm} | {sp} |")
