#!/usr/bin/env bash
# Runs the benchmarks this machine can run and writes their figures, with
# the command and the date, into bench/RESULTS.md (between the "bench/run.sh"
# markers; the rest of the file is kept). Usage: bench/run.sh [--quick]
# from the repository root after scripts/build.sh. On a machine with a GPU,
# run the pack's run.sh (scripts/gpu-pack.sh) for the cuda rows.
set -euo pipefail
cd "$(dirname "$0")/.."
moec=./build/bin/moec
steps=5
if [ "${1:-}" = "--quick" ]; then steps=2; fi
section=$(mktemp)
work=$(mktemp -d)
trap 'rm -rf "$section" "$work"' EXIT
threads=2
# MH-MoE and a plain MoE of the same parameter count, trained side by side.
mhmoeSection() {
  echo "### MH-MoE against a plain MoE of the same parameter count (cpu, $1 threads)"
  echo
  echo "\`bench/mhmoe_vs_moe.sh $1\`: examples/mhmoe_lm.moe (300 steps) and the"
  echo "same model with each mh_moe layer replaced by a SwiGLU top-1 moe layer"
  echo "whose expert width gives the layer as many parameters; training loss"
  echo "(mean of the last 25 steps) and the mean time per step."
  echo
  bash bench/mhmoe_vs_moe.sh "$1"
}
# MAE trained by coordinate descent against the paper's baselines.
maeSection() {
  echo "### MAE and the MAE paper's baselines (cpu, $1 threads)"
  echo
  echo "\`bench/mae_variants.sh $1\`: examples/mae_lm.moe (300 steps) by block"
  echo "coordinate descent, the same model trained jointly, with uniform"
  echo "responsibilities, and with plain attention; training loss (mean of the"
  echo "last 25 steps), validation cross-entropy and the mean time per step."
  echo
  bash bench/mae_variants.sh "$1"
}
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f s", b - a }'; }
{
  echo "## bench/run.sh ($(date -u +%Y-%m-%d), $(nproc) cores, $threads threads)"
  echo
  # Both sides' GEMMs run on this OpenBLAS with these kernels.
  echo "$("$moec" info | grep '^cpu BLAS:'); PyTorch's CPU matrix products use the same library."
  echo
  echo "### cpu device against PyTorch $(/usr/bin/python3 -c 'import torch; print(torch.__version__)') on the CPU"
  echo
  echo "\`bench/cpu_vs_torch.sh D E $steps $threads\`: the same model and"
  echo "layers in moec (\`moec train --profile\`, per call) and in PyTorch"
  echo "(bench/torch_moe_lm.py: eager, the papers' loop over experts); the"
  echo "forward alone (\`moec eval\` per batch against the loss under"
  echo "\`torch.no_grad()\`) and greedy decoding with a KV cache (\`moec run\`"
  echo "per token after a 16-token prompt, batch 1, against the same loop);"
  echo "ratio = PyTorch time / moec time, above 1 when moec is faster. Top-1"
  echo "rows: \`K=1 bench/cpu_vs_torch.sh ...\`; fine-grained experts (top-8 of"
  echo "64, each a quarter as wide: the FLOPs of top-2): \`K=8 HIDDEN=128\`."
  echo "The whole model with MoA, MAE or MH-MoE layers, training, forward and decoding:"
  echo "\`MOA=\"8 2\"\`, \`MAE=256\`, \`MHMOE=4 K=1 HIDDEN=256\` (PyTorch's layers"
  echo "from bench/torch_layers.py)."
  echo
  echo "| what | moec | PyTorch | ratio |"
  echo "|---|---|---|---|"
  for size in "256 8" "512 16"; do
    # shellcheck disable=SC2086
    bash bench/cpu_vs_torch.sh $size "$steps" "$threads"
  done
  K=1 bash bench/cpu_vs_torch.sh 256 16 "$steps" "$threads"
  K=8 HIDDEN=128 bash bench/cpu_vs_torch.sh 256 64 "$steps" "$threads"
  MOA="8 2" bash bench/cpu_vs_torch.sh 256 8 "$steps" "$threads"
  MAE=256 bash bench/cpu_vs_torch.sh 256 8 "$steps" "$threads"
  MHMOE=4 K=1 HIDDEN=256 bash bench/cpu_vs_torch.sh 256 8 "$steps" "$threads"
  echo
  echo "\`bench/cpu_layers_vs_torch.sh 256 $steps $threads\`: the MoA, MH-MoE and MAE"
  echo "layers, each in moe_lm at d 256 (every attention a MoA or MAE layer, every"
  echo "MoE layer an MH-MoE layer); moec's time is what \`moec train --profile\`"
  echo "attributes to the layer's statement (norm, layer, auxiliary losses,"
  echo "residual; backward from the first gradient op), per layer and step;"
  echo "PyTorch's is the same sublayer in bench/torch_layers.py (the authors'"
  echo "loops over experts), forward with autograd recording as in training."
  echo
  echo "| what | moec | PyTorch | ratio |"
  echo "|---|---|---|---|"
  bash bench/cpu_layers_vs_torch.sh 256 "$steps" "$threads"
  echo
  echo "### Cost model (\`moec compile EXAMPLE --report\`): device-memory traffic"
  echo
  echo "Bytes the fused plan moves per training step against the same ops run"
  echo "one per kernel as an eager framework runs them, at the example's batch"
  echo "and sequence length; and the step's time at H100 ceilings."
  echo
  echo "| example | kernels | FLOPs | fused | op by op | ratio | H100 time | layers (fused/op-by-op) |"
  echo "|---|---|---|---|---|---|---|---|"
  for example in moe_lm switch_lm glu_moe_lm moa_mlm moa_translate mhmoe_lm \
      mae_lm; do
    "$moec" compile "examples/$example.moe" --report > "$work/report.txt"
    total=$(awk '$1 == "train_step" && $3 == "kernels"' "$work/report.txt")
    layers=$(awk '/by kernel kind/ { on = 1; next } on && NF == 0 { exit }
      on && ($1 ~ /^(experts|attention|expert_map|expert_reduce)/) {
        printf "%s%s %s", sep, $1, $NF; sep = ", " }' "$work/report.txt")
    # "train_step N kernels F GFLOP B MB moved (op by op O MB, Rx) T us"
    echo "$total" | awk -v ex="$example" -v layers="$layers" '{
      gsub(/[(),]/, "");
      printf "| %s | %s | %s %s | %s %s | %s %s | %s | %s %s | %s |\n",
        ex, $2, $4, $5, $6, $7, $12, $13, $14, $15, $16, layers }'
  done
  echo
  echo "### Compile and start-up (12 blocks, d 512, E 16, sm_90)"
  echo
  sed -e 's/^let d = 128/let d = 512/' -e 's/^let blocks = 4/let blocks = 12/' \
      -e 's/^let experts = 8/let experts = 16/' examples/moe_lm.moe > "$work/m12.moe"
  t0=$(date +%s.%N)
  "$moec" compile "$work/m12.moe" -o "$work/m12.json"
  t1=$(date +%s.%N)
  echo "| what | time |"
  echo "|---|---|"
  echo "| \`moec compile\` (frontend, autodiff, plan, CUDA source) | $(elapsed "$t0" "$t1") |"
  if "$moec" precompile "$work/m12.json" --arch sm_90 > /dev/null 2>&1 </dev/null; then
    rm -rf "$work/cache"
    t0=$(date +%s.%N)
    line=$(MOEC_CACHE_DIR="$work/cache" "$moec" precompile "$work/m12.json" --arch sm_90 | sed -n 1p)
    t1=$(date +%s.%N)
    echo "| \`moec precompile --arch sm_90\`, cold cache: $line | $(elapsed "$t0" "$t1") |"
    # A warm start is tens of milliseconds: the mean of 20 runs, of this
    # moec and of the runtime-only one a GPU machine runs (when built).
    for bin in "$moec" ./build-pack/bin/moec; do
      [ -x "$bin" ] || continue
      t0=$(date +%s.%N)
      for _ in $(seq 20); do
        line=$(MOEC_CACHE_DIR="$work/cache" "$bin" precompile "$work/m12.json" --arch sm_90 | sed -n 1p)
      done
      t1=$(date +%s.%N)
      mean=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f ms", (b - a) * 1000 / 20 }')
      what="\`$bin precompile --arch sm_90\`"
      [ "$bin" = "$moec" ] || what="$what (runtime-only: scripts/gpu-pack.sh's build)"
      echo "| $what, warm cache, mean of 20 runs: $line | $mean |"
    done
    # The dtype a GPU trains in, with sm_90's tiles.
    "$moec" compile "$work/m12.moe" --dtype bf16 --arch sm_90 -o "$work/m12-bf16.json"
    rm -rf "$work/cache"
    t0=$(date +%s.%N)
    line=$(MOEC_CACHE_DIR="$work/cache" "$moec" precompile "$work/m12-bf16.json" --arch sm_90 | sed -n 1p)
    t1=$(date +%s.%N)
    echo "| bf16 (\`moec compile --dtype bf16 --arch sm_90\`), \`moec precompile --arch sm_90\`, cold cache: $line | $(elapsed "$t0" "$t1") |"
  fi
  t0=$(date +%s.%N)
  params=$(OMP_NUM_THREADS=$threads "$moec" train "$work/m12.json" --steps 0 \
    --valid-batches 0 | sed -n 's/.*, \([0-9.]*M\) parameters.*/\1/p')
  t1=$(date +%s.%N)
  echo "| \`moec train --steps 0\` on the cpu: load and draw $params initial weights | $(elapsed "$t0" "$t1") |"
  echo
  echo "### The cuda device's host overhead, without a GPU"
  echo
  echo "\`bench/host_overhead.sh EXAMPLE 1000\`: the time per training step of"
  echo "\`moec train --device cuda\` against the test suite's fake driver"
  echo "(nothing runs; launches are recorded), the median of steps 6-1005 as"
  echo "moec records them (\`--metrics\` time_s): moec's host work per step plus"
  echo "the fake driver's bookkeeping, an upper bound on what moec adds to the"
  echo "driver."
  echo
  echo "| what | launches | time per step | per launch |"
  echo "|---|---|---|---|"
  for example in examples/moe_lm.moe examples/mae_lm.moe; do
    bash bench/host_overhead.sh "$example" 1000
  done
  echo
  mhmoeSection "$threads"
  echo
  maeSection "$threads"
} > "$section"

python3 - "$section" <<'PY'
import re, sys
begin, end = "<!-- bench/run.sh: begin -->", "<!-- bench/run.sh: end -->"
body = open(sys.argv[1]).read()
path = "bench/RESULTS.md"
text = open(path).read()
block = f"{begin}\n{body}{end}\n"
if begin in text:
    text = re.sub(re.escape(begin) + ".*?" + re.escape(end) + "\n?", lambda m: block, text, flags=re.S)
else:
    text = text.rstrip("\n") + "\n\n" + block
open(path, "w").write(text)
PY
echo "bench/run.sh: wrote its section of bench/RESULTS.md"
