#!/usr/bin/env bash
# The moec GPU suite, run from a pack built by scripts/gpu-pack.sh:
#
#   run.sh OUTDIR
#
# 1. prints the GPU, driver, CUDA and NVRTC versions (moec info);
# 2. runs the cuda device's unit tests;
# 3. runs `moec check-kernels --device cuda` on every example and dtype;
# 4. trains every example on cuda and on the cpu with the same seed and
#    compares the loss curves; records the cold compile (empty kernel
#    cache), the warm start, ms/step, tokens/s and host time per step;
# 5. writes OUTDIR/results.md and OUTDIR/results.json (logs in OUTDIR/logs);
# 6. times the layer benchmarks against PyTorch eager, torch.compile and a
#    cuBLAS product of the same FLOPs (layers.sh; skipped without PyTorch)
#    and appends their table to OUTDIR/results.md.
#
# Exit status: 0 all passed; 1 a test, kernel check or loss comparison
# failed; 2 the pack cannot run here (its moec does not start, no python3);
# 3 no CUDA driver; 4 no GPU; 5 no NVRTC; 6 a GPU or NVRTC too old for
# moec. Environment: MOEC_PACK_STEPS (training steps, default 200),
# MOEC_PACK_ONLY (a regular expression: only the examples it matches).
set -uo pipefail
pack="$(cd "$(dirname "$0")" && pwd)"
if [ $# -ne 1 ]; then
  echo "usage: run.sh OUTDIR" >&2
  exit 2
fi
mkdir -p "$1/logs" || exit 2
out="$(cd "$1" && pwd)"
logs="$out/logs"
moec="$pack/bin/moec"
steps="${MOEC_PACK_STEPS:-200}"
only="${MOEC_PACK_ONLY:-.}"
export MOEC_FAKE_CUDA_DRIVER="$pack/lib/libmoec-fake-cuda-driver.so"
export MOEC_FAKE_CUBLASLT="$pack/lib/libmoec-fake-cublaslt.so"

say() { echo "run.sh: $*"; }
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.3f", b - a}'; }
# One status line per check, read back by summarize.py.
record() { printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" >> "$out/checks.tsv"; }
rm -f "$out/checks.tsv" "$out/runs.tsv"

# The pack itself: a loader or library problem ends here, in one line.
if ! "$moec" --version > "$logs/version.txt" 2>&1; then
  say "the pack's moec cannot start on this machine: $(head -n 1 "$logs/version.txt")"
  exit 2
fi
if ! command -v python3 > /dev/null; then
  say "python3 is needed to compare the loss curves and write the results"
  exit 2
fi

# The machine: driver, GPU, NVRTC, each missing piece with its own status.
"$moec" info --require cuda > "$logs/info.txt" 2> "$logs/info.err"
status=$?
cat "$logs/info.txt"
command -v nvidia-smi > /dev/null &&
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm \
    --format=csv,noheader > "$logs/nvidia-smi.txt" 2>&1 &&
  echo "nvidia-smi: $(cat "$logs/nvidia-smi.txt")"
if [ $status -ne 0 ]; then
  say "$(sed 's/^moec: //' "$logs/info.err" | head -n 1)"
  python3 "$pack/summarize.py" "$out" --unavailable "$status" > /dev/null
  exit $status
fi
gpu_arch=$(sed -n 's/^GPU 0: [^,]*, \(sm_[0-9]*\).*/\1/p' "$logs/info.txt")
tiles=sm_80
[ "${gpu_arch#sm_}" -ge 90 ] && tiles=sm_90
say "GPU 0 is $gpu_arch: running the $tiles bundles"

mkdir -p "$out/bundles"
for z in "$pack"/bundles/*."$tiles".*.bundle.json.gz; do
  gunzip -c "$z" > "$out/bundles/$(basename "$z" .gz)"
done
cp "$pack"/bundles/*.txt "$out/bundles/" 2>/dev/null || true
bundles=$(ls "$out"/bundles/*.bundle.json | grep -E "$only")

# Unit tests of the cuda device.
for t in moec-cuda-tests moec-cuda-device-tests moec-cuda-gpu-tests; do
  start=$(now)
  "$pack/bin/$t" --gtest_output="xml:$logs/$t.xml" > "$logs/$t.txt" 2>&1
  rc=$?
  summary=$(grep -E '^\[  (PASSED|FAILED|SKIPPED) +\]' "$logs/$t.txt" | tr '\n' ' ')
  record unit "$t" "$rc" "$(elapsed "$start" "$(now)") s; $summary"
  say "$t: exit $rc; $summary"
done

# Every kernel against the cpu device, on random inputs.
for b in $bundles; do
  name=$(basename "$b" .bundle.json)
  "$moec" check-kernels "$b" --device cuda > "$logs/check-$name.txt" 2>&1
  rc=$?
  record check-kernels "$name" "$rc" "$(tail -n 1 "$logs/check-$name.txt")"
  say "check-kernels $name: exit $rc; $(tail -n 1 "$logs/check-$name.txt")"
done

# Training: cold compile, warm start, then the curves on cuda and cpu.
train() { # name device cache steps metrics log
  local start rc
  start=$(now)
  MOEC_CACHE_DIR="$3" "$moec" train "$b" --device "$2" --steps "$4" --seed 1 \
    --valid-batches 0 --log-every 50 --metrics "$5" > "$6" 2>&1
  rc=$?
  echo "$(elapsed "$start" "$(now)") $rc"
}
for b in $bundles; do
  name=$(basename "$b" .bundle.json)
  cache="$out/cache/$name"
  rm -rf "$cache"
  rm -f "$logs/$name".*.jsonl
  read -r cold rc_cold < <(train "$name" cuda "$cache" 1 \
    "$logs/$name.cold.jsonl" "$logs/train-$name-cold.txt")
  read -r warm rc_warm < <(train "$name" cuda "$cache" 1 \
    "$logs/$name.warm.jsonl" "$logs/train-$name-warm.txt")
  read -r gpu rc_gpu < <(train "$name" cuda "$cache" "$steps" \
    "$logs/$name.cuda.jsonl" "$logs/train-$name-cuda.txt")
  read -r cpu rc_cpu < <(train "$name" cpu "$cache" "$steps" \
    "$logs/$name.cpu.jsonl" "$logs/train-$name-cpu.txt")
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "$cold" "$rc_cold" \
    "$warm" "$rc_warm" "$gpu" "$rc_gpu" "$cpu" "$rc_cpu" >> "$out/runs.tsv"
  say "train $name: cold start $cold s, warm start $warm s, $steps steps" \
      "cuda $gpu s (exit $rc_gpu), cpu $cpu s (exit $rc_cpu)"
done

python3 "$pack/summarize.py" "$out" --steps "$steps"
status=$?

# The layers against PyTorch on the same GPU, when it is installed.
if python3 -c 'import torch; assert torch.cuda.is_available()' 2> /dev/null; then
  "$pack/layers.sh" "$out" "$tiles" || status=1
  { echo; cat "$out/layers.md"; } >> "$out/results.md"
else
  say "no PyTorch with CUDA here: the layer benchmarks against it are skipped"
fi
say "results in $out/results.md and $out/results.json"
exit $status
