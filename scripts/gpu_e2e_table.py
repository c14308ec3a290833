#!/usr/bin/env python3
"""Turns a scripts/gpu_e2e.sh run into BENCHMARKS.md's end-to-end table:
per length and causality, cuDNN, our dense, and for each method its
default and its fastest setting with rel-L1 <= 0.05 (sparsity, error,
prediction share of our dense time, speedup over cuDNN, and the run's
cost against the work it did: run / ((1 - sparsity) * our dense time),
against our fastest dense pass and, where that ran wider tiles than the
plans' blocks, against our dense pass at the plans' own blocks, the
"plan-tiles" row).

usage: python3 scripts/gpu_e2e_table.py RUN_DIR
"""
import json
import sys


def main():
    d = sys.argv[1]
    peers = {(r["n"], r["causal"]): r["ms"] for r in map(json.loads, open(f"{d}/peers.jsonl"))}
    rows = [json.loads(l) for l in open(f"{d}/ours.jsonl")]
    print("| N | causal | method | setting | sparsity | rel L1 | plan ms | total ms | plan / dense | × cuDNN | run / ((1−s)·dense) | run / ((1−s)·dense at the plan's tiles) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    keys = sorted({(r["n"], r["causal"]) for r in rows})
    for n, c in keys:
        cud = peers.get((n, c))
        # Rows of `e2e --target` settings run once, untimed, only chose the
        # setting that was timed.
        here = [r for r in rows if r["n"] == n and r["causal"] == c and not r.get("skipped") and r.get("timed", True)]
        k = f"{n // 1024}K"
        print(f"| {k} | {'yes' if c else 'no'} | cuDNN SDPA | dense | 0 | 0 | | {cud:.3f} | | 1.00 | | |")
        for m in dict.fromkeys(r["method"] for r in here):
            mine = [r for r in here if r["method"] == m]
            show = [r for r in mine if r["knob"] in ("default", "plan-tiles")]
            ok = [r for r in mine if r["rel_l1"] <= 0.05]
            if ok:
                best = min(ok, key=lambda r: r["total_ms"])
                if best not in show:
                    show.append(best)
            if m == "dense":
                show.sort(key=lambda r: r["knob"])
            elif not ok:
                show.append({**min(mine, key=lambda r: r["rel_l1"]), "note": " (least error; none ≤ 0.05)"})
            for r in show:
                work = (1 - r["sparsity"]) * r.get("dense_ms", 0)
                cost = f"{r['run_ms'] / work:.2f}" if m != "dense" and work > 0 and r["sparsity"] > 0 else ""
                tw = (1 - r["sparsity"]) * r.get("tile_dense_ms", 0)
                tcost = f"{r['run_ms'] / tw:.2f}" if m != "dense" and tw > 0 and r["sparsity"] > 0 else ""
                blocks = f", {r['block_q']}×{r['block_k']}" if "block_k" in r else ""
                print(f"| {k} | {'yes' if c else 'no'} | {m} | {r['knob']}{blocks}{r.get('note', '')} | {r['sparsity']:.3f} | {r['rel_l1']:.3g} | "
                      f"{r['plan_ms']:.3f} | {r['total_ms']:.3f} | {r['plan_share']:.2%} | {cud / r['total_ms']:.2f} | {cost} | {tcost} |")


if __name__ == "__main__":
    main()
