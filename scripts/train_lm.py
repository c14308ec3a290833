#!/usr/bin/env python3
"""Train the small byte-level LM that workload/lm embeds, and export it.

usage: python3 scripts/train_lm.py --data bin/lm --text workload/lm/text --out OUTDIR
           [--train-seconds 450] [--seed 1]

--data holds prose.txt.gz and code.txt.gz (scripts/lm_corpus.py writes
them); --text holds the held-out eval.txt and calib.txt. Needs PyTorch
and one CUDA GPU (bf16, flash SDPA). Training stops by wall clock after
--train-seconds, then the script quantizes the weights (int8, one float32
scale per row), measures bits per byte of the quantized model in float32
at 1K/4K/16K/32K tokens of context on both held-out texts, and writes

  OUTDIR/lm.bin          the weights in workload/lm's format (see its doc)
  OUTDIR/reference.json  logits and bits per byte of the quantized model,
                         the fixture workload/lm's tests compare against
  OUTDIR/train_log.json  config, steps, tokens, losses, bpb table

Model: byte vocabulary (256), 4 pre-norm (RMSNorm) layers, d_model 256,
4 heads of dim 64, RoPE (rotate-half, base 10000) on Q and K, SwiGLU MLP
(hidden 768), tied input/output embedding. Sequences of 1K/4K/16K/32K
tokens are mixed in every phase of training, so the model is trained at
every length it is evaluated at.
"""
import argparse
import gzip
import json
import math
import os
import struct
import time
import zlib

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

CFG = dict(vocab=256, d_model=256, n_layers=4, n_heads=4, n_kv_heads=4,
           head_dim=64, hidden=768, rope_base=10000.0, norm_eps=1e-5)
LENGTHS = [1024, 4096, 16384, 32768]
LENGTH_P = [0.10, 0.45, 0.15, 0.30]
STEP_TOKENS = 1 << 17


class RMSNorm(nn.Module):
    def __init__(self, d, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))
        self.eps = eps

    def forward(self, x):
        xf = x.float()
        y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return (y * self.weight).to(x.dtype)


def rope_tables(n, dim, base, device):
    inv = base ** (-torch.arange(0, dim // 2, dtype=torch.float64, device=device) * 2 / dim)
    ang = torch.arange(n, dtype=torch.float64, device=device)[:, None] * inv[None, :]
    return torch.cos(ang).float(), torch.sin(ang).float()


def rope(x, cos, sin):
    h = x.shape[-1] // 2
    x1, x2 = x[..., :h], x[..., h:]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], -1)


class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        d, h, hk, dh = c["d_model"], c["n_heads"], c["n_kv_heads"], c["head_dim"]
        self.h, self.hk, self.dh = h, hk, dh
        self.attn_norm = RMSNorm(d, c["norm_eps"])
        self.wq = nn.Linear(d, h * dh, bias=False)
        self.wk = nn.Linear(d, hk * dh, bias=False)
        self.wv = nn.Linear(d, hk * dh, bias=False)
        self.wo = nn.Linear(h * dh, d, bias=False)
        self.mlp_norm = RMSNorm(d, c["norm_eps"])
        self.w1 = nn.Linear(d, c["hidden"], bias=False)
        self.w3 = nn.Linear(d, c["hidden"], bias=False)
        self.w2 = nn.Linear(c["hidden"], d, bias=False)

    def forward(self, x, cos, sin):
        b, t, _ = x.shape
        a = self.attn_norm(x)
        q = self.wq(a).view(b, t, self.h, self.dh).transpose(1, 2)
        k = self.wk(a).view(b, t, self.hk, self.dh).transpose(1, 2)
        v = self.wv(a).view(b, t, self.hk, self.dh).transpose(1, 2)
        q = rope(q.float(), cos, sin).to(v.dtype)
        k = rope(k.float(), cos, sin).to(v.dtype)
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=self.hk != self.h)
        x = x + self.wo(o.transpose(1, 2).reshape(b, t, self.h * self.dh))
        m = self.mlp_norm(x)
        return x + self.w2(F.silu(self.w1(m)) * self.w3(m))


