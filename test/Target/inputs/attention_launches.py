"""Prints the attention launches of a bundle's programs, one a line:
program, kernel, and whether the row statistics (lse, argument 4) and the
cache length (argument 5) are buffers or null arguments."""
import json
import sys

bundle = json.load(open(sys.argv[1]))
kernels = {k["name"]: k["source"] for k in bundle["cuda"]["kernels"]}
for name in sorted(bundle["programs"]):
    for group in bundle["programs"][name]["groups"]:
        if group["kind"] != "attention":
            continue
        for launch in group["launches"]:
            kind = ["null" if b < 0 else "buffer" for b in launch["buffers"]]
            print(f"{name} {launch['kernel']} lse={kind[4]} past={kind[5]}")
print(f"kernels {len(kernels)}")
