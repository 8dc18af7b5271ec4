#!/usr/bin/env bash
# The cuda device's host overhead, measured without a GPU: `moec train
# --device cuda` against the test suite's fake driver (build/lib/
# libmoec-fake-cuda-driver.so: device memory is host memory, launches are
# counted and nothing runs), so the CPU time a training step costs is moec's
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

# CPU seconds (user + system) of a run of N steps.
cpuSeconds() {
  local TIMEFORMAT='%U %S' times
  times=$({ time MOEC_CUDA_GRAPHS=$1 "$moec" train "$work/model.json" \
    --device cuda --steps "$2" --valid-batches 0 > /dev/null 2>&1; } 2>&1)
  awk -v t="$times" 'BEGIN { split(t, a, " "); print a[1] + a[2] }'
}
# Per step: the difference between a long and a short run, so that start-up
# (loading, drawing weights, the first capture) cancels out.
perStepMicroseconds() {
  local short long
  short=$(cpuSeconds "$1" 5)
  long=$(cpuSeconds "$1" $((steps + 5)))
  awk -v a="$short" -v b="$long" -v n="$steps" 'BEGIN { printf "%.0f", (b - a) / n * 1e6 }'
}
plain=$(perStepMicroseconds 0)
graphs=$(perStepMicroseconds 1)
name=$(basename "$example" .moe)
echo "| $name, kernels launched one by one (MOEC_CUDA_GRAPHS=0) | $launches launches | $plain us/step | $(awk -v a="$plain" -v n="$launches" 'BEGIN { printf "%.1f", a / n }') us/launch |"
echo "| $name, one CUDA-graph replay per step | 1 graph | $graphs us/step | $(awk -v a="$plain" -v b="$graphs" -v n="$launches" 'BEGIN { printf "%.1f", (a - b) / n }') us/launch saved |"
