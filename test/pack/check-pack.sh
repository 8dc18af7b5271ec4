#!/usr/bin/env bash
# Builds the GPU pack with scripts/gpu-pack.sh and checks it on this machine,
# which has no GPU: its size, that nothing in it needs LLVM, MLIR or a
# library outside the pack, that its runtime-only moec trains a packed
# bundle on the cpu and emu devices under `env -i`, lists the same bundle
# commands as the full build and refuses to compile in one line, that
# the layer benchmarks reach layers.md and results.json, that run.sh's
# suite passes on the emu device, records what a spent time budget
# skipped and runs an example past the examples' share after the layers,
# and that run.sh reports the missing GPU in one line with its own exit
# status.
# Usage: check-pack.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
src="$1"
build="$2"
work="$build/test/pack-work"
pack="$work/pack"
mkdir -p "$work"
fail() { echo "FAIL: $*"; exit 1; }
# grep -q reads files, never a pipe: under pipefail, a writer that grep -q
# has left (tar listing an archive line by line) dies of SIGPIPE and fails
# the check whenever the machine is loaded.

# The build's log stays in a file: a failure below is then near the top of
# what CTest shows.
MOEC_COMPILER="$build/bin/moec" MOEC_PACK_BUILD="$build/pack-build" \
  MOEC_JOBS="${MOEC_JOBS:-2}" bash "$src/scripts/gpu-pack.sh" "$pack" \
  > "$work/gpu-pack.log" 2>&1 || fail "gpu-pack.sh: $(tail -n 20 "$work/gpu-pack.log")"
echo "gpu-pack.sh: built $pack (log: $work/gpu-pack.log)"

size=$(du -sb "$pack" | cut -f1)
[ "$size" -le $((48 * 1024 * 1024)) ] || fail "the pack is $size bytes"
echo "pack: $size bytes"

