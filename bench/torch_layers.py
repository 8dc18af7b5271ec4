#!/usr/bin/env python3
"""PyTorch peers of moec's MoE, MoA, MH-MoE and MAE layers, for throughput,
on the CPU (bench/cpu_layers_vs_torch.sh) or a GPU (the GPU pack's
layers.sh: --device cuda --dtype bf16 --compile --cublas-flops F).

Each layer runs as the sublayer of a pre-norm block, x + layer(LayerNorm(x)),
as moec attributes it to the layer's statement (`moec train --profile`: the
norm, the layer, its auxiliary losses and the residual add), on x of
[batch, seq, d] in training mode. Routed experts run as their authors' code
runs them: a loop over experts with an index gather and an index_add
combine. Prints the mean ms of the forward pass (autograd recording, as in
training) and of the forward and backward passes (gradients of x and every
parameter) after two warm-up calls; with --compile the same under
torch.compile (PyTorch 2), with --cublas-flops F a plain [batch * seq, d] x
[d, n] matrix product scaled to F FLOPs.

- moe: tokens choose their top-k experts (raw softmax gates, no capacity),
  GELU (tanh) experts of width `hidden` with biases; the balance loss over
  all slots and the router z-loss.

- moa: router, top-k of E experts with raw gates, per-expert query and
  output projections of width head_dim, one shared key and value head,
  causal attention; the switch balance loss and the router z-loss.
- mh_moe: the multi-head layer Linear(d, d), the split into `heads`
  sub-tokens, top-k routing with Tutel's capacity k * ceil(S / E) (first
  choices ahead of second ones), SwiGLU experts, the merge layer
  Linear(d, d); the top-1 GShard balance loss.
- mae: causal multi-head attention whose head j is scaled by
  s_j = h (1 - g_j) / (h - 1), g from the gate BatchNorm -> Linear -> tanh
  -> dropout -> Linear -> softmax over the prefix mean of the input.
"""
import argparse
import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


def causal_attention(q, k, v, scale, past=0):
    """q [b, h, sq, dh], k and v [b, h, s, dh]; torch 1.13 has no fused
    attention, so the papers' form. The last s - past keys are the queries'
    positions (past > 0 when decoding with a cache), each of them asked by
    sq / (s - past) consecutive rows of q (MoA's k routed queries)."""
    s = k.shape[-2]
    new = s - past
    rows = q.shape[-2] // new
    scores = (q @ k.transpose(-1, -2)) * scale
    mask = torch.ones(new, s, dtype=torch.bool, device=q.device).triu(past + 1)
    mask = mask.repeat_interleave(rows, dim=0)
    return scores.masked_fill(mask, float("-inf")).softmax(-1) @ v


def cached(cache, k, v):
    """Keys and values [.., s, dh] after those of earlier positions in
    `cache` (a dict kept between decoding steps; None outside decoding),
    and how many positions came before."""
    if cache is None:
        return k, v, 0
    past = 0
    if "k" in cache:
        past = cache["k"].shape[-2]
        k, v = torch.cat([cache["k"], k], -2), torch.cat([cache["v"], v], -2)
    cache["k"], cache["v"] = k, v
    return k, v, past


def per_expert(*stacked):
    """Each stacked [E, ...] parameter as a tuple of its E slices. Indexing
    the stacked tensor per expert (w[e]) would make autograd build a
    full-size zero gradient for every slice (select's backward) and add them
    up, E times the parameter's size per step; unbind's backward stacks the
    slices' gradients once, as separate per-expert parameters (the papers'
    nn.ModuleList of experts) would."""
    return [p.unbind(0) for p in stacked]

