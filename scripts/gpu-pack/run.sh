#!/usr/bin/env bash
# The moec GPU suite, run from a pack built by scripts/gpu-pack.sh:
#
#   run.sh OUTDIR
#
# 1. prints the GPU, driver, CUDA and NVRTC versions (moec info);
# 2. runs the cuda device's unit tests (each stopped after
#    MOEC_PACK_UNIT_CAP_S seconds, default 120: a hang fails);
# 3. for every example and dtype, moe_lm first: a cold start (empty kernel
#    cache) and a warm one, `moec check-kernels --device cuda` from the
#    kernels the cold start compiled, then training on cuda and on the cpu
#    with the same seed and a comparison of the loss curves; records the
#    cold compile, the warm start, ms/step, tokens/s and host time per step;
#    then, from the weights the device trained, the held-out loss per batch
#    without gradients (moec eval) and generation with the KV cache (moec
#    run, ms per token; translation for encoder-decoders), on the device;
# 4. writes OUTDIR/results.md and OUTDIR/results.json after every example,
#    so that a run cut short still leaves what it measured;
# 5. times the layer benchmarks against PyTorch eager, torch.compile and a
#    cuBLAS product of the same FLOPs (layers.sh; skipped without PyTorch),
#    their table at the end of OUTDIR/results.md;
# 6. packs the logs (OUTDIR/logs) into OUTDIR/logs.tar.gz: results.md,
#    results.json and logs.tar.gz are the whole record.
#
# Exit status: 0 all passed; 1 a test, kernel check, loss comparison,
# evaluation or generation failed; 2 the pack cannot run here (its moec
# does not start, no python3) or a setting below is not what it must be
# (found before OUTDIR is touched); 3 no CUDA driver; 4 no GPU; 5 no
# NVRTC; 6 a GPU or NVRTC too old for moec, or NVRTC newer than the
# driver; 7 the time budget ended the suite early and everything that ran
# passed. Environment:
#   MOEC_PACK_STEPS     training steps per run (default 200)
#   MOEC_PACK_EVAL_BATCHES    held-out batches moec eval times (default 6)
#   MOEC_PACK_GENERATE_TOKENS tokens moec run generates (default 65)
#   MOEC_PACK_ONLY      a regular expression: only the bundles it matches
#   MOEC_PACK_BUDGET_S  seconds the whole suite may take (default 0: no
#                       limit); work that would start later is recorded as
#                       skipped, and a command still running at the end is
#                       stopped. The examples get the first 55% when the
#                       layer benchmarks will run (their commands stop
#                       then), the layers the rest; an example that would
#                       start after the 55% runs after the layers, if
#                       they leave time.
#   MOEC_PACK_EXAMPLES_SHARE  that share in percent (default 55; set where
#                       no layers run, it only sends the examples past it
#                       to the end of the queue)
#   MOEC_PACK_DEVICE    cuda (default), or emu: the same suite on the emu
#                       device, which needs no GPU (no cuda unit tests, no
#                       layer benchmarks), to check the suite itself
set -uo pipefail
pack="$(cd "$(dirname "$0")" && pwd)"
if [ $# -ne 1 ]; then
  echo "usage: run.sh OUTDIR" >&2
  exit 2
fi
# whole NAME DEFAULT MIN MAX: $NAME, else DEFAULT, as a whole number from
# MIN to MAX (08 is eight, not a bad octal number); anything else ends
# run.sh, status 2.
whole() {
  local value="${!1:-$2}"
  case "$value" in
    ''|*[!0-9]*) echo "run.sh: $1 must be a whole number, not '$value'" >&2
                 return 2 ;;
  esac
  value=${value#"${value%%[!0]*}"} # no leading zeros: 10# of 19 digits wraps
  if [ ${#value} -gt 9 ] || [ "${value:-0}" -lt "$3" ] || [ "${value:-0}" -gt "$4" ]; then
    echo "run.sh: $1 must be from $3 to $4, not '${!1}'" >&2
    return 2
  fi
  echo "${value:-0}"
}
# Every setting is checked before anything is written.
steps=$(whole MOEC_PACK_STEPS 200 1 1000000) || exit 2
budget=$(whole MOEC_PACK_BUDGET_S 0 0 1000000) || exit 2
eval_batches=$(whole MOEC_PACK_EVAL_BATCHES 6 1 100000) || exit 2
generate_tokens=$(whole MOEC_PACK_GENERATE_TOKENS 65 1 100000) || exit 2
share_set="${MOEC_PACK_EXAMPLES_SHARE:-}"
share=$(whole MOEC_PACK_EXAMPLES_SHARE 55 0 100) || exit 2
unit_cap=$(whole MOEC_PACK_UNIT_CAP_S 120 1 100000) || exit 2
# layers.sh's, checked (and written plainly) here so that a bad one costs
# no examples' time.
layer_steps=$(whole MOEC_PACK_LAYER_STEPS 12 1 100000) || exit 2
torch_cap=$(whole MOEC_PACK_TORCH_CAP_S 150 1 100000) || exit 2
export MOEC_PACK_LAYER_STEPS="$layer_steps" MOEC_PACK_TORCH_CAP_S="$torch_cap"
device="${MOEC_PACK_DEVICE:-cuda}"
case "$device" in
  cuda|emu) ;;
  *) echo "run.sh: MOEC_PACK_DEVICE must be cuda or emu, not '$device'" >&2
     exit 2 ;;
esac
# OUTDIR is run.sh's own: a new or empty folder, or one an earlier run
# marked; whatever an earlier run left there goes first.
if [ -n "$(ls -A "$1" 2>/dev/null)" ] && [ ! -f "$1/.moec-suite" ]; then
  echo "run.sh: $1 exists and holds no earlier results of run.sh; name a new folder" >&2
  exit 2
fi
mkdir -p "$1" || exit 2
out="$(cd "$1" && pwd)"
logs="$out/logs"
rm -rf "$logs" "$out/bundles" "$out/cache" "$out/layers" "$out/weights"
rm -f "$out"/*.tsv "$out/layers.md" "$out/results.md" "$out/results.json" \
  "$out/logs.tar.gz"
touch "$out/.moec-suite"
mkdir -p "$logs" || exit 2
moec="$pack/bin/moec"
only="${MOEC_PACK_ONLY:-.}"
export MOEC_FAKE_CUDA_DRIVER="$pack/lib/libmoec-fake-cuda-driver.so"
export MOEC_FAKE_CUBLASLT="$pack/lib/libmoec-fake-cublaslt.so"

say() { echo "run.sh: $*"; }
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.3f", b - a}'; }
# One status line per check, read back by summarize.py.
record() {
  printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$(printf '%s' "$4" | tr '\t\r\n' '   ')" \
    >> "$out/checks.tsv"
}


# The time budget: an end for the whole suite, a few seconds kept back for
# the summary and the log archive. Without a budget the end is far away.
started=$(date +%s)
reserve=10
end=$((budget > 0 ? started + budget - reserve : started + 10 ** 9))
unset MOEC_PACK_END
[ "$budget" -gt 0 ] && export MOEC_PACK_END="$end"
# Seconds left before `$1` (default: the suite's end).
left() { echo $(( ${1:-$end} - $(date +%s) )); }
# Runs a command, stopped when the suite's end comes, or the end of the
# phase (`until`) when that is sooner: status 124, also when it had to be
# killed after ignoring the stop.
until=$end
# shellcheck source=budget.sh
. "$pack/budget.sh"
limited() {
  if [ "$budget" -gt 0 ]; then
    run_until "$until" "$@"
  else
    "$@"
  fi
}
# Whether work may start before `$2` (epoch seconds); if not, records the
# work `$1` as skipped.
starts() {
  [ "$(left "$2")" -gt 0 ] && return 0
  record "${1%% *}" "${1#* }" skipped "not started: the time budget ran out"
  say "$1: skipped, the time budget ran out"
  return 1
}
summarize() { python3 "$pack/summarize.py" "$out" --steps "$steps" --device "$device" "$@"; }
archive() {
  local parts=(logs) f
  for f in checks.tsv runs.tsv layers.tsv; do
    [ -f "$out/$f" ] && parts+=("$f")
  done
  tar -czf "$out/logs.tar.gz" -C "$out" "${parts[@]}"
}

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
if [ "$device" = cuda ]; then
  "$moec" info --require cuda > "$logs/info.txt" 2> "$logs/info.err"
  status=$?
else
  "$moec" info > "$logs/info.txt" 2> "$logs/info.err"
  status=0
fi
cat "$logs/info.txt"
command -v nvidia-smi > /dev/null &&
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm \
    --format=csv,noheader > "$logs/nvidia-smi.txt" 2>&1 &&
  echo "nvidia-smi: $(cat "$logs/nvidia-smi.txt")"
if [ $status -ne 0 ]; then
  say "$(sed 's/^moec: //' "$logs/info.err" | head -n 1)"
  summarize --unavailable "$status" > /dev/null
  exit $status
fi
tiles=sm_90
if [ "$device" = cuda ]; then
  gpu_arch=$(sed -n 's/^GPU 0: [^,]*, \(sm_[0-9]*\).*/\1/p' "$logs/info.txt")
  [ "${gpu_arch#sm_}" -ge 90 ] || tiles=sm_80
  say "GPU 0 is $gpu_arch: running the $tiles bundles"
else
  say "the emu device: running the $tiles bundles without a GPU"
fi

# Whether the layer benchmarks will run decides the examples' share of a
# budget.
layers=0
if [ "$device" = cuda ] &&
   python3 -c 'import torch; assert torch.cuda.is_available()' 2> /dev/null; then
  layers=1
fi
examples_end=$end
if [ "$budget" -gt 0 ] && { [ $layers -eq 1 ] || [ -n "$share_set" ]; }; then
  examples_end=$((started + budget * share / 100))
fi

mkdir -p "$out/bundles"
for z in "$pack"/bundles/*."$tiles".*.bundle.json.gz; do
  gunzip -c "$z" > "$out/bundles/$(basename "$z" .gz)"
done
cp "$pack"/bundles/*.txt "$out/bundles/" 2>/dev/null || true
# moe_lm first (the base model every layer benchmark grows), then the
# other examples; f32 before bf16.
bundles=$(printf '%s\n' "$out"/bundles/*.bundle.json | grep -E "$only" |
  awk '{ n = split($0, p, "/"); split(p[n], e, ".");
         print (e[1] == "moe_lm" ? 0 : 1), e[1], (e[3] == "f32" ? 0 : 1), $0 }' |
  sort -k1,1n -k2,2 -k3,3n | awk '{ print $4 }')

# Unit tests of the cuda device, each stopped after unit_cap seconds: a
# hang at the first real launches must not take the examples' time, and
# counts as a failure.
if [ "$device" = cuda ]; then
  for t in moec-cuda-tests moec-cuda-device-tests moec-cuda-gpu-tests; do
    starts "unit $t" "$end" || continue
    start=$(now)
    run_capped "$unit_cap" "$end" "$pack/bin/$t" \
      --gtest_output="xml:$logs/$t.xml" > "$logs/$t.txt" 2>&1
    rc=$?
    if [ $rc -eq 125 ]; then
      echo "run.sh: stopped after ${unit_cap} s: a test hangs" >> "$logs/$t.txt"
      rc=1
    fi
    # `moec info` found the GPU ready: a GPU test that skips itself for
    # want of one checked nothing (cuBLASLt's test may skip: it is optional).
    if [ $rc -eq 0 ] && [ "$t" = moec-cuda-gpu-tests ] &&
       grep -q '^no usable GPU: ' "$logs/$t.txt"; then
      echo "run.sh: GPU tests skipped on a GPU machine" >> "$logs/$t.txt"
      rc=1
    fi
    summary=$(grep -E '^\[  (PASSED|FAILED|SKIPPED) +\]' "$logs/$t.txt" | tr '\n' ' ')
    record unit "$t" "$rc" "$(elapsed "$start" "$(now)") s; $summary"
    say "$t: exit $rc; $summary"
  done
fi

# Training: cold compile, warm start, then the curves on the device and
# the cpu. Prints "seconds status".
train() { # device cache steps metrics log [more moec train options]
  local start rc
  start=$(now)
  MOEC_CACHE_DIR="$2" limited "$moec" train "$b" --device "$1" --steps "$3" \
    --seed 1 --valid-batches 0 --log-every 50 --metrics "$4" "${@:6}" > "$5" 2>&1
  rc=$?
  echo "$(elapsed "$start" "$(now)") $rc"
}
# Inference on the device from the weights it trained: the held-out loss
# without gradients, then generation (encoders do not generate). Each is a
# check whose detail is the time line moec printed, or its last line. The
# weights go once measured: they are no part of the record.
infer() { # name cache weights
  local name="$1" kind
  [ -f "$3" ] || return 0 # the training run failed or was stopped: recorded
  if starts "eval $name" "$until"; then
    timed_check eval "$name" "$2" eval "$b" --weights "$3" --device "$device" \
      --batches "$eval_batches" --sentences 8
  fi
  kind=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["model"]["kind"])' \
    "$b" 2> "$logs/kind-$name.txt") || kind=unknown
  if [ "$kind" = unknown ]; then
    record generate "$name" 1 "the bundle's model kind could not be read: $(tail -n 1 "$logs/kind-$name.txt")"
  elif [ "$kind" != encoder ] && starts "generate $name" "$until"; then
    timed_check generate "$name" "$2" run "$b" --weights "$3" --device "$device" \
      --max-tokens "$generate_tokens"
  fi
  rm -f "$3"
}
# Runs `moec ARGS...` with the cache, its output in logs/KIND-NAME.txt, and
# records check KIND NAME with the time line it printed.
timed_check() { # kind name cache moec-args...
  local kind="$1" name="$2" cache="$3" log="$logs/$1-$2.txt" rc line
  shift 3
  MOEC_CACHE_DIR="$cache" limited "$moec" "$@" > "$log" 2>&1
  rc=$?
  line=$(time_line "$log" "$rc")
  record "$kind" "$name" "$rc" "$line"
  say "$kind $name: exit $rc; $line"
}
# What a log's "time:" line says, and its accuracy line where moec eval
# printed one (the last line of a failed command's).
time_line() { # log status
  local time accuracy
  if [ "$2" -eq 0 ]; then
    time=$(sed -n 's/^time: *//p' "$1" | head -n 1)
    case "$1" in
      */eval-*) accuracy=$(grep -m 1 '^[a-z -]*accuracy [0-9.]*% (' "$1") ;;
    esac
    echo "$time${accuracy:+; $accuracy}"
  else
    tail -n 1 "$1"
  fi
}
# One example: cold and warm start, kernel check, both curves, inference.
# Its commands stop at `until`.
run_example() {
  local b="$1" name cache cold rc_cold warm rc_warm rc start gpu rc_gpu cpu rc_cpu
  name=$(basename "$b" .bundle.json)
  cache="$out/cache/$name"
  rm -rf "$cache"
  rm -f "$logs/$name".*.jsonl
  read -r cold rc_cold < <(train "$device" "$cache" 1 \
    "$logs/$name.cold.jsonl" "$logs/train-$name-cold.txt")
  read -r warm rc_warm < <(train "$device" "$cache" 1 \
    "$logs/$name.warm.jsonl" "$logs/train-$name-warm.txt")
  # Every kernel against the cpu device, on random inputs; from the cache
  # the cold start filled, so that nothing compiles twice.
  start=$(now)
  MOEC_CACHE_DIR="$cache" limited "$moec" check-kernels "$b" --device "$device" \
    > "$logs/check-$name.txt" 2>&1
  rc=$?
  record check-kernels "$name" "$rc" \
    "$(tail -n 1 "$logs/check-$name.txt") ($(elapsed "$start" "$(now)") s)"
  say "check-kernels $name: exit $rc; $(tail -n 1 "$logs/check-$name.txt")"

  mkdir -p "$out/weights"
  rm -f "$out/weights/$name.safetensors"
  read -r gpu rc_gpu < <(train "$device" "$cache" "$steps" \
    "$logs/$name.cuda.jsonl" "$logs/train-$name-cuda.txt" \
    --save "$out/weights/$name.safetensors")
  # Before the cpu's run, so that a budget's end takes the slow run first.
  infer "$name" "$cache" "$out/weights/$name.safetensors"
  read -r cpu rc_cpu < <(train cpu "$cache" "$steps" \
    "$logs/$name.cpu.jsonl" "$logs/train-$name-cpu.txt")
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "$cold" "$rc_cold" \
    "$warm" "$rc_warm" "$gpu" "$rc_gpu" "$cpu" "$rc_cpu" >> "$out/runs.tsv"
  say "train $name: cold start $cold s, warm start $warm s, $steps steps" \
      "$device $gpu s (exit $rc_gpu), cpu $cpu s (exit $rc_cpu)"
  summarize --quiet > /dev/null
}

