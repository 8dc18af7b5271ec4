#!/usr/bin/env python3
"""PyTorch (CPU) peer of moec's decoder MoE language model, for throughput.

The model mirrors examples/moe_lm.moe grown by the flags: learned positions,
pre-norm blocks with layer norm, causal multi-head attention on every
block, a top-k mixture of GELU (tanh) experts on every second block
(softmax router, raw gates, no capacity) and a dense GELU FFN on the
others, a final norm and an untied LM head; cross-entropy plus the Switch
balance loss and the router z-loss; AdamW. The experts run as the papers'
code runs them: a loop over experts with an index gather and an
index_add combine. Variants: every attention MoA (--moa-experts, with its
balance and z losses) or MAE (--mae-gate, trained jointly), every MoE
layer MH-MoE (--mh-moe-heads), with bench/torch_layers.py's layers, which
decode with the same caches. Prints the mean ms/step after
warm-up; with --forward the loss without gradients, with --decode greedy
decoding with a KV cache and, as in moec's decode program, no auxiliary
losses.
"""
import argparse
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

from torch_layers import (Mae, MhMoE, MoA, cached, causal_attention,
                          per_expert, timed)

CPU = torch.device("cpu")


class MoE(nn.Module):
    def __init__(self, d, experts, hidden, k):
        super().__init__()
        self.k = k
        self.router = nn.Linear(d, experts, bias=False)
        self.w1 = nn.Parameter(torch.randn(experts, d, hidden) * d**-0.5)
        self.b1 = nn.Parameter(torch.zeros(experts, hidden))
        self.w2 = nn.Parameter(torch.randn(experts, hidden, d) * hidden**-0.5)
        self.b2 = nn.Parameter(torch.zeros(experts, d))

    def forward(self, x, losses=True):
        n, d = x.shape
        logits = self.router(x)
        probs = logits.softmax(-1)
        gates, experts = probs.topk(self.k, dim=-1)
        y = torch.zeros_like(x)
        flat = experts.reshape(-1)
        token = torch.arange(n).repeat_interleave(self.k)
        w1s, b1s, w2s, b2s = per_expert(self.w1, self.b1, self.w2, self.b2)
        for e in range(self.w1.shape[0]):
            pick = (flat == e).nonzero(as_tuple=True)[0]
            if pick.numel() == 0:
                continue
            rows = token[pick]
            h = F.gelu(x[rows] @ w1s[e] + b1s[e], approximate="tanh")
            out = (h @ w2s[e] + b2s[e]) * gates.reshape(-1)[pick, None]
            y = y.index_add(0, rows, out)
        if not losses:
            return y, None, None
        E = self.w1.shape[0]
        share = F.one_hot(experts[:, 0], E).float().mean(0)
        balance = E * (share * probs.mean(0)).sum()
        z = torch.logsumexp(logits, -1).pow(2).mean()
        return y, balance, z