class MoA(nn.Module):
    def __init__(self, d, experts, k, head_dim):
        super().__init__()
        self.k, self.dh, self.E = k, head_dim, experts
        self.router = nn.Linear(d, experts, bias=False)
        self.wq = nn.Parameter(torch.randn(experts, d, head_dim) * d**-0.5)
        self.wo = nn.Parameter(torch.randn(experts, head_dim, d) * head_dim**-0.5)
        self.wk = nn.Linear(d, head_dim, bias=False)
        self.wv = nn.Linear(d, head_dim, bias=False)

    def forward(self, x, cache=None):
        b, s, d = x.shape
        n = b * s
        flat_x = x.reshape(n, d)
        logits = self.router(flat_x)
        probs = logits.softmax(-1)
        gates, experts = probs.topk(self.k, dim=-1)
        flat = experts.reshape(-1)
        token = torch.arange(n, device=x.device).repeat_interleave(self.k)
        picks = [(flat == e).nonzero(as_tuple=True)[0] for e in range(self.E)]
        wqs, wos = per_expert(self.wq, self.wo)
        q = x.new_zeros(n * self.k, self.dh)
        for e, pick in enumerate(picks):
            q = q.index_add(0, pick, flat_x[token[pick]] @ wqs[e])
        q = q.reshape(b, 1, s * self.k, self.dh)
        keys, values, past = cached(cache, self.wk(x).unsqueeze(1),
                                    self.wv(x).unsqueeze(1))
        context = causal_attention(q, keys, values, self.dh**-0.5, past)
        context = context.reshape(n * self.k, self.dh) * gates.reshape(-1, 1)
        y = x.new_zeros(n, d)
        for e, pick in enumerate(picks):
            y = y.index_add(0, token[pick], context[pick] @ wos[e])
        if cache is not None:  # decoding: no losses, as in moec's decode
            return y.reshape(b, s, d), None
        share = torch.bincount(flat, minlength=self.E).float() / flat.numel()
        balance = self.E * (share * probs.mean(0)).sum()
        z = torch.logsumexp(logits, -1).pow(2).mean()
        return y.reshape(b, s, d), 0.01 * balance + 0.001 * z


class MoE(nn.Module):
    """Tokens choose their top-k experts (raw softmax gates, no capacity),
    GELU (tanh) experts; the Switch balance loss over all slots and the
    router z-loss (None with losses=False: decoding computes none, as
    moec's decode program does not)."""

    def __init__(self, d, experts, k, hidden):
        super().__init__()
        self.k, self.E = k, experts
        self.router = nn.Linear(d, experts, bias=False)
        self.w1 = nn.Parameter(torch.randn(experts, d, hidden) * d**-0.5)
        self.b1 = nn.Parameter(torch.zeros(experts, hidden))
        self.w2 = nn.Parameter(torch.randn(experts, hidden, d) * hidden**-0.5)
        self.b2 = nn.Parameter(torch.zeros(experts, d))

    def forward(self, x, losses=True):
        b, s, d = x.shape
        flat_x = x.reshape(-1, d)
        logits = self.router(flat_x)
        probs = logits.float().softmax(-1)
        gates, index = probs.topk(self.k, dim=-1)
        y = torch.zeros_like(flat_x)
        w1s, b1s, w2s, b2s = per_expert(self.w1, self.b1, self.w2, self.b2)
        for e in range(self.E):
            rows, ranks = (index == e).nonzero(as_tuple=True)
            if rows.numel() == 0:
                continue
            h = F.gelu(flat_x[rows] @ w1s[e] + b1s[e], approximate="tanh")
            out = (h @ w2s[e] + b2s[e]) * gates[rows, ranks, None].to(x.dtype)
            y = y.index_add(0, rows, out)
        if not losses:
            return y.reshape(b, s, d), None
        share = F.one_hot(index, self.E).float().mean((0, 1))
        balance = self.E * (share * probs.mean(0)).sum()
        z = torch.logsumexp(logits.float(), -1).pow(2).mean()
        return y.reshape(b, s, d), 0.01 * balance + 0.001 * z


