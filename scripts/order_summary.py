#!/usr/bin/env python3
"""Summarizes scripts/order_ablation.sh's eval JSON: per token order, Sim-q,
Sim-k, and for SpargeAttn and the exact-TopCdf oracle the sparsity reached at
fixed rel-L1 budgets, linearly interpolated along the TopCdf τ sweep (sparsity
and L1 both fall as τ rises), so orders are compared at equal error.

    python3 scripts/order_summary.py DIR_WITH_json/   (or json.tar.gz)
"""
import glob, io, json, os, sys, tarfile

def load(path):
    docs = {}
    if path.endswith(".tar.gz"):
        with tarfile.open(path) as tf:
            for m in tf.getmembers():
                if m.isfile() and m.name.endswith(".json"):
                    docs[os.path.basename(m.name)] = json.load(tf.extractfile(m))
    else:
        for p in glob.glob(os.path.join(path, "order_*_tau_*.json")):
            docs[os.path.basename(p)] = json.load(open(p))
    return docs

def at_l1(pts, budget):
    """Sparsity at rel L1 = budget, interpolated, as text: ">=s" when the
    budget lies above the sweep's largest error (s then bounds it from
    below), "-" when below its smallest."""
    pts = sorted(pts, key=lambda p: (p[2], p[1]))  # by L1
    for (t0, s0, l0), (t1, s1, l1) in zip(pts, pts[1:]):
        if l0 <= budget <= l1 and l1 > l0:
            return f"{s0 + (budget - l0) / (l1 - l0) * (s1 - s0):.3f}"
    if pts and pts[-1][2] <= budget:
        return f">={pts[-1][1]:.3f}"
    return "-"

def main():
    docs = load(sys.argv[1])
    budgets = [0.02, 0.03, 0.05]
    rows, sims, header = {}, {}, None
    for name, r in docs.items():
        order, tau = name[len("order_"):-len(".json")].split("_tau_")
        s = r["similarity"]
        sims[order] = (s.get("ordered_sim_q", s["input_sim_q"]), s.get("ordered_sim_k", s["input_sim_k"]))
        g = r["geometry"]
        header = f"{r['source']}: Hq={g['hq']} N={g['nq']} D={g['d']}; Sim over Q blocks of {s['block_q']}, K blocks of {s['block_k']}"
        for m in r["methods"]:
            base = m["method"].split("+")[0]
            if base in ("sparge", "oracle"):
                rows.setdefault((order, base), []).append((float(tau), m["sparsity"], m["rel_l1"]))
    print(header)
    cols = " ".join(f"{'sp@L1=' + str(b):>11}" for b in budgets)
    print(f"{'order':8} {'Sim-q':>6} {'Sim-k':>6} {'method':7} {cols}   sweep τ: sparsity/L1")
    for order in ("row", "column", "time", "hilbert", "random"):
        if order not in sims:
            continue
        for meth in ("sparge", "oracle"):
            pts = sorted(rows.get((order, meth), []))
            vals = []
            for b in budgets:
                vals.append(f"{at_l1(pts, b):>11}")
            sweep = " ".join(f"{t}:{s:.3f}/{l:.4f}" for t, s, l in pts)
            print(f"{order:8} {sims[order][0]:>6.3f} {sims[order][1]:>6.3f} {meth:7} {' '.join(vals)}   {sweep}")

main()
