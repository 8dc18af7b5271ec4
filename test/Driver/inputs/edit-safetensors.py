"""Rewrites a safetensors file for the checkpoint tests.

usage: edit-safetensors.py IN OUT metadata KEY VALUE   (sets a metadata entry)
       edit-safetensors.py IN OUT flip OFFSET          (flips a bit of the data)
"""
import json
import struct
import sys

source, target, action = sys.argv[1:4]
blob = open(source, "rb").read()
(length,) = struct.unpack("<Q", blob[:8])
header = json.loads(blob[8:8 + length])
data = bytearray(blob[8 + length:])
if action == "metadata":
    header.setdefault("__metadata__", {})[sys.argv[4]] = sys.argv[5]
elif action == "flip":
    data[int(sys.argv[4])] ^= 0x01
else:
    sys.exit("unknown action " + action)
text = json.dumps(header).encode()
text += b" " * (-len(text) % 8)
open(target, "wb").write(struct.pack("<Q", len(text)) + text + bytes(data))
