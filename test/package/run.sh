#!/usr/bin/env bash
# Installs the runtime into a scratch prefix, builds test/package against it
# with find_package(moec), and runs it on a freshly compiled bundle.
# Usage: run.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
src="$1"
build="$2"
work="$build/test/package-work"
rm -rf "$work"
mkdir -p "$work"
cmake --install "$build" --prefix "$work/prefix" --component Unspecified >/dev/null
cmake -S "$src/test/package" -B "$work/build" -G Ninja \
  -DCMAKE_PREFIX_PATH="$work/prefix" >/dev/null
cmake --build "$work/build" >/dev/null
"$build/bin/moec" compile "$src/examples/moe_lm.moe" -o "$work/model.bundle.json"
"$work/build/consumer" "$work/model.bundle.json"
