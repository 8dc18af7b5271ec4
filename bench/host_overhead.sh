#!/usr/bin/env bash
# The cuda device's host overhead, measured without a GPU: `moec train
# --device cuda` against the test suite's fake driver (build/lib/
# libmoec-fake-cuda-driver.so: device memory is host memory, launches are
# counted and nothing runs), so the time a training step takes is moec's
# own host work (launch shapes and parameters, the CUDA-graph replay, the
# batch pipeline, reading the step's scalars) plus the fake driver's calls:
# an upper bound on what moec adds to a real driver.
# Usage: bench/host_overhead.sh [EXAMPLE] [STEPS]; prints Markdown rows.
set -euo pipefail
cd "$(dirname "$0")/.."
moec=./build/bin/moec
fake=./build/lib/libmoec-fake-cuda-driver.so
example=${1:-examples/moe_lm.moe}
steps=${2:-200}
[ -x "$moec" ] && [ -f "$fake" ] || {
  echo "bench/host_overhead.sh: build moec and its tests first (scripts/build.sh)" >&2
  exit 1
}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export MOEC_CUDA_DRIVER_LIBRARY=$fake MOEC_CACHE_DIR=$work/cache \
  MOEC_FAKE_CUDA_KEEP_LAUNCHES=0
# The fake GPU is an sm_80; compile every kernel before timing anything.
"$moec" compile "$example" -o "$work/model.json" > /dev/null
"$moec" precompile "$work/model.json" --arch sm_80 > /dev/null
launches=$("$moec" compile "$example" --report | sed -n 's/^program train_step: \([0-9]*\) kernels/\1/p')

# The median step time of a run, steps after the first five (start-up and
# the first capture) only, from the step times moec itself records
# (--metrics time_s). Nothing waits for a GPU here, so a step's time is
# host work. (CPU time of a long run minus a short one, used before, was
# dominated by the start-up's run-to-run spread and came out below zero.)
perStepMicroseconds() {
  rm -f "$work/metrics.jsonl"
  MOEC_CUDA_GRAPHS=$1 "$moec" train "$work/model.json" --device cuda \
    --steps $((steps + 5)) --valid-batches 0 --metrics "$work/metrics.jsonl" \
    > /dev/null 2>&1
  python3 - "$work/metrics.jsonl" <<'PY'
import json, statistics, sys
times = [json.loads(line)["time_s"] for line in open(sys.argv[1])][5:]
print(f"{statistics.median(times) * 1e6:.0f}")
PY
}
plain=$(perStepMicroseconds 0)
graphs=$(perStepMicroseconds 1)
name=$(basename "$example" .moe)
echo "| $name, kernels launched one by one (MOEC_CUDA_GRAPHS=0) | $launches launches | $plain us/step | $(awk -v a="$plain" -v n="$launches" 'BEGIN { printf "%.1f", a / n }') us/launch |"
echo "| $name, one CUDA-graph replay per step | 1 graph | $graphs us/step | $(awk -v a="$plain" -v b="$graphs" -v n="$launches" 'BEGIN { printf "%.1f", (a - b) / n }') us/launch saved |"