# LLVM, MLIR, OpenBLAS and Boost must not be needed at all; fmt only from
# the pack.
for f in "$pack"/bin/* "$pack"/lib/*.so*; do
  if ldd "$f" | grep -iE 'llvm|mlir|openblas|boost|not found'; then
    fail "$f needs a library a bare GPU machine lacks"
  fi
  if ldd "$f" | awk -v d="$pack/" '$1 ~ /fmt/ && index($3, d) != 1' | grep .; then
    fail "$f takes fmt from outside the pack"
  fi
done
echo "ldd: no LLVM, MLIR, OpenBLAS or Boost, fmt from the pack; nothing missing"

# The bundle commands of both builds: the same names, in the same order.
commands() { "$1" --help | sed -n '/^commands:/,/^$/p' | awk 'NF {print $1}'; }
full=$(commands "$build/bin/moec")
packed=$(commands "$pack/bin/moec")
[ "$full" = "$packed" ] || fail "command lists differ: [$full] vs [$packed]"
for c in train run check-kernels precompile info; do
  "$pack/bin/moec" "$c" --help > "$work/$c.help"
  "$build/bin/moec" "$c" --help | diff - "$work/$c.help" ||
    fail "moec $c --help differs between the builds"
done
echo "help: both builds list the same commands and flags"

set +e
message=$("$pack/bin/moec" compile "$src/examples/moe_lm.moe" -o "$work/x.json" 2>&1)
status=$?
set -e
[ $status -eq 1 ] || fail "compile in the runtime-only build exited $status"
[ "$(echo "$message" | wc -l)" -eq 1 ] || fail "more than one line: $message"
grep -q "runtime-only build" <<< "$message" || fail "unexpected: $message"
echo "compile: $message"

bundle="$work/moe_lm.bundle.json"
gunzip -c "$pack/bundles/moe_lm.sm_90.f32.bundle.json.gz" > "$bundle"
cd "$work"
env -i "$pack/bin/moec" train "$bundle" --device cpu --steps 3 \
  --valid-batches 1 --save "$work/ck.safetensors" | tee "$work/cpu.txt"
grep -q "step     3/3" "$work/cpu.txt" || fail "no third step on the cpu"
env -i "$pack/bin/moec" run "$bundle" --weights "$work/ck.safetensors" \
  --prompt "The " --max-tokens 8 > "$work/run-cpu.txt"
grep -q "generated:" "$work/run-cpu.txt" || fail "run failed"
env -i HOME="$work" MOEC_CACHE_DIR="$work/cache" "$pack/bin/moec" train \
  "$bundle" --device emu --steps 2 --valid-batches 0 | tee "$work/emu.txt"
grep -q "step     2/2" "$work/emu.txt" || fail "no second step on emu"

# The layer benchmarks' moec half against the fake driver (nothing runs, so
# the times mean nothing): every layer's statement is found in the cuda
# device's per-location profile and the table gets its rows.
[ "$(wc -l < "$pack/layers/manifest.tsv")" -eq 4 ] || fail "not 4 layer benchmarks"
rm -rf "$work/layers-out"
env MOEC_CUDA_DRIVER_LIBRARY="$pack/lib/libmoec-fake-cuda-driver.so" \
  MOEC_FAKE_CUDA_KEEP_LAUNCHES=0 MOEC_PACK_TORCH_DEVICE=none \
  MOEC_PACK_LAYER_STEPS=2 "$pack/layers.sh" "$work/layers-out" sm_90 ||
  fail "layers.sh against the fake driver: $(tail -n 3 "$work/layers-out/logs"/layer-*-moec.txt)"
[ "$(grep -c '^| .* | forward |' "$work/layers-out/layers.md")" -eq 4 ] ||
  fail "layers.md lacks forward rows"
# results.json carries the same rows (summarize.py fails here on the
# missing examples, not on the layers).
python3 "$pack/summarize.py" "$work/layers-out" --quiet > /dev/null || true
python3 - "$work/layers-out/results.json" << 'EOF' || fail "results.json lacks the layers"
import json, sys
layers = json.load(open(sys.argv[1]))["layers"]
assert len(layers) == 4, f"{len(layers)} layers"
for layer in layers:
    assert layer["state"] == "passed" and layer["what"], layer
    assert layer["forward_flops"] > 0 and layer["backward_flops"] > 0, layer
    assert layer["moec_forward_ms"] is not None, layer
    assert layer["torch_forward_ms"] is None, layer  # no PyTorch here
EOF
echo "layers: $(cut -f1 "$work/layers-out/layers.tsv" | tr '\n' ' ')timed against the fake driver, in layers.md and results.json"
# With run.sh's budget spent, every layer is skipped and the status is 7.
set +e
env MOEC_CUDA_DRIVER_LIBRARY="$pack/lib/libmoec-fake-cuda-driver.so" \
  MOEC_PACK_TORCH_DEVICE=none MOEC_PACK_END=$(( $(date +%s) - 1 )) \
  "$pack/layers.sh" "$work/layers-late" sm_90 > "$work/layers-late.txt" 2>&1
status=$?
set -e
[ $status -eq 7 ] || fail "layers.sh past its end exited $status, not 7"
[ "$(grep -c 'skipped, the time budget ran out' "$work/layers-late.txt")" -eq 4 ] ||
  fail "layers.sh past its end did not skip the 4 layers"

# The pack's suite on the emu device for moe_lm in f32, into $work/$1 (its
# output in $work/$1.txt), with the settings that follow; prints the exit
# status.
emu_suite() {
  local name="$1"
  shift
  set +e
  env -i PATH="$PATH" HOME="$work" MOEC_PACK_DEVICE=emu \
    MOEC_PACK_ONLY='/moe_lm\.sm_90\.f32\.' MOEC_PACK_EVAL_BATCHES=2 \
    MOEC_PACK_GENERATE_TOKENS=5 "$@" "$pack/run.sh" \
    "$work/$name" > "$work/$name.txt" 2>&1
  echo $?
}

# The whole suite: the kernel check, the four training runs, the curve
# comparison, inference from the trained weights and the record.
rm -rf "$work/emu-suite" "$work/no-time"
status=$(emu_suite emu-suite MOEC_PACK_STEPS=3)
cat "$work/emu-suite.txt"
[ $status -eq 0 ] || fail "run.sh on the emu device exited $status"
grep -q '^| check-kernels | moe_lm.sm_90.f32 | pass |' "$work/emu-suite/results.md" ||
  fail "results.md lacks moe_lm's kernel check"
grep -q '^| moe_lm.sm_90.f32 | .* | pass |$' "$work/emu-suite/results.md" ||
  fail "results.md lacks moe_lm's curve comparison"
grep -q '"warnings": \[\]' "$work/emu-suite/results.json" ||
  fail "results.json lacks the run's (empty) warnings"
grep -q '^| eval | moe_lm.sm_90.f32 | pass | [0-9.]* ms per batch of 16 x 64 ([0-9]* tokens/s; median of 1 batch after the first); next-token accuracy [0-9.]*% ([0-9]* of 2048 predicted tokens) |$' \
  "$work/emu-suite/results.md" || fail "results.md lacks moe_lm's eval time"
grep -q '^| generate | moe_lm.sm_90.f32 | pass | prompt [0-9]* tokens in [0-9.]* ms; 4 tokens after it at ' \
  "$work/emu-suite/results.md" || fail "results.md lacks moe_lm's generation time"
python3 - "$work/emu-suite/results.json" <<'PY' || fail "results.json lacks the inference times"
import json, sys
[entry] = json.load(open(sys.argv[1]))["inference"]
assert entry["ms_per_batch"] > 0 and entry["ms_per_token"] > 0, entry
assert entry["later_tokens"] == 4 and entry["batches"] == 1, entry
assert entry["accuracy"] == "next-token accuracy", entry
assert entry["predicted"] == 2048 and 0 < entry["correct"] < 2048, entry
assert "unread" not in entry, entry
# The accuracy of the curves' last steps, from the metrics' counts.
[run] = json.load(open(sys.argv[1]))["runs"]
hits = run["comparison"]["last20_accuracy"]
assert 0 < hits["cpu"] < 100 and abs(hits["cuda"] - hits["cpu"]) < 1, hits
PY
tar -tzf "$work/emu-suite/logs.tar.gz" > "$work/emu-suite.list"
grep -q '^logs/moe_lm.sm_90.f32.cpu.jsonl$' "$work/emu-suite.list" ||
  fail "logs.tar.gz lacks the cpu curve"
# A budget too small for anything: recorded as skipped, exit status 7.
status=$(emu_suite no-time MOEC_PACK_BUDGET_S=1)
[ $status -eq 7 ] || fail "run.sh with no time left exited $status, not 7"
grep -q '^| example | moe_lm.sm_90.f32 | skipped (time budget) |' \
  "$work/no-time/results.md" || fail "the skipped example is not recorded"
grep -q '^Result: INCOMPLETE' "$work/no-time/results.md" ||
  fail "results.md does not say the suite is incomplete"
# A second run into the same folder starts clean: nothing of the first
# run's record is left to pass for this one's. A folder of other files is
# refused, untouched.
status=$(emu_suite emu-suite MOEC_PACK_BUDGET_S=1)
[ $status -eq 7 ] || fail "a second run into the same folder exited $status"
[ ! -e "$work/emu-suite/logs/check-moe_lm.sm_90.f32.txt" ] &&
  ! grep -q '^| check-kernels' "$work/emu-suite/results.md" ||
  fail "a second run into the same folder kept the first one's record"
# An examples' share of 0%: moe_lm waits for the layers (none on emu)
# and then runs in the time left, as one would when the layers end early.
rm -rf "$work/late-example"
status=$(emu_suite late-example MOEC_PACK_STEPS=2 MOEC_PACK_BUDGET_S=900 \
  MOEC_PACK_EXAMPLES_SHARE=0)
[ $status -eq 0 ] || fail "a deferred example: run.sh exited $status: $(tail -n 5 "$work/late-example.txt")"
grep -q '^run.sh: the examples left for the layers: .*moe_lm.sm_90.f32' \
  "$work/late-example.txt" || fail "moe_lm was not deferred"
grep -q '^| moe_lm.sm_90.f32 | .* | pass |$' "$work/late-example/results.md" ||
  fail "the deferred example did not run after the layers"
# A setting that is not a number ends the suite at once, writing nothing.
rm -rf "$work/bad-setting"
set +e
MOEC_PACK_STEPS=2OO "$pack/run.sh" "$work/bad-setting" > "$work/bad-setting.txt" 2>&1
status=$?
set -e
[ $status -eq 2 ] && [ ! -e "$work/bad-setting" ] &&
  [ "$(cat "$work/bad-setting.txt")" = "run.sh: MOEC_PACK_STEPS must be a whole number, not '2OO'" ] ||
  fail "a bad MOEC_PACK_STEPS: exit $status: $(cat "$work/bad-setting.txt")"
rm -rf "$work/mine"
mkdir -p "$work/mine"
echo "keep me" > "$work/mine/notes.txt"
set +e
"$pack/run.sh" "$work/mine" > "$work/mine.txt" 2>&1
status=$?
set -e
[ $status -eq 2 ] && grep -q "name a new folder" "$work/mine.txt" &&
  [ "$(cat "$work/mine/notes.txt")" = "keep me" ] ||
  fail "run.sh into a folder of other files exited $status: $(cat "$work/mine.txt")"
echo "emu suite: moe_lm checked, trained and compared; a spent budget skips it (exit 7); an example past its share runs after the layers; a folder of other files refused"

rm -rf "$work/results"
set +e
start=$(date +%s)
"$pack/run.sh" "$work/results" > "$work/run.txt" 2>&1
status=$?
seconds=$(( $(date +%s) - start ))
set -e
cat "$work/run.txt"
[ $status -eq 3 ] || fail "run.sh without a driver exited $status, not 3"
[ $seconds -le 30 ] || fail "run.sh took $seconds s to give up"
[ "$(grep -c '^run.sh:' "$work/run.txt")" -eq 1 ] || fail "not one run.sh line"
grep -q '^run.sh: the cuda device cannot run here: no CUDA driver' \
  "$work/run.txt" || fail "run.sh did not say what is missing"
grep -q '"status": 3' "$work/results/results.json" ||
  fail "results.json does not record the status"
echo "pack checks passed"
