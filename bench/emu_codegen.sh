#!/usr/bin/env bash
# Times the generated-code paths on a machine without a GPU: the kernel
# check of every example on the emu device (cold and warm kernel cache),
# training on the emu device, and NVRTC precompilation (cold and warm).
# Usage: [DTYPE=bf16] bench/emu_codegen.sh [build dir]. Uses a fresh cache
# directory; DTYPE overrides the specs' dtype.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
moec="${1:-$root/build}/bin/moec"
cache=$(mktemp -d)
trap 'rm -rf "$cache"' EXIT
export MOEC_CACHE_DIR="$cache"
dtype=()
if [ -n "${DTYPE:-}" ]; then dtype=(--dtype "$DTYPE"); fi

seconds() { # runs "$@" quietly and prints its wall time
  local start end
  start=$(date +%s.%N)
  "$@" > "$cache/last.log" 2>&1
  end=$(date +%s.%N)
  echo "$end - $start" | bc
}

echo "kernel check on the emu device (moec check-kernels):"
for spec in "$root"/examples/*.moe; do
  name=$(basename "$spec" .moe)
  cold=$(seconds "$moec" check-kernels "$spec" "${dtype[@]}")
  warm=$(seconds "$moec" check-kernels "$spec" "${dtype[@]}")
  summary=$(tail -n 1 "$cache/last.log")
  echo "  $name: cold cache ${cold}s, warm ${warm}s -- $summary"
done

echo "training on the emu device, 20 steps of examples/moe_lm.moe:"
"$moec" train "$root/examples/moe_lm.moe" "${dtype[@]}" --device emu --steps 20 \
  --log-every 20 --valid-batches 0 | grep "step    20"
"$moec" train "$root/examples/moe_lm.moe" "${dtype[@]}" --device cpu --steps 20 \
  --log-every 20 --valid-batches 0 | grep "step    20"

if [ -e /usr/local/cuda/lib64/libnvrtc.so ]; then
  echo "NVRTC precompilation of examples/moe_lm.moe for sm_90:"
  for pass in first second; do
    t=$(seconds "$moec" precompile "$root/examples/moe_lm.moe" "${dtype[@]}" --arch sm_90)
    echo "  $pass run: ${t}s -- $(head -n 1 "$cache/last.log")"
  done
fi