# The examples first, within their share of the budget; those it leaves
# out wait for what the layer benchmarks leave. Without layers the share
# only orders the examples: a running one goes on to the suite's end.
until=$examples_end
[ $layers -eq 1 ] || until=$end
deferred=""
for b in $bundles; do
  if [ "$(left "$examples_end")" -le 0 ] && [ "$examples_end" -lt "$end" ]; then
    deferred="$deferred $b"
    continue
  fi
  starts "example $(basename "$b" .bundle.json)" "$end" || continue
  run_example "$b"
done

until=$end

# The layers against PyTorch on the same GPU, when it is installed.
layers_status=0
if [ $layers -eq 1 ]; then
  "$pack/layers.sh" "$out" "$tiles"
  layers_status=$?
elif [ "$device" = cuda ]; then
  say "no PyTorch with CUDA here: the layer benchmarks against it are skipped"
fi
[ -z "$deferred" ] || say "the examples left for the layers:$deferred"
for b in $deferred; do
  starts "example $(basename "$b" .bundle.json)" "$end" || continue
  run_example "$b"
done
# A failed layer benchmark fails the suite; one the budget cut short
# leaves it incomplete (summarize.py says which in results.md).
summarize --layers-status "$layers_status"
status=$?
archive
say "results in $out/results.md and $out/results.json, logs in $out/logs.tar.gz" \
    "($(( $(date +%s) - started )) s)"
exit $status
