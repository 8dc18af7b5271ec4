#!/usr/bin/env python3
"""Writes the fuzzers' seed corpora under test/fuzz/corpus/<target>/.

Usage: test/fuzz/make-corpus.py build/bin/moec

spec: every .moe file of examples/ and test/ (and micro.moe, kept there).
bundle: bundles compiled from small specs, cut down to a few kilobytes
(kernel sources emptied, one or two programs kept).
checkpoint: micro.moe trained one step and saved, plus hand-made files.
sentencepiece: small models trained on examples/data/sentences.txt, their
normalisation table dropped (it is 240 KB; the parser sees the rest).
tokenizer: a few texts.
Seeds kept for regressions (named regress-*) are left alone.
"""
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CORPUS = os.path.join(ROOT, "test", "fuzz", "corpus")


def out(target, name, data):
    os.makedirs(os.path.join(CORPUS, target), exist_ok=True)
    mode = "w" if isinstance(data, str) else "wb"
    with open(os.path.join(CORPUS, target, name), mode) as f:
        f.write(data)


def specs():
    for top in ("examples", "test"):
        for dirpath, _, files in os.walk(os.path.join(ROOT, top)):
            if "fuzz" in dirpath.split(os.sep):
                continue
            for f in sorted(files):
                if f.endswith(".moe"):
                    path = os.path.join(dirpath, f)
                    rel = os.path.relpath(path, ROOT)
                    yield rel.replace(os.sep, "_"), path


def trim_bundle(bundle, programs, kernels):
    """Keeps `programs`; with `kernels`, their groups and the kernels they
    launch (sources emptied), else no groups and no cuda section."""
    bundle["programs"] = {k: v for k, v in bundle["programs"].items()
                          if k in programs}
    used = set()
    for program in bundle["programs"].values():
        if not kernels:
            program.pop("groups", None)
            continue
        for group in program.get("groups", []):
            for launch in group["launches"]:
                used.add(launch["kernel"])
    if kernels:
        cuda = bundle["cuda"]
        cuda["kernels"] = [dict(k, source="") for k in cuda["kernels"]
                           if k["name"] in used]
    else:
        bundle.pop("cuda", None)
    return json.dumps(bundle, separators=(",", ":"), sort_keys=True)


def safetensors(entries, metadata=None, data=b""):
    header = dict(entries)
    if metadata is not None:
        header["__metadata__"] = metadata
    text = json.dumps(header, separators=(",", ":")).encode()
    return struct.pack("<Q", len(text)) + text + data