class Attention(nn.Module):
    """Causal multi-head attention; returns the output and no auxiliary
    loss, as the mixers of bench/torch_layers.py do."""

    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)

    def forward(self, x, cache=None):
        b, s, d = x.shape
        q, k, v = self.qkv(x).split(d, dim=-1)
        shape = (b, s, self.heads, d // self.heads)
        q, k, v = (t.reshape(shape).transpose(1, 2) for t in (q, k, v))
        k, v, past = cached(cache, k, v)
        a = causal_attention(q, k, v, (d // self.heads) ** -0.5, past)
        return self.proj(a.transpose(1, 2).reshape(b, s, d)), None


class Block(nn.Module):
    """A pre-norm block: the mixer (attention, MoA or MAE), then the
    feed-forward layer; returns the output and the weighted auxiliary
    losses. `cache` (a dict per block) keeps the keys and values of earlier
    positions when decoding; decoding computes no auxiliary losses (None),
    as moec's decode program does not."""

    def __init__(self, d, ffn, mixer):
        super().__init__()
        self.norm1 = nn.LayerNorm(d, eps=1e-5)
        self.mixer = mixer
        self.norm2 = nn.LayerNorm(d, eps=1e-5)
        self.ffn = ffn

    def forward(self, x, cache=None):
        y, aux = self.mixer(self.norm1(x), cache)
        x, ffn_aux = self.feed_forward(x + y, losses=cache is None)
        if cache is not None:
            return x, None
        return x, ffn_aux if aux is None else aux + ffn_aux

    def feed_forward(self, x, losses):
        b, s, d = x.shape
        h = self.norm2(x)
        if isinstance(self.ffn, MhMoE):
            y, aux = self.ffn(h, losses)  # its balance loss, weighted 0.01
            return x + y, aux
        h = h.reshape(b * s, d)
        if isinstance(self.ffn, MoE):
            y, bal, z = self.ffn(h, losses)
            aux = 0.01 * bal + 0.001 * z if losses else None
            return x + y.reshape(b, s, d), aux
        return x + self.ffn(h).reshape(b, s, d), 0.0


def build(args):
    d = args.d
    blocks = []
    for i in range(args.blocks):
        hidden = args.expert_hidden or 2 * d
        if i % 2 == 1 and args.mh_moe_heads:
            ffn = MhMoE(d, args.mh_moe_heads, args.experts, args.k, hidden)
        elif i % 2 == 1:
            ffn = MoE(d, args.experts, hidden, args.k)
        else:
            ffn = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(approximate="tanh"),
                                nn.Linear(4 * d, d))
        if args.moa_experts:
            mixer = MoA(d, args.moa_experts, args.moa_k, args.moa_head_dim)
        elif args.mae_gate:
            mixer = Mae(d, args.heads, args.mae_gate)
        else:
            mixer = Attention(d, args.heads)
        blocks.append(Block(d, ffn, mixer))
    return nn.ModuleDict(dict(
        embed=nn.Embedding(256, d), pos=nn.Embedding(args.seq, d),
        blocks=nn.ModuleList(blocks), norm=nn.LayerNorm(d), head=nn.Linear(d, 256)))


def loss_of(model, tokens):
    x = model["embed"](tokens[:, :-1]) + model["pos"].weight[: tokens.shape[1] - 1]
    aux = 0.0
    for blk in model["blocks"]:
        x, weighted = blk(x)
        aux = aux + weighted
    logits = model["head"](model["norm"](x))
    return F.cross_entropy(logits.reshape(-1, 256), tokens[:, 1:].reshape(-1)) + aux


def step(model, opt, tokens):
    loss = loss_of(model, tokens)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    return loss.item()


def decode_times(model, prompt_len, new_tokens):
    """Greedy decoding of one sequence with a KV cache: ms for the prompt,
    then ms per token for each later step (one token in, one out)."""
    caches = [dict() for _ in model["blocks"]]

    def forward(chunk, past):
        x = model["embed"](chunk) + model["pos"].weight[past: past + chunk.shape[1]]
        for blk, cache in zip(model["blocks"], caches):
            x = blk(x, cache)[0]
        return model["head"](model["norm"](x))[:, -1].argmax(-1, keepdim=True)

    with torch.no_grad():
        start = time.perf_counter()
        token = forward(torch.randint(0, 256, (1, prompt_len)), 0)
        prompt_ms = (time.perf_counter() - start) * 1000
        start = time.perf_counter()
        for i in range(new_tokens):
            token = forward(token, prompt_len + i)
        token_ms = (time.perf_counter() - start) * 1000 / new_tokens
    return prompt_ms, token_ms


def check_decode(model, prompt_len=12, new_tokens=8):
    """Decoding with the caches must give the logits of one full forward:
    exits 1 when the largest difference is above 1e-4."""
    tokens = torch.randint(0, 256, (1, prompt_len + new_tokens))

    def logits(chunks):
        caches = [dict() for _ in model["blocks"]] if len(chunks) > 1 else None
        past, out = 0, []
        for chunk in chunks:
            x = model["embed"](chunk) + model["pos"].weight[past: past + chunk.shape[1]]
            for i, blk in enumerate(model["blocks"]):
                x = blk(x, caches[i] if caches else None)[0]
            out.append(model["head"](model["norm"](x)))
            past += chunk.shape[1]
        return torch.cat(out, 1)

    with torch.no_grad():
        full = logits([tokens])
        steps = [tokens[:, :prompt_len]] + [
            tokens[:, i: i + 1] for i in range(prompt_len, prompt_len + new_tokens)]
        diff = (logits(steps) - full).abs().max().item()
    print(f"decoding with the cache against the full forward: largest "
          f"difference {diff:.2e} (logits up to {full.abs().max().item():.2f})")
    return 0 if diff <= 1e-4 else 1


def timed_backward(forward, inputs, grad, repeats=5):
    """ms per backward alone: each repeat runs forward() untimed first (a
    difference of two timings can come out below zero)."""
    torch.autograd.grad(forward(), inputs, grad)
    total = 0.0
    for _ in range(repeats):
        out = forward()
        start = time.perf_counter()
        torch.autograd.grad(out, inputs, grad)
        total += time.perf_counter() - start
    return total * 1000 / repeats


def layer_times(args):
    """ms per call of the layers moec's --profile names, at the model's
    shapes: causal attention (forward, backward) and one MoE layer's experts
    (forward, backward), as moe.attention(_grad) and moe.expert_ffn(_grad)."""
    b, s, d, h = args.batch, args.seq, args.d, args.heads
    q, k, v = (torch.randn(b, h, s, d // h, requires_grad=True) for _ in range(3))
    causal = torch.ones(s, s, dtype=torch.bool).triu(1)

    def attend():
        scores = (q @ k.transpose(-1, -2)) * (d // h) ** -0.5
        return scores.masked_fill(causal, float("-inf")).softmax(-1) @ v

    out = attend()
    grad = torch.randn_like(out)
    rows = {"moe.attention": timed(lambda: attend().detach(), 5, CPU)}
    rows["moe.attention_grad"] = timed_backward(attend, (q, k, v), grad)

    moe = MoE(d, args.experts, args.expert_hidden or 2 * d, args.k)
    x = torch.randn(b * s, d, requires_grad=True)
    with torch.no_grad():
        _, experts = moe.router(x).softmax(-1).topk(args.k, dim=-1)
    gates = torch.rand(b * s, args.k, requires_grad=True)
    params = [x, gates, moe.w1, moe.b1, moe.w2, moe.b2]

    def experts_only():
        w1s, b1s, w2s, b2s = per_expert(moe.w1, moe.b1, moe.w2, moe.b2)
        y = torch.zeros_like(x)
        flat = experts.reshape(-1)
        token = torch.arange(b * s).repeat_interleave(args.k)
        for e in range(args.experts):
            pick = (flat == e).nonzero(as_tuple=True)[0]
            r = token[pick]
            hid = F.gelu(x[r] @ w1s[e] + b1s[e], approximate="tanh")
            y = y.index_add(0, r, (hid @ w2s[e] + b2s[e]) * gates.reshape(-1)[pick, None])
        return y

    y = experts_only()
    dy = torch.randn_like(y)
    rows["moe.expert_ffn"] = timed(lambda: experts_only().detach(), 5, CPU)
    rows["moe.expert_ffn_grad"] = timed_backward(experts_only, params, dy)
    for name, ms in rows.items():
        print(f"layer {name} {ms:.2f} ms")


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--d", type=int, default=512)
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--blocks", type=int, default=4)
    p.add_argument("--experts", type=int, default=16)
    p.add_argument("--expert-hidden", type=int, default=0)
    p.add_argument("--k", type=int, default=2)
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--seq", type=int, default=512)
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--moa-experts", type=int, default=0,
                   help="MoA attention with this many experts on every block")
    p.add_argument("--moa-k", type=int, default=2)
    p.add_argument("--moa-head-dim", type=int, default=64)
    p.add_argument("--mae-gate", type=int, default=0, metavar="G",
                   help="MAE attention with a gate G wide on every block")
    p.add_argument("--mh-moe-heads", type=int, default=0, metavar="H",
                   help="every MoE layer MH-MoE with H sub-tokens and SwiGLU "
                   "experts --expert-hidden wide")
    p.add_argument("--layers", action="store_true",
                   help="time the attention and expert layers alone")
    p.add_argument("--forward", action="store_true",
                   help="time the loss without gradients (evaluation)")
    p.add_argument("--decode", type=int, default=0, metavar="N",
                   help="time greedy decoding of N tokens after a 16-token "
                   "prompt, batch 1, with a KV cache")
    p.add_argument("--check-decode", action="store_true",
                   help="check that decoding with the caches gives the full "
                   "forward's logits (exit 1 if not)")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(1)
    if args.layers:
        return layer_times(args)
    model = build(args)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.98),
                            eps=1e-9, weight_decay=0.01)
    tokens = torch.randint(0, 256, (args.batch, args.seq + 1))
    if args.forward or args.decode or args.check_decode:
        model.eval()  # no dropout, as moec's evaluation and decoding
    if args.check_decode:
        return check_decode(model)
    if args.forward:
        with torch.no_grad():
            ms = timed(lambda: loss_of(model, tokens).item(), args.steps, CPU)
        print(f"torch forward {ms:.2f} ms/batch")
        return
    if args.decode:
        decode_times(model, 16, 4)  # warm-up
        prompt_ms, token_ms = decode_times(model, 16, args.decode)
        print(f"torch decode prompt {prompt_ms:.2f} ms, {token_ms:.3f} ms/token")
        return
    step(model, opt, tokens)  # warm-up
    start = time.perf_counter()
    for _ in range(args.steps):
        step(model, opt, tokens)
    ms = (time.perf_counter() - start) * 1000 / args.steps
    params = sum(p.numel() for p in model.parameters())
    print(f"torch {torch.__version__}: {params / 1e6:.2f}M parameters, "
          f"{ms:.0f} ms/step, {args.batch * args.seq * 1000 / ms:.0f} tok/s")


if __name__ == "__main__":
    sys.exit(main())
