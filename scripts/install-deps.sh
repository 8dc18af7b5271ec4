#!/usr/bin/env bash
# Installs the Debian 12 packages moec builds and tests with. Idempotent: packages
# already present are skipped, and apt-get update runs only when something is missing.
set -euo pipefail

packages=(
  build-essential cmake ninja-build git python3
  llvm-19-dev llvm-19-tools libmlir-19-dev mlir-19-tools
  libfmt-dev libgtest-dev libgmock-dev nlohmann-json3-dev
  libopenblas-openmp-dev libboost-context-dev
  libzstd-dev libsentencepiece-dev zlib1g-dev
  python3-torch
  # scripts/sanitize.sh: clang with its sanitizer and libFuzzer runtimes, and
  # the OpenMP runtime clang's -fopenmp links.
  clang-19 libclang-rt-19-dev libfuzzer-19-dev libomp-19-dev
)

missing=()
for p in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  # (A package installed for two architectures prints its status twice.)
  [[ $status == *"install ok installed"* ]] || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
echo "install-deps: installing ${missing[*]}"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