class MhMoE(nn.Module):
    def __init__(self, d, heads, experts, k, hidden):
        super().__init__()
        self.heads, self.k, self.E = heads, k, experts
        m = d // heads
        self.head_proj = nn.Linear(d, d)
        self.merge_proj = nn.Linear(d, d)
        self.router = nn.Linear(m, experts, bias=False)
        self.w1 = nn.Parameter(torch.randn(experts, m, hidden) * m**-0.5)
        self.w3 = nn.Parameter(torch.randn(experts, m, hidden) * m**-0.5)
        self.w2 = nn.Parameter(torch.randn(experts, hidden, m) * hidden**-0.5)

    def forward(self, x, losses=True):
        b, s, d = x.shape
        xs = self.head_proj(x).reshape(-1, d // self.heads)
        S = xs.shape[0]
        probs = self.router(xs).softmax(-1)
        gates, index = probs.topk(self.k, dim=-1)           # [S, k]
        # Tutel's capacity in training: positions by a cumulative sum over
        # the choices in order (all first choices, then all second ones).
        # Evaluation and decoding keep every choice, as moec's do.
        capacity = (self.k * math.ceil(S / self.E) if self.training
                    else S * self.k)
        onehot = F.one_hot(index.t().reshape(-1), self.E)   # [k S, E]
        position = ((onehot.cumsum(0) - 1) * onehot).sum(-1)
        kept = (position < capacity).reshape(self.k, S).t()
        z = torch.zeros_like(xs)
        w1s, w3s, w2s = per_expert(self.w1, self.w3, self.w2)
        for e in range(self.E):
            rows, ranks = ((index == e) & kept).nonzero(as_tuple=True)
            if rows.numel() == 0:
                continue
            sub = xs[rows]
            h = F.silu(sub @ w1s[e]) * (sub @ w3s[e])
            z = z.index_add(0, rows, (h @ w2s[e]) * gates[rows, ranks, None])
        y = self.merge_proj(z.reshape(b, s, d))
        if not losses:
            return y, None
        first = onehot[:S].float().mean(0)
        balance = self.E * (probs.mean(0) * first).sum()
        return y, 0.01 * balance


class Mae(nn.Module):
    def __init__(self, d, heads, gate_hidden):
        super().__init__()
        self.h = heads
        self.wq, self.wk, self.wv, self.wo = (
            nn.Linear(d, d, bias=False) for _ in range(4))
        self.bn = nn.BatchNorm1d(d)
        self.g1 = nn.Linear(d, gate_hidden)
        self.g2 = nn.Linear(gate_hidden, heads)
        self.drop = nn.Dropout(0.1)

    def forward(self, x, cache=None):
        b, s, d = x.shape
        h, dh = self.h, d // self.h
        q, k, v = (w(x).reshape(b, s, h, dh).transpose(1, 2)
                   for w in (self.wq, self.wk, self.wv))
        k, v, past = cached(cache, k, v)
        context = causal_attention(q, k, v, dh**-0.5, past)  # [b, h, s, dh]
        # The gate's input: the mean of each position's prefix, carried
        # across decoding steps as a running sum.
        sums = x.cumsum(1)
        if cache is not None:
            if "sum" in cache:
                sums = sums + cache["sum"]
            cache["sum"] = sums[:, -1:]
        count = torch.arange(past + 1, past + s + 1, dtype=x.dtype,
                             device=x.device).reshape(1, s, 1)
        pooled = (sums / count).reshape(b * s, d)
        g = self.g2(self.drop(torch.tanh(self.g1(self.bn(pooled)))))
        g = g.softmax(-1).reshape(b, s, h)
        scale = (h * (1 - g) / (h - 1)).transpose(1, 2).unsqueeze(-1)
        context = (context * scale).transpose(1, 2).reshape(b, s, d)
        return self.wo(context), None


class Sublayer(nn.Module):
    def __init__(self, d, layer):
        super().__init__()
        self.norm = nn.LayerNorm(d, eps=1e-5)
        self.layer = layer

    def forward(self, x):
        y, aux = self.layer(self.norm(x))
        return x + y, aux


def timed(fn, repeats, device):
    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize()
    fn()
    fn()
    sync()
    start = time.perf_counter()
    for _ in range(repeats):
        fn()
    sync()
    return (time.perf_counter() - start) * 1000 / repeats


def cublas_ms(flops, rows, width, dtype, device, repeats):
    """A plain matrix product [rows, width] x [width, n] of `flops` FLOPs
    (n rounded to a multiple of 64): what cuBLAS (or the CPU BLAS) does
    with the layer's FLOP count when nothing is routed or fused."""
    n = max(64, round(flops / (2 * rows * width) / 64) * 64)
    a = torch.randn(rows, width, dtype=dtype, device=device)
    b = torch.randn(width, n, dtype=dtype, device=device)
    ms = timed(lambda: a @ b, repeats, device)
    return ms * flops / (2 * rows * width * n)


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--layer", choices=["moe", "moa", "mh_moe", "mae"],
                   required=True)
    p.add_argument("--d", type=int, default=256)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--experts", type=int, default=8)
    p.add_argument("--k", type=int, default=2)
    p.add_argument("--hidden", type=int, default=256,
                   help="mh_moe: expert width; mae: gate width")
    p.add_argument("--head-dim", type=int, default=64)
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--seq", type=int, default=512)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--device", default="cpu", help="cpu or cuda")
    p.add_argument("--dtype", default="f32", choices=["f32", "bf16"])
    p.add_argument("--compile", action="store_true",
                   help="also time the layer under torch.compile (PyTorch 2)")
    p.add_argument("--cublas-flops", type=float, default=0,
                   help="also time a plain matrix product of this many FLOPs")
    args = p.parse_args()
    device = torch.device(args.device)
    dtype = torch.bfloat16 if args.dtype == "bf16" else torch.float32
    torch.set_num_threads(args.threads)
    torch.manual_seed(1)
    d = args.d
    if args.layer == "moe":
        layer = MoE(d, args.experts, args.k, args.hidden)
    elif args.layer == "moa":
        layer = MoA(d, args.experts, args.k, args.head_dim)
    elif args.layer == "mh_moe":
        layer = MhMoE(d, args.heads, args.experts, args.k, args.hidden)
    else:
        layer = Mae(d, args.heads, args.hidden)
    block = Sublayer(d, layer).train().to(device=device, dtype=dtype)
    x = torch.randn(args.batch, args.seq, d, device=device, dtype=dtype,
                    requires_grad=True)
    inputs = [x] + list(block.parameters())
    dy = torch.randn(args.batch, args.seq, d, device=device, dtype=dtype)

    def forward():
        y, aux = block(x)
        return y.detach()

    def forward_backward():
        y, aux = block(x)
        outs, grads = [y], [dy]
        if aux is not None:
            outs.append(aux)
            grads.append(torch.ones((), device=device, dtype=aux.dtype))
        return torch.autograd.grad(outs, inputs, grads, allow_unused=True)

    print(f"forward {timed(forward, args.repeats, device):.3f} ms")
    print(f"forward+backward {timed(forward_backward, args.repeats, device):.3f} ms")
    # Before torch.compile, whose failure or slow compile must not cost the
    # other figures. A small product takes microseconds: more repeats.
    if args.cublas_flops > 0:
        ms = cublas_ms(args.cublas_flops, args.batch * args.seq, d, dtype,
                       device, max(args.repeats, 200))
        print(f"cublas {ms:.3f} ms")
    if args.compile:
        if hasattr(torch, "compile"):
            try:
                block = torch.compile(block)
                print("compiled-forward "
                      f"{timed(forward, args.repeats, device):.3f} ms")
                print("compiled-forward+backward "
                      f"{timed(forward_backward, args.repeats, device):.3f} ms")
            except Exception as e:  # Dynamo, Inductor or Triton refused
                first = (str(e).splitlines() or [""])[0]
                print(f"compiled: failed: {type(e).__name__}: {first}")
        else:
            print(f"compiled: torch {torch.__version__} has no torch.compile")


if __name__ == "__main__":
    main()