def strip_normalizer(model):
    """Drops NormalizerSpec.precompiled_charsmap (field 3.2) and names the
    rule 'identity', by rewriting the protobuf's length-delimited fields."""
    def varint(data, i):
        value, shift = 0, 0
        while True:
            b = data[i]
            i += 1
            value |= (b & 0x7F) << shift
            shift += 7
            if b < 0x80:
                return value, i

    def encode_varint(value):
        bytes_ = bytearray()
        while True:
            b = value & 0x7F
            value >>= 7
            bytes_.append(b | (0x80 if value else 0))
            if not value:
                return bytes(bytes_)

    def fields(data):
        i = 0
        while i < len(data):
            key, i = varint(data, i)
            start = i
            wire = key & 7
            if wire == 0:
                _, i = varint(data, i)
            elif wire == 1:
                i += 8
            elif wire == 5:
                i += 4
            elif wire == 2:
                n, i = varint(data, i)
                i += n
            else:
                raise ValueError("unexpected wire type")
            yield key, data[start:i]

    def field(key, payload):
        return encode_varint(key) + encode_varint(len(payload)) + payload

    result = b""
    for key, raw in fields(model):
        if key >> 3 == 3 and key & 7 == 2:
            n, start = varint(raw, 0)
            spec = b""
            for k, r in fields(raw[start:]):
                if k >> 3 == 1:
                    spec += field(k, b"identity")
                elif k >> 3 != 2:
                    spec += encode_varint(k) + r
            result += field(key, spec)
        else:
            result += encode_varint(key) + raw
    return result


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    moec = os.path.abspath(sys.argv[1])
    for target in ("spec", "bundle", "checkpoint", "tokenizer",
                   "sentencepiece"):
        d = os.path.join(CORPUS, target)
        if os.path.isdir(d):
            for f in os.listdir(d):
                if not f.startswith("regress-") and f != "micro.moe":
                    os.remove(os.path.join(d, f))

    for name, path in specs():
        shutil.copy(path, os.path.join(CORPUS, "spec", name))
    micro = os.path.join(CORPUS, "spec", "micro.moe")

    tmp = tempfile.mkdtemp()
    try:
        def compile_(spec):
            path = os.path.join(tmp, "b.json")
            subprocess.run([moec, "compile", spec, "-o", path], check=True,
                           cwd=ROOT)
            with open(path) as f:
                return json.load(f)

        tiny = os.path.join(ROOT, "test", "Driver", "inputs", "tiny.moe")
        out("bundle", "tiny-forward-kernels.json",
            trim_bundle(compile_(tiny), {"forward"}, kernels=True))
        out("bundle", "micro-train-step.json",
            trim_bundle(compile_(micro), {"train_step"}, kernels=False))
        for example, programs in (("moa_translate", {"forward"}),
                                  ("moa_mlm", {"loss"})):
            spec = os.path.join(ROOT, "examples", example + ".moe")
            out("bundle", example + ".json",
                trim_bundle(compile_(spec), programs, kernels=False))

        ckpt = os.path.join(tmp, "micro.safetensors")
        subprocess.run([moec, "train", micro, "--steps", "1", "--save", ckpt],
                       check=True, cwd=ROOT, stdout=subprocess.DEVNULL)
        with open(ckpt, "rb") as f:
            out("checkpoint", "micro.safetensors", f.read())

        sentences = os.path.join(tmp, "sentences.txt")
        with open(os.path.join(ROOT, "examples", "data", "sentences.txt")) as f:
            lines = f.readlines()[:300]
        with open(sentences, "w") as f:
            f.writelines(lines)
        for name, kind, size in (("small.model", "bpe", 64),
                                 ("unigram.model", "unigram", 80)):
            model = os.path.join(tmp, name)
            subprocess.run([moec, "tokenizer", "train", "--input", sentences,
                            "--model", model, "--type", kind,
                            "--vocab-size", str(size)],
                           check=True, stdout=subprocess.DEVNULL)
            with open(model, "rb") as f:
                out("sentencepiece", name, strip_normalizer(f.read()))
    finally:
        shutil.rmtree(tmp)

    f32 = struct.pack("<4f", 1.0, -2.0, 0.5, 3.25)
    out("checkpoint", "dtypes.safetensors", safetensors({
        "embed.weight": {"dtype": "F32", "shape": [2, 2],
                         "data_offsets": [0, 16]},
        "norm.scale": {"dtype": "BF16", "shape": [2],
                       "data_offsets": [16, 20]},
        "step": {"dtype": "I64", "shape": [], "data_offsets": [20, 28]},
        "empty": {"dtype": "F16", "shape": [0, 3], "data_offsets": [28, 28]},
    }, {"format": "moec-checkpoint", "step": "1"},
        f32 + b"\x80\x3f\x00\x40" + struct.pack("<q", 7)))
    out("checkpoint", "metadata-only.safetensors",
        safetensors({}, {"format": "moec-checkpoint"}))

    out("tokenizer", "sentence.txt", "The small cat sees a heavy book.\n")
    out("tokenizer", "words.txt", "the  small cat sat a dog")
    out("tokenizer", "utf8.txt", "naïve café — 日本語 ✓ [MASK] [CLS]")
    out("tokenizer", "invalid-utf8.bin", b"ab\xff\xfe\xc3(\xe2\x82")
    out("tokenizer", "ids.bin", struct.pack("<6i", 0, 255, 256, 261, -1,
                                            2**31 - 1))


if __name__ == "__main__":
    main()
