#!/usr/bin/python3
"""An independent PyTorch implementation of a decoder language model with one
MoA layer, written from the MoA paper and its authors' code (not from
moec's), to check moec's forward pass, losses and gradients on the same
weights and tokens.

Usage: moa_reference.py CASE.safetensors
The file (written by MoaReferenceTest) holds the parameters ("param:NAME"),
the inputs (tokens, targets), and moec's results: logits and the loss
terms, and every gradient ("grad:NAME"); its metadata names the layer's
settings. Exits 1 when any result differs beyond float32 rounding.
"""
import json
import struct
import sys

import numpy as np
import torch

DTYPES = {"F32": np.float32, "F64": np.float64, "I32": np.int32,
          "I64": np.int64}


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (size,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + size])
    body = data[8 + size:]
    metadata = header.pop("__metadata__", {})
    tensors = {}
    for name, entry in header.items():
        begin, end = entry["data_offsets"]
        array = np.frombuffer(body[begin:end], dtype=DTYPES[entry["dtype"]])
        tensors[name] = array.reshape(entry["shape"]).copy()
    return tensors, metadata


def layer_norm(x, g, b, eps=1e-5):
    mean = x.mean(-1, keepdim=True)
    var = ((x - mean) ** 2).mean(-1, keepdim=True)
    return (x - mean) / torch.sqrt(var + eps) * g + b


def moa(h, p, cfg):
    """MoA self-attention over h [B, T, d], causal: router, top-k, per-expert
    query and output projections, one shared key and value head."""
    B, T, _ = h.shape
    E, k = cfg["experts"], cfg["k"]
    logits = h @ p["router"]                       # [B, T, E]
    probs = torch.softmax(logits, dim=-1)
    # Ties go to the lower expert index: a stable descending sort.
    order = torch.sort(probs.detach(), dim=-1, descending=True, stable=True)
    index = order.indices[..., :k]                 # [B, T, k]
    gates = torch.gather(probs, -1, index)
    if cfg["gate"] == "renorm_detached":
        gates = gates / gates.sum(-1, keepdim=True).detach()
    keys = h @ p["wk"]                             # [B, T, dh]
    values = h @ p["wv"]
    scale = cfg["scale"]
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    y = torch.zeros_like(h)
    for b in range(B):
        for t in range(T):
            for j in range(k):
                e = int(index[b, t, j])
                q = h[b, t] @ p["wq"][e] * scale
                scores = keys[b] @ q
                scores = scores.masked_fill(~causal[t], float("-inf"))
                context = torch.softmax(scores, dim=0) @ values[b]
                y[b, t] = y[b, t] + gates[b, t, j] * (context @ p["wo"][e])
    # Auxiliary losses (every slot counts, no padding here).
    counts = torch.zeros(E)
    for e in index.reshape(-1).tolist():
        counts[e] += 1
    f = counts / counts.sum()
    P = probs.reshape(-1, E).sum(0) / probs.sum()
    switch = E * (f * P).sum()
    z = (torch.logsumexp(logits.reshape(-1, E), dim=-1) ** 2).mean()
    importance = torch.zeros(E).index_add(0, index.reshape(-1),
                                          gates.reshape(-1))
    importance = importance / importance.sum()
    cv = importance.var() / (importance.mean() ** 2 + 1e-10)
    return y, switch, z, cv


def main():
    torch.set_default_dtype(torch.float64)
    tensors, meta = read_safetensors(sys.argv[1])
    # moec adds the data's checksum to the metadata; the rest is the config.
    cfg = {key: json.loads(value) for key, value in meta.items()
           if key != "data_crc32"}
    params = {name[6:]: torch.tensor(value, dtype=torch.float64,
                                     requires_grad=True)
              for name, value in tensors.items() if name.startswith("param:")}
    tokens = torch.tensor(tensors["tokens"], dtype=torch.long)
    targets = torch.tensor(tensors["targets"], dtype=torch.long)
    B, T = tokens.shape
    layer = {n.split(".")[-1]: v for n, v in params.items()
             if n.startswith("layers.0.moa.") and ".norm." not in n}

    x = params["embed.tokens"][tokens] + params["embed.positions"][:T]
    h = layer_norm(x, params["layers.0.moa.norm.g"],
                   params["layers.0.moa.norm.b"])
    y, switch, z, cv = moa(h, layer, cfg)
    x = x + y
    out = layer_norm(x, params["final_norm.g"], params["final_norm.b"])
    logits = out @ params["head"]
    live = targets >= 0
    ce = torch.nn.functional.cross_entropy(logits[live], targets[live])
    aux = cfg["balance"] * switch + cfg["z"] * z + cfg["cv"] * cv
    if cfg["aux"] == "per_token":
        aux = aux / live.sum()
    loss = ce + aux
    loss.backward()

    failures = []

    def check(name, ours, theirs, tol=2e-4):
        ours = np.asarray(ours, dtype=np.float64)
        theirs = np.asarray(theirs, dtype=np.float64)
        scale = max(1e-3, float(np.abs(theirs).max()))
        error = float(np.abs(ours - theirs).max()) / scale
        print(f"{name:32s} relative error {error:.2e}")
        if not error <= tol:
            failures.append(name)

    check("logits", tensors["logits"], logits.detach().numpy())
    check("loss", tensors["loss"], loss.item())
    check("ce", tensors["ce"], ce.item())
    check("balance_loss", tensors["balance_loss"], switch.item())
    check("z_loss", tensors["z_loss"], z.item())
    check("cv_loss", tensors["cv_loss"], cv.item())
    for name, value in params.items():
        check("grad:" + name, tensors["grad:" + name], value.grad.numpy(),
              tol=1e-3)
    if failures:
        print("MISMATCH: " + ", ".join(failures))
        sys.exit(1)


if __name__ == "__main__":
    main()