class LM(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c
        self.emb = nn.Embedding(c["vocab"], c["d_model"])
        nn.init.normal_(self.emb.weight, std=0.02)
        self.blocks = nn.ModuleList(Block(c) for _ in range(c["n_layers"]))
        self.norm = RMSNorm(c["d_model"], c["norm_eps"])
        for blk in self.blocks:  # residual branches start small
            for w in (blk.wo.weight, blk.w2.weight):
                w.data.mul_(1 / math.sqrt(2 * c["n_layers"]))

    def forward(self, idx):
        t = idx.shape[1]
        cos, sin = rope_tables(t, self.c["head_dim"], self.c["rope_base"], idx.device)
        x = self.emb(idx)
        for blk in self.blocks:
            x = blk(x, cos, sin)
        return F.linear(self.norm(x), self.emb.weight.to(x.dtype))


def quantize_(model):
    """Round every matrix to int8 with a float32 scale per row, in place;
    return {name: (scales, int8 rows)} for export."""
    out = {}
    for name, p in model.named_parameters():
        if p.dim() != 2:
            continue
        w = p.data.float()
        scale = w.abs().amax(1).clamp_min(1e-12) / 127
        q = torch.round(w / scale[:, None]).clamp(-127, 127)
        p.data.copy_(q * scale[:, None])
        out[name] = (scale.cpu().numpy().astype("<f4"), q.to(torch.int8).cpu().numpy())
    return out


def export(model, quant, path):
    c = model.c
    buf = bytearray(b"SALMv1\0\0")
    buf += struct.pack("<8I", c["vocab"], c["d_model"], c["n_layers"], c["n_heads"],
                       c["n_kv_heads"], c["head_dim"], c["hidden"], 0)
    buf += struct.pack("<2f", c["rope_base"], c["norm_eps"])

    def mat(name):
        s, q = quant[name]
        buf.extend(s.tobytes())
        buf.extend(q.astype(np.int8).tobytes())

    def vec(t):
        buf.extend(t.detach().float().cpu().numpy().astype("<f4").tobytes())

    mat("emb.weight")
    for i, blk in enumerate(model.blocks):
        p = f"blocks.{i}."
        vec(blk.attn_norm.weight)
        for n in ("wq", "wk", "wv", "wo"):
            mat(p + n + ".weight")
        vec(blk.mlp_norm.weight)
        for n in ("w1", "w3", "w2"):
            mat(p + n + ".weight")
    vec(model.norm.weight)
    buf += struct.pack("<I", zlib.crc32(bytes(buf)) & 0xFFFFFFFF)
    with open(path, "wb") as f:
        f.write(buf)
    return len(buf)


@torch.no_grad()
def bpb(model, data, ctx, amp):
    """Bits per byte over every byte after the first: non-overlapping
    windows of ctx tokens, each predicting its next ctx bytes."""
    n = (len(data) - 1) // ctx
    total = 0.0
    for j in range(n):
        x = data[j * ctx: j * ctx + ctx + 1].long()[None]
        with torch.autocast("cuda", torch.bfloat16, enabled=amp):
            logits = model(x[:, :-1])
        total += F.cross_entropy(logits.float()[0], x[0, 1:], reduction="sum").item()
    return total / (n * ctx) / math.log(2)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", required=True)
    ap.add_argument("--text", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--train-seconds", type=float, default=450)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    t0 = time.time()
    torch.manual_seed(a.seed)
    gen = np.random.default_rng(a.seed)
    dev = "cuda"
    os.makedirs(a.out, exist_ok=True)

    def load(name):
        with gzip.open(os.path.join(a.data, name)) as f:
            return torch.from_numpy(np.frombuffer(f.read(), np.uint8).copy()).to(dev)

    domains = [load("prose.txt.gz"), load("code.txt.gz")]
    texts = {}
    for n in ("eval", "calib"):
        with open(os.path.join(a.text, n + ".txt"), "rb") as f:
            texts[n] = torch.from_numpy(np.frombuffer(f.read(), np.uint8).copy()).to(dev)
    model = LM(CFG).to(dev)
    decay = [p for p in model.parameters() if p.dim() == 2]
    other = [p for p in model.parameters() if p.dim() != 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": other, "weight_decay": 0.0}],
                            lr=a.lr, betas=(0.9, 0.95), fused=True)
    nparams = sum(p.numel() for p in model.parameters())
    print(f"params {nparams}, setup {time.time() - t0:.1f}s", flush=True)
    log, step, tokens, ema = [], 0, 0, None
    start = time.time()
    while True:
        frac = (time.time() - start) / a.train_seconds
        if frac >= 1:
            break
        lr = a.lr * min(1.0, (step + 1) / 100) * (0.1 + 0.45 * (1 + math.cos(math.pi * frac)))
        for g in opt.param_groups:
            g["lr"] = lr
        ctx = int(gen.choice(LENGTHS, p=LENGTH_P))
        bs = STEP_TOKENS // ctx
        src = domains[0] if gen.random() < 0.6 else domains[1]
        off = torch.from_numpy(gen.integers(0, len(src) - ctx - 1, bs)).to(dev)
        x = src[off[:, None] + torch.arange(ctx + 1, device=dev)].long()
        with torch.autocast("cuda", torch.bfloat16):
            logits = model(x[:, :-1])
        loss = F.cross_entropy(logits.float().view(-1, 256), x[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        tokens += bs * ctx
        if step % 50 == 0:
            l = loss.item() / math.log(2)
            ema = l if ema is None else 0.9 * ema + 0.1 * l
            log.append(dict(step=step, t=round(time.time() - start, 1), ctx=ctx, bpb=round(l, 4), lr=lr))
            print(f"step {step} t {time.time() - start:.0f}s ctx {ctx} train bpb {l:.3f} (ema {ema:.3f}) lr {lr:.2e}", flush=True)
    train_s = time.time() - start
    model.eval()
    table = {}
    for n, d in texts.items():
        table[n + "_bf16"] = {L: round(bpb(model, d, L, True), 4) for L in LENGTHS}
    print("bf16 (unquantized)", table, flush=True)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    model.float()
    quant = quantize_(model)
    size = export(model, quant, os.path.join(a.out, "lm.bin"))
    for n, d in texts.items():
        table[n + "_int8_fp32"] = {L: round(bpb(model, d, L, False), 4) for L in LENGTHS}
    print("int8 weights, float32 compute", table, flush=True)
    with torch.no_grad():
        x = texts["eval"][:513].long()[None]
        logits = model(x[:, :-1])[0]
        pos = list(range(0, 512, 37)) + [511]
        ref = dict(
            text="eval.txt", tokens=512, positions=pos,
            logits=[[round(v, 5) for v in logits[p].tolist()] for p in pos],
            bpb_512=F.cross_entropy(logits, x[0, 1:]).item() / math.log(2),
            bpb_4096=bpb(model, texts["eval"][:4097], 4096, False),
            bpb_eval=table["eval_int8_fp32"])
    with open(os.path.join(a.out, "reference.json"), "w") as f:
        json.dump(ref, f)
    summary = dict(config=CFG, params=nparams, weights_bytes=size, steps=step, tokens=tokens,
                   train_seconds=round(train_s, 1), total_seconds=round(time.time() - t0, 1),
                   lengths=LENGTHS, length_p=LENGTH_P, step_tokens=STEP_TOKENS, lr=a.lr,
                   seed=a.seed, device=torch.cuda.get_device_name(), torch=torch.__version__,
                   bpb=table, log=log)
    with open(os.path.join(a.out, "train_log.json"), "w") as f:
        json.dump(summary, f, indent=1)
    print(json.dumps({k: v for k, v in summary.items() if k != "log"}), flush=True)


if __name__ == "__main__":
    main()
