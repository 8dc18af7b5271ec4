#!/usr/bin/env bash
# The sanitizer run (CI runs it after scripts/test.sh): builds the fast unit
# tests and the fuzzers with clang 19, ASan and UBSan in build-asan/, runs
# the tests, then each fuzzer for MOEC_FUZZ_SECONDS (default 60) from its
# seed corpus in test/fuzz/corpus. Fails on any test failure, crash, leak
# or sanitizer report; a fuzzer's failing input is kept as
# build-asan/fuzz/<target>/crash-* (and the like) and its log printed.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-deps.sh

jobs="${MOEC_JOBS:-$(nproc)}"
seconds="${MOEC_FUZZ_SECONDS:-60}"
build=build-asan
start=$SECONDS

# Unit tests: the runtime and its support library, the cuda device's host
# side (against a fake driver), the emu device, the driver's command line,
# the frontend, and the whole-model tests but for the three example
# trainings (about 200 s each even uninstrumented). The kernel-check tests
# are left out: 15 minutes here, most of it the host compiler building
# every example's kernels for the emu device (scripts/test.sh runs them).
tests=(moec-support-tests moec-driver-tests moec-runtime-tests
       moec-cuda-tests moec-cuda-device-tests moec-emu-tests
       moec-frontend-tests moec-defs-tests moec-model-tests)
declare -A filters=(
  [moec-model-tests]=-Examples/ExampleTraining.*:Training.MoaMaskedLanguageModelHalvesItsLoss:Training.MoaTranslationReachesBleu50
)
fuzzers=(spec bundle checkpoint tokenizer sentencepiece)

export ASAN_OPTIONS="detect_leaks=1:detect_stack_use_after_return=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"

if [ ! -f $build/build.ninja ]; then
  # Assertions on, libstdc++'s too; clang warns about libstdc++ 12's own
  # deprecated helpers, and that -O1 (no vectorizer) leaves the `omp simd`
  # loops scalar, which is all this build needs of them.
  flags="-O1 -g1 -D_GLIBCXX_ASSERTIONS"
  cmake -S . -B $build -G Ninja -DCMAKE_BUILD_TYPE=Debug \
    -DCMAKE_CXX_FLAGS_DEBUG="$flags -Wno-deprecated-declarations -Wno-pass-failed" \
    -DCMAKE_C_FLAGS_DEBUG="$flags" \
    -DCMAKE_C_COMPILER=clang-19 -DCMAKE_CXX_COMPILER=clang++-19 \
    -DMOEC_SANITIZE=address,undefined -DMOEC_FUZZ=ON \
    -DMLIR_DIR=/usr/lib/llvm-19/lib/cmake/mlir \
    -DLLVM_EXTERNAL_LIT=/usr/lib/llvm-19/build/utils/lit/lit.py
fi
targets=("${tests[@]}")
for f in "${fuzzers[@]}"; do targets+=("moec-fuzz-$f"); done
cmake --build $build -j "$jobs" --target "${targets[@]}"
echo "sanitize: built in $((SECONDS - start)) s"

status=0
for t in "${tests[@]}"; do
  t0=$SECONDS
  if ! $build/bin/$t --gtest_brief=1 --gtest_filter="${filters[$t]:-*}" \
      >"$build/$t.log" 2>&1; then
    tail -n 60 "$build/$t.log"
    echo "sanitize: $t FAILED (log: $build/$t.log)"
    status=1
    continue
  fi
  echo "sanitize: $t passed in $((SECONDS - t0)) s"
done

# Fuzzers, $jobs at a time; each writes what it finds under build-asan/fuzz.
run_fuzzer() {
  local name=$1 dir=$build/fuzz/$1
  mkdir -p "$dir/corpus"
  local dict=()
  if [ -f test/fuzz/$name.dict ]; then dict=(-dict=test/fuzz/$name.dict); fi
  if $build/bin/moec-fuzz-$name "$dir/corpus" test/fuzz/corpus/$name \
      "${dict[@]}" -max_total_time="$seconds" -timeout=20 -rss_limit_mb=2048 \
      -artifact_prefix="$dir/" -print_final_stats=1 >"$dir/log" 2>&1; then
    echo "sanitize: fuzzer $name: $(grep -E '^Done|stat::number_of_executed_units' "$dir/log" | head -n 1)"
  else
    # The report, from its first line.
    sed -n '/ERROR\|runtime error\|ALARM\|terminate called/,$p' "$dir/log" |
      head -n 100
    echo "sanitize: fuzzer $name FAILED (log: $dir/log; input: $(ls "$dir"/crash-* "$dir"/leak-* "$dir"/timeout-* "$dir"/oom-* 2>/dev/null | head -n 1))"
    return 1
  fi
}
export -f run_fuzzer
export build seconds
printf '%s\n' "${fuzzers[@]}" |
  xargs -P "$jobs" -I{} bash -c 'run_fuzzer {}' || status=1

echo "sanitize: $((SECONDS - start)) s in all"
if [ $status -ne 0 ]; then
  echo "sanitize: FAILED"
else
  echo "sanitize: all tests and fuzzers passed"
fi
exit $status
