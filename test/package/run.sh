#!/usr/bin/env bash
# Installs moec into a scratch prefix, builds test/package against it with
# find_package(moec), runs the runtime consumer on a bundle compiled by the
# installed moec, and the compiler consumer on a spec.
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
"$work/prefix/bin/moec" compile "$src/examples/moe_lm.moe" -o "$work/model.bundle.json"
"$work/build/consumer" "$work/model.bundle.json"
if [ -x "$work/build/compile_and_train" ]; then
  # MLIR is inside libmoec_compiler.so; only Debian's libLLVM.so.19 is
  # loaded beside it.
  # (ldd's list in full first: grep -q quitting early under pipefail
  # would read as no match.)
  libraries=$(ldd "$work/build/compile_and_train")
  if grep -qi 'libMLIR' <<< "$libraries"; then
    echo "compile_and_train links MLIR dynamically" >&2
    exit 1
  fi
  "$work/build/compile_and_train" "$src/examples/moe_lm.moe"
fi
