#!/usr/bin/env bash
# Installs the Debian packages (when missing), configures and builds moec in
# build/. Safe to run again: each step does only what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-deps.sh

jobs="${MOEC_JOBS:-$(nproc)}"
if [ ! -f build/build.ninja ]; then
  cmake -S . -B build -G Ninja \
    -DCMAKE_BUILD_TYPE="${MOEC_BUILD_TYPE:-Release}" \
    -DMLIR_DIR=/usr/lib/llvm-19/lib/cmake/mlir \
    -DLLVM_EXTERNAL_LIT=/usr/lib/llvm-19/build/utils/lit/lit.py
fi
cmake --build build -j "$jobs"
