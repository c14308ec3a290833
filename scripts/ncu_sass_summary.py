#!/usr/bin/env python3
"""Where a kernel's time goes, from an Nsight Compute SASS table.

usage: scripts/ncu_sass_summary.py KERNEL_sass.csv [--seg 32]

Reads the CSV of `ncu --import R --page source --csv --print-source sass`
(scripts/gpu_planner_ncu.sh writes it) and prints, per profiled launch:
the stall samples and executed warp instructions by opcode, the hottest
runs of SEG consecutive instructions (with their first instruction, to
find them in the SASS), and the leading stall reasons.
"""
import argparse
import collections
import csv


def launches(path):
    """Yields (header, rows) for each launch in the CSV."""
    hdr, rows = None, []
    for r in csv.reader(open(path)):
        if not r:
            continue
        if r[0] == "Kernel Name":
            if hdr and rows:
                yield hdr, rows
            hdr, rows = None, []
        elif r[0] == "Address":
            hdr = {h: i for i, h in enumerate(r)}
        elif hdr:
            rows.append(r)
    if hdr and rows:
        yield hdr, rows


def num(r, ix, key):
    v = r[ix[key]] if key in ix else ""
    return int(v) if v.strip().isdigit() else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("csv")
    ap.add_argument("--seg", type=int, default=32)
    a = ap.parse_args()
    samp, inst = "Warp Stall Sampling (All Samples)", "Instructions Executed"
    seen = set()
    k = -1
    for ix, rows in launches(a.csv):
        tot = sum(num(r, ix, samp) for r in rows) or 1
        ins = sum(num(r, ix, inst) for r in rows) or 1
        if (tot, ins, len(rows)) in seen:  # ncu repeats a launch's table
            continue
        seen.add((tot, ins, len(rows)))
        k += 1
        print(f"launch {k}: {tot} stall samples, {ins} warp instructions, {len(rows)} SASS lines")
        op, opi = collections.Counter(), collections.Counter()
        for r in rows:
            w = r[1].split()
            o = (w[1] if w and w[0].startswith("@") and len(w) > 1 else (w[0] if w else "?")).split(".")[0]
            op[o] += num(r, ix, samp)
            opi[o] += num(r, ix, inst)
        for o, c in op.most_common(12):
            print(f"  {o:<8} samples {100 * c / tot:5.1f}%  instructions {100 * opi[o] / ins:5.1f}%")
        seg, segi = collections.Counter(), collections.Counter()
        for j, r in enumerate(rows):
            seg[j // a.seg] += num(r, ix, samp)
            segi[j // a.seg] += num(r, ix, inst)
        for s, c in seg.most_common(8):
            first = rows[s * a.seg][1].strip()[:50]
            print(f"  lines {s * a.seg}-{s * a.seg + a.seg - 1}: samples {100 * c / tot:.1f}%, instructions {100 * segi[s] / ins:.1f}%  ({first})")
        stalls = {h: sum(num(r, ix, h) for r in rows) for h in ix if h.startswith("stall_") and "Not Issued" not in h}
        top = sorted(stalls.items(), key=lambda x: -x[1])[:6]
        print("  stalls: " + ", ".join(f"{h[6:]} {100 * v / tot:.0f}%" for h, v in top))


if __name__ == "__main__":
    main()
