#!/usr/bin/env bash
# Developer helper: compiles the device library plus kernels read from
# stdin (moec-translate --moe-to-cuda output) with nvcc for sm_80 and sm_90,
# printing ptxas resource usage. Usage: ... | scripts/nvcc-check.sh
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for f in defs prelude math reduce colsum scan mma gemm norm attention router experts losses optim; do cat "$root/runtime/device/$f.cuh"; done > "$work/all.cu"
cat >> "$work/all.cu"
for arch in sm_80 sm_90; do
  /usr/local/cuda/bin/nvcc -std=c++17 -arch=$arch -Xptxas -v -c "$work/all.cu" -o "$work/all.o" 2>&1 | grep -E "error|warning|registers|spill" || true
done
