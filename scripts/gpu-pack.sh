#!/usr/bin/env bash
# Builds the GPU pack: a self-contained folder (at most 48 MiB) that a bare
# CUDA machine (driver, CUDA, a shell, python3; no LLVM/MLIR, fmt, OpenBLAS
# or Boost) can run the whole GPU suite from:
#
#   bin/     the runtime-only moec and the cuda device's test binaries
#   lib/     libmoec_runtime.so (OpenBLAS inside), the C++ runtime libraries,
#            fmt and SentencePiece they need, found through an $ORIGIN rpath; the fake driver the
#            device tests use
#   bundles/ every example compiled here for sm_80 and sm_90, f32 and bf16
#            (gzip; run.sh unpacks them)
#   layers/  the layer benchmarks (MoE FFN, MoA, MH-MoE, MAE at d 1024, 8 x
#            1024 tokens, bf16) with their FLOPs (layer-bundles.sh)
#   run.sh   the suite: run.sh OUTDIR (see README.md, "Running on a GPU
#            machine without MLIR")
#
# Usage: scripts/gpu-pack.sh DIR
# Environment: MOEC_COMPILER, a full moec to compile the bundles with
# (default build/bin/moec, built by scripts/build.sh); MOEC_PACK_BUILD, the
# build tree of the runtime-only moec (default build-pack); MOEC_JOBS.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
if [ $# -ne 1 ]; then
  echo "usage: scripts/gpu-pack.sh DIR" >&2
  exit 2
fi
compiler="${MOEC_COMPILER:-$root/build/bin/moec}"
tree="${MOEC_PACK_BUILD:-$root/build-pack}"
jobs="${MOEC_JOBS:-$(nproc)}"
limit=$((48 * 1024 * 1024))

if [ ! -x "$compiler" ]; then
  echo "gpu-pack: no compiler at $compiler: run scripts/build.sh first, or" \
       "set MOEC_COMPILER to a full moec" >&2
  exit 1
fi

# Replace an earlier pack, never anything else.
if [ -e "$1" ] && [ -n "$(ls -A "$1" 2>/dev/null)" ] && [ ! -f "$1/.moec-pack" ]; then
  echo "gpu-pack: $1 exists and is not a moec pack; name a new folder" >&2
  exit 1
fi

echo "== building the runtime-only moec in $tree"
if [ ! -f "$tree/build.ninja" ]; then
  # The log goes inside the build tree, which the checkout ignores.
  mkdir -p "$tree"
  cmake -S "$root" -B "$tree" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DMOEC_BUILD_COMPILER=OFF -DMOEC_PORTABLE=ON -DMOEC_BUILD_TESTS=ON \
    > "$tree/configure.log" 2>&1 || { cat "$tree/configure.log" >&2; exit 1; }
fi
tests=(moec-cuda-tests moec-cuda-device-tests moec-cuda-gpu-tests)
cmake --build "$tree" -j "$jobs" --target moec moec-fake-cuda-driver \
  moec-fake-cublaslt "${tests[@]}"

rm -rf "$1"
mkdir -p "$1"
dir="$(cd "$1" && pwd)"
echo "== assembling $dir"
touch "$dir/.moec-pack"
mkdir -p "$dir/bin" "$dir/lib" "$dir/bundles"
cp "$tree/bin/moec" "$dir/bin/"
for t in "${tests[@]}"; do cp "$tree/bin/$t" "$dir/bin/"; done
cp "$tree/lib/libmoec_runtime.so" "$tree/lib/libmoec-fake-cuda-driver.so" \
  "$tree/lib/libmoec-fake-cublaslt.so" "$dir/lib/"
# The C++ and OpenMP runtimes this compiler links against (a GPU machine's
# own may be older than what the binaries need), fmt, SentencePiece (Debian
# ships both as shared libraries only) and zlib (checkpoint checksums).
for lib in libstdc++.so.6 libgcc_s.so.1 libgomp.so.1 libfmt.so.9 \
           libsentencepiece.so.0 libsentencepiece_train.so.0 libz.so.1; do
  path=$(ldd "$tree/lib/libmoec_runtime.so" | awk -v l="$lib" '$1 == l {print $3}')
  if [ -z "$path" ]; then
    echo "gpu-pack: cannot find $lib" >&2
    exit 1
  fi
  cp -L "$path" "$dir/lib/$lib"
done
strip --strip-unneeded "$dir"/bin/* "$dir"/lib/libmoec_runtime.so \
  "$dir"/lib/libmoec-fake-cuda-driver.so "$dir"/lib/libmoec-fake-cublaslt.so

# Nothing may resolve outside the pack but the C library and the loader.
for f in "$dir"/bin/* "$dir"/lib/libmoec_runtime.so; do
  outside=$(ldd "$f" | awk -v d="$dir/" '$2 == "=>" && index($3, d) != 1 {print $1}' |
            grep -vE '^(libc|libm|libdl|libpthread|librt)\.so' || true)
  if [ -n "$outside" ]; then
    echo "gpu-pack: $f needs libraries outside the pack: $outside" >&2
    exit 1
  fi
done

echo "== compiling the examples"
for spec in "$root"/examples/*.moe; do
  name=$(basename "$spec" .moe)
  for arch in sm_80 sm_90; do
    for dtype in f32 bf16; do
      out="$dir/bundles/$name.$arch.$dtype.bundle.json"
      "$compiler" compile "$spec" --arch "$arch" --dtype "$dtype" -o "$out"
      gzip -9 "$out"
    done
  done
done

# The examples' data files travel beside the bundles, where the runtime
# looks when the path a bundle recorded does not exist on the GPU machine.
cp "$root"/examples/data/*.txt "$dir/bundles/"

echo "== compiling the layer benchmarks"
bash "$root/scripts/gpu-pack/layer-bundles.sh" "$compiler" "$dir/layers"

cp "$root/scripts/gpu-pack/run.sh" "$root/scripts/gpu-pack/summarize.py" \
  "$root/scripts/gpu-pack/layers.sh" "$root/scripts/gpu-pack/budget.sh" \
  "$root/bench/torch_layers.py" "$dir/"
chmod +x "$dir/run.sh" "$dir/layers.sh"
"$dir/bin/moec" --version > /dev/null

size=$(du -sb "$dir" | cut -f1)
if [ "$size" -gt "$limit" ]; then
  echo "gpu-pack: $dir is $size bytes, over the 48 MiB limit" >&2
  exit 1
fi
echo "gpu-pack: $dir, $(( (size + 1048575) / 1048576 )) MiB:" \
     "$(ls "$dir/bundles" | wc -l) bundles; run it with $dir/run.sh OUTDIR"
