#!/usr/bin/env bash
# The main job: build moec, compile examples/moe_lm.moe, train it on the cpu
# device, save a checkpoint, reload it, generate text from a prompt, and show
# each MoE layer's expert load.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/build.sh
mkdir -p out

echo "== compile"
./build/bin/moec compile examples/moe_lm.moe -o out/moe_lm.bundle.json
echo "wrote out/moe_lm.bundle.json"

echo "== train (cpu)"
./build/bin/moec train out/moe_lm.bundle.json --device cpu \
  --save out/moe_lm.safetensors --metrics out/moe_lm.metrics.jsonl

echo "== reload and generate"
./build/bin/moec run out/moe_lm.bundle.json --weights out/moe_lm.safetensors \
  --prompt "The small cat " --max-tokens 48
