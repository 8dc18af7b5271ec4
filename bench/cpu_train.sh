#!/usr/bin/env bash
# CPU training throughput of examples/moe_lm.moe: compile time, ms/step and
# tokens/s with 2 threads and 1 thread, and the time per op.
# Usage: [DTYPE=bf16] bench/cpu_train.sh [STEPS]   (run from the repository
# root after a build); DTYPE overrides the spec's dtype.
set -euo pipefail
steps="${1:-100}"
moec=./build/bin/moec
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
dtype=()
if [ -n "${DTYPE:-}" ]; then dtype=(--dtype "$DTYPE"); fi

echo "== compile"
/usr/bin/time -f "compile: %e s wall, %M KiB max RSS" \
  "$moec" compile examples/moe_lm.moe "${dtype[@]}" -o "$out/lm.json"

for threads in 2 1; do
  echo "== train, OMP_NUM_THREADS=$threads, $steps steps"
  OMP_NUM_THREADS=$threads "$moec" train "$out/lm.json" --steps "$steps" \
    --log-every "$steps" --valid-batches 0 | grep -E "^step +$steps/"
done

echo "== time per op (2 threads)"
OMP_NUM_THREADS=2 "$moec" train "$out/lm.json" --steps 20 --log-every 20 \
  --valid-batches 0 --profile | sed -n '/time per op/,/expert load/p' | sed -n 1,12p
