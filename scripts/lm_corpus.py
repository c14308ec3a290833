#!/usr/bin/env python3
"""Build the byte-level LM's training corpus and its two held-out texts.

usage: python3 scripts/lm_corpus.py KJV_TXT JARGON_TXT GOROOT OUTDIR REPO_TEXT_DIR

Sources (all redistributable; see workload/lm/text/LICENSE):
  KJV_TXT     the King James Bible as printed by Debian's bible-kjv
              (`bible -l 80 gen1:1-rev22:21`); public domain.
  JARGON_TXT  the Jargon File 4.4.7 (Debian's jargon-text, jargon.txt.gz
              unzipped); public domain.
  GOROOT      a Go distribution: its src/**/*.go (not testdata) and
              doc/*.html; BSD-3-Clause, The Go Authors.

Writes OUTDIR/prose.txt.gz (KJV + Jargon minus the held-out regions) and
OUTDIR/code.txt.gz (Go source and docs, at most 24 MB), and the held-out
texts REPO_TEXT_DIR/eval.txt and calib.txt: two disjoint 64 KiB + 1 byte regions
of the Jargon File's glossary, cut at line starts, that never enter
training.
"""
import gzip
import os
import sys

HELD = (64 << 10) + 1  # 64 KiB of targets after the first byte


def cut(text, start):
    """A HELD-byte region of text starting at the first line start >= start."""
    s = text.index(b"\n", start) + 1
    e = text.index(b"\n", s + HELD) + 1
    return s, e


def main():
    if len(sys.argv) != 6:
        sys.exit(__doc__)
    kjv_path, jargon_path, goroot, out, textdir = sys.argv[1:]
    kjv = open(kjv_path, "rb").read()
    jargon = open(jargon_path, "rb").read()
    es, ee = cut(jargon, 600_000)
    cs, ce = cut(jargon, 1_100_000)
    os.makedirs(out, exist_ok=True)
    os.makedirs(textdir, exist_ok=True)
    with open(os.path.join(textdir, "eval.txt"), "wb") as f:
        f.write(jargon[es:ee][:HELD])
    with open(os.path.join(textdir, "calib.txt"), "wb") as f:
        f.write(jargon[cs:ce][:HELD])
    prose = kjv + b"\n" + jargon[:es] + jargon[ee:cs] + jargon[ce:]
    with gzip.open(os.path.join(out, "prose.txt.gz"), "wb") as f:
        f.write(prose)
    files = []
    for root, dirs, names in os.walk(os.path.join(goroot, "src")):
        dirs[:] = sorted(d for d in dirs if d not in ("testdata", "vendor"))
        files += [os.path.join(root, n) for n in sorted(names) if n.endswith(".go")]
    docs = os.path.join(goroot, "doc")
    files += [os.path.join(docs, n) for n in sorted(os.listdir(docs)) if n.endswith(".html")]
    code, size = [], 0
    # every k-th file, so the 24 MB cover the whole tree
    k = 4
    for i, p in enumerate(files):
        if i % k and not p.endswith(".html"):
            continue
        b = open(p, "rb").read()
        if size + len(b) > 24 << 20:
            break
        code.append(b)
        size += len(b) + 1
    with gzip.open(os.path.join(out, "code.txt.gz"), "wb") as f:
        f.write(b"\n".join(code))
    print(f"prose {len(prose)} bytes, code {size} bytes in {len(code)} files, "
          f"eval jargon[{es}:{es + HELD}], calib jargon[{cs}:{cs + HELD}]")


if __name__ == "__main__":
    main()
