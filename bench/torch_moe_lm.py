#!/usr/bin/env python3
"""PyTorch (CPU) peer of moec's decoder MoE language model, for throughput.

The model mirrors examples/moe_lm.moe grown by the flags: learned positions,
pre-norm blocks with layer norm, causal multi-head attention on every
block, a top-k mixture of GELU (tanh) experts on every second block
(softmax router, raw gates, no capacity) and a dense GELU FFN on the
others, a final norm and an untied LM head; cross-entropy plus the Switch
balance loss and the router z-loss; AdamW. The experts run as the papers'
code runs them: a loop over experts with an index gather and an
index_add combine. Variants: every attention MoA (--moa-experts) or MAE
(--mae-gate, trained jointly), every MoE layer MH-MoE (--mh-moe-heads),
with bench/torch_layers.py's layers. Prints the mean ms/step after
warm-up; with --forward the loss without gradients, with --decode greedy
decoding with a KV cache.
"""
import argparse
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

from torch_layers import Mae, MhMoE, per_expert, timed

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

    def forward(self, x):
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
        E = self.w1.shape[0]
        share = F.one_hot(experts[:, 0], E).float().mean(0)
        balance = E * (share * probs.mean(0)).sum()
        z = torch.logsumexp(logits, -1).pow(2).mean()
        return y, balance, z


class MoA(nn.Module):
    """Mixture of attention heads as its authors' code runs it: a router,
    per-expert query and output projections applied by a loop over experts
    (index gather, matmul, index_add), one shared key and value head, and
    attention of the k routed queries of every token."""

    def __init__(self, d, experts, k, head_dim):
        super().__init__()
        self.k, self.dh = k, head_dim
        self.router = nn.Linear(d, experts, bias=False)
        self.wq = nn.Parameter(torch.randn(experts, d, head_dim) * d**-0.5)
        self.wo = nn.Parameter(torch.randn(experts, head_dim, d) * head_dim**-0.5)
        self.kv = nn.Linear(d, 2 * head_dim)

    def forward(self, x):
        b, s, d = x.shape
        n, E = b * s, self.wq.shape[0]
        flat_x = x.reshape(n, d)
        probs = self.router(flat_x).softmax(-1)
        gates, experts = probs.topk(self.k, dim=-1)
        flat = experts.reshape(-1)
        token = torch.arange(n).repeat_interleave(self.k)
        q = torch.zeros(n * self.k, self.dh)
        picks = [(flat == e).nonzero(as_tuple=True)[0] for e in range(E)]
        wqs, wos = per_expert(self.wq, self.wo)
        for e, pick in enumerate(picks):
            q = q.index_add(0, pick, flat_x[token[pick]] @ wqs[e])
        keys, values = self.kv(x).split(self.dh, dim=-1)       # [b, s, dh]
        q = q.reshape(b, s * self.k, self.dh)
        scores = (q @ keys.transpose(-1, -2)) * self.dh**-0.5  # [b, s k, s]
        causal = torch.ones(s, s, dtype=torch.bool).triu(1)
        causal = causal.repeat_interleave(self.k, dim=0)
        context = scores.masked_fill(causal, float("-inf")).softmax(-1) @ values
        context = context.reshape(n * self.k, self.dh) * gates.reshape(-1, 1)
        y = torch.zeros(n, d)
        for e, pick in enumerate(picks):
            y = y.index_add(0, token[pick], context[pick] @ wos[e])
        return y.reshape(b, s, d)


class Block(nn.Module):
    """A pre-norm block: attention (or `mixer`, a MoA or MAE layer), then
    the feed-forward layer; returns the output and the weighted auxiliary
    losses."""

    def __init__(self, d, heads, ffn, mixer=None):
        super().__init__()
        self.heads = heads
        self.norm1 = nn.LayerNorm(d, eps=1e-5)
        self.mixer = mixer
        if mixer is None:
            self.qkv = nn.Linear(d, 3 * d)
            self.proj = nn.Linear(d, d)
        self.norm2 = nn.LayerNorm(d, eps=1e-5)
        self.ffn = ffn

    def forward(self, x):
        b, s, d = x.shape
        if isinstance(self.mixer, Mae):
            return self.feed_forward(x + self.mixer(self.norm1(x))[0])
        if self.mixer is not None:
            return self.feed_forward(x + self.mixer(self.norm1(x)))
        q, k, v = self.qkv(self.norm1(x)).split(d, dim=-1)
        shape = (b, s, self.heads, d // self.heads)
        q, k, v = (t.reshape(shape).transpose(1, 2) for t in (q, k, v))
        # torch 1.13 (Debian 12) has no fused attention: the papers' form.
        scores = (q @ k.transpose(-1, -2)) * (d // self.heads) ** -0.5
        causal = torch.ones(s, s, dtype=torch.bool).triu(1)
        a = scores.masked_fill(causal, float("-inf")).softmax(-1) @ v
        x = x + self.proj(a.transpose(1, 2).reshape(b, s, d))
        return self.feed_forward(x)

    def feed_forward(self, x):
        b, s, d = x.shape
        h = self.norm2(x)
        if isinstance(self.ffn, MhMoE):
            y, aux = self.ffn(h)  # its balance loss, weighted 0.01
            return x + y, aux
        h = h.reshape(b * s, d)
        if isinstance(self.ffn, MoE):
            y, bal, z = self.ffn(h)
            return x + y.reshape(b, s, d), 0.01 * bal + 0.001 * z
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
        mixer = None
        if args.moa_experts:
            mixer = MoA(d, args.moa_experts, args.moa_k, args.moa_head_dim)
        elif args.mae_gate:
            mixer = Mae(d, args.heads, args.mae_gate)
        blocks.append(Block(d, args.heads, ffn, mixer))
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


def decode_block(blk, x, cache):
    """One block over the new positions x [1, t, d], attending to the keys
    and values of every earlier position (kept in `cache`) and its own."""
    b, s, d = x.shape
    q, k, v = blk.qkv(blk.norm1(x)).split(d, dim=-1)
    shape = (b, s, blk.heads, d // blk.heads)
    q, k, v = (t.reshape(shape).transpose(1, 2) for t in (q, k, v))
    if "k" in cache:
        k, v = torch.cat([cache["k"], k], 2), torch.cat([cache["v"], v], 2)
    cache["k"], cache["v"] = k, v
    past = k.shape[2] - s
    scores = (q @ k.transpose(-1, -2)) * (d // blk.heads) ** -0.5
    causal = torch.ones(s, past + s, dtype=torch.bool).triu(past + 1)
    a = scores.masked_fill(causal, float("-inf")).softmax(-1) @ v
    x = x + blk.proj(a.transpose(1, 2).reshape(b, s, d))
    return blk.feed_forward(x)[0]


def decode_times(model, prompt_len, new_tokens):
    """Greedy decoding of one sequence with a KV cache: ms for the prompt,
    then ms per token for each later step (one token in, one out)."""
    caches = [dict() for _ in model["blocks"]]

    def forward(chunk, past):
        x = model["embed"](chunk) + model["pos"].weight[past: past + chunk.shape[1]]
        for blk, cache in zip(model["blocks"], caches):
            x = decode_block(blk, x, cache)
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
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(1)
    if args.layers:
        return layer_times(args)
    if args.decode and (args.moa_experts or args.mae_gate):
        p.error("--decode runs plain attention only")
    model = build(args)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.98),
                            eps=1e-9, weight_decay=0.01)
    tokens = torch.randint(0, 256, (args.batch, args.seq + 1))
    if args.forward or args.decode:
        model.eval()  # no dropout, as moec's evaluation and decoding
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
    main()
