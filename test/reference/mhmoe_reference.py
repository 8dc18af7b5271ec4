#!/usr/bin/python3
"""An independent PyTorch implementation of a decoder language model whose
one block is an MH-MoE layer, written from the MH-MoE authors' layer
(torchscale's MOELayer with mhmoe_heads_number > 1, Tutel's top-k gate and
capacity), not from moec's code, to check moec's forward pass, balance
loss and gradients on the same weights and tokens.

Usage: mhmoe_reference.py CASE.safetensors
The file (written by MhMoeReferenceTest) holds the parameters
("param:NAME"), the inputs (tokens, targets) and moec's results: the
training step's loss terms and gradients (capacity applies) and the eval
forward's logits (dropless); its metadata names the layer's settings.
Exits 1 when any result differs beyond float32 rounding.
"""
import json
import math
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


def rms_norm(x, g, eps=1e-5):
    return x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps) * g


ACTIVATIONS = {
    "silu": torch.nn.functional.silu,
    "gelu_erf": torch.nn.functional.gelu,
    "relu": torch.relu,
}


def expert(x, p, e, cfg):
    """One expert on sub-tokens x [n, m]. moec names the activated branch
    w1 and the linear one w3 (the authors' fc3 and fc1)."""
    act = ACTIVATIONS[cfg["activation"]]
    a = x @ p["w1"][e]
    if "b1" in p:
        a = a + p["b1"][e]
    a = act(a)
    if cfg["glu"]:
        a = a * (x @ p["w3"][e])
    y = a @ p["w2"][e]
    if "b2" in p:
        y = y + p["b2"][e]
    return y


def mh_moe(h, p, cfg, training):
    """MH-MoE over h [B, T, d]: the multi-head layer, the token-major split
    into `heads` sub-tokens, top-k routing of every sub-token with capacity
    k * floor(cf * ceil(S / E)) in training (first choices before second
    choices, row order within a choice, dropped assignments counted), the
    post-score combine, the merge and the merge layer."""
    B, T, d = h.shape
    heads, E, k = cfg["heads"], cfg["experts"], cfg["k"]
    m = d // heads
    x = h.reshape(B * T, d)
    if "head_proj.w" in p:
        x = x @ p["head_proj.w"] + p["head_proj.b"]
    xs = x.reshape(B * T * heads, m)               # row n * heads + j
    S = xs.shape[0]
    if "router_embed" in p:
        # X-MoE: the projection against L2-normalised expert embeddings
        # (torch.nn.functional.normalize, eps 1e-4).
        unit = torch.nn.functional.normalize(p["router_embed"], dim=1,
                                             eps=1e-4)
        logits = (xs @ p["router_reduce"]) @ unit.T
    else:
        logits = xs @ p["router"]
    probs = torch.softmax(logits, dim=-1)
    order = torch.sort(probs.detach(), dim=-1, descending=True, stable=True)
    index = order.indices[:, :k]                    # [S, k]
    gates = torch.gather(probs, -1, index)
    capacity = math.inf
    if training:
        capacity = k * math.floor(cfg["capacity_factor"] *
                                  math.ceil(S / E))
    kept = torch.zeros(S, k, dtype=torch.bool)
    taken = [0] * E
    for r in range(k):
        for s in range(S):
            e = int(index[s, r])
            kept[s, r] = taken[e] < capacity
            taken[e] += 1
    z = torch.zeros_like(xs)
    for e in range(E):
        rows, ranks = torch.nonzero((index == e) & kept, as_tuple=True)
        if len(rows) == 0:
            continue
        out = expert(xs[rows], p, e, cfg)
        z = z.index_add(0, rows, gates[rows, ranks].unsqueeze(-1) * out)
    y = z.reshape(B * T, d)
    if "merge_proj.w" in p:
        y = y @ p["merge_proj.w"] + p["merge_proj.b"]
    # The top-1 GShard balance loss over all S sub-tokens, before dropping.
    counts = torch.zeros(E)
    for e in index[:, 0].tolist():
        counts[e] += 1
    balance = E * ((probs.mean(0)) * (counts / S)).sum()
    dropped = int((~kept).sum())
    return y.reshape(B, T, d), balance, dropped


def model(params, tokens, cfg, training):
    T = tokens.shape[1]
    layer = {n[len("layers.0.mh_moe."):]: v for n, v in params.items()
             if n.startswith("layers.0.mh_moe.")}
    x = params["embed.tokens"][tokens] + params["embed.positions"][:T]
    h = rms_norm(x, layer["norm.g"])
    y, balance, dropped = mh_moe(h, layer, cfg, training)
    x = x + y
    out = rms_norm(x, params["final_norm.g"])
    return out @ params["head"], balance, dropped


def main():
    torch.set_default_dtype(torch.float64)
    tensors, meta = read_safetensors(sys.argv[1])
    cfg = {key: json.loads(value) for key, value in meta.items()
           if key != "data_crc32"}
    params = {name[6:]: torch.tensor(value, dtype=torch.float64,
                                     requires_grad=True)
              for name, value in tensors.items() if name.startswith("param:")}
    tokens = torch.tensor(tensors["tokens"], dtype=torch.long)
    targets = torch.tensor(tensors["targets"], dtype=torch.long)

    logits, balance, dropped = model(params, tokens, cfg, training=True)
    ce = torch.nn.functional.cross_entropy(
        logits.reshape(-1, logits.shape[-1]), targets.reshape(-1),
        ignore_index=-1)
    loss = ce + cfg["balance"] * balance
    loss.backward()
    with torch.no_grad():
        eval_logits, _, eval_dropped = model(params, tokens, cfg,
                                             training=False)
    print(f"training step: {dropped} assignments dropped by capacity; "
          f"eval: {eval_dropped}")
    if cfg.get("expect_drops") and dropped == 0:
        print("MISMATCH: the case was meant to drop assignments")
        sys.exit(1)

    failures = []

    def check(name, ours, theirs, tol=2e-4):
        ours = np.asarray(ours, dtype=np.float64)
        theirs = np.asarray(theirs, dtype=np.float64)
        scale = max(1e-3, float(np.abs(theirs).max()))
        error = float(np.abs(ours - theirs).max()) / scale
        print(f"{name:36s} relative error {error:.2e}")
        if not error <= tol:
            failures.append(name)

    check("logits (eval, dropless)", tensors["logits"], eval_logits.numpy())
    check("loss", tensors["loss"], loss.item())
    check("ce", tensors["ce"], ce.item())
    check("balance_loss", tensors["balance_loss"], balance.item())
    if "z_loss" in tensors:
        failures.append("z_loss (MH-MoE has none)")
    for name, value in params.items():
        check("grad:" + name, tensors["grad:" + name], value.grad.numpy(),
              tol=1e-3)
    if failures:
        print("MISMATCH: " + ", ".join(failures))
        sys.exit(1)


if __name__ == "__main__":
    main()
