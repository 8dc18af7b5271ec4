#!/usr/bin/env bash
# Compiles the GPU layer benchmarks into the pack (run by scripts/gpu-pack.sh
# where the full compiler is): examples/moe_lm.moe grown to GPU sizes (d
# 1024, 16 heads, 8 x 1024 tokens, bf16) with one kind of layer under test
# in every block, for sm_80 and sm_90. Writes DIR/manifest.tsv, one row per
# benchmark: name, what, the layer statement's line, how many blocks use
# it, the forward and backward FLOPs of one layer per training step (moec's
# cost model, summed over the kernels it attributes to that line), and the
# arguments that build the same layer in torch_layers.py.
# Usage: layer-bundles.sh COMPILER DIR
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
compiler="$1" dir="$2"
mkdir -p "$dir"
: > "$dir/manifest.tsv"
d=1024 heads=16 batch=8 seq=1024

base="$dir/base.moe.txt"
sed -e "s/^let d = 128/let d = $d/" -e "s/^let heads = 4/let heads = $heads/" \
    -e "s/max_seq = 64/max_seq = $seq/" -e "s/batch = 16/batch = $batch/" \
    -e "s/seq_len = 64/seq_len = $seq/" "$root/examples/moe_lm.moe" > "$base"
blocks=$(sed -n 's/^let blocks = \([0-9]*\)/\1/p' "$base")
moe_statement='moe(experts = experts, k = 2, hidden = 2 * d, activation = gelu_tanh,'

# name | what | the statement | blocks using it | torch_layers.py arguments
layers=(
  "moe|MoE FFN, tokens choose (E 16, top-2, GELU experts of 2d)|$moe_statement|$((blocks / 2))|--layer moe --experts 16 --k 2 --hidden $((2 * d))"
  "moa|MoA (E 16, top-2, head_dim 64)|moa(experts = 16, k = 2, head_dim = 64)|$blocks|--layer moa --experts 16 --k 2 --head-dim 64"
  "mh_moe|MH-MoE (4 sub-tokens, E 16, top-2, SwiGLU 512)|mh_moe(heads = 4, experts = 16, k = 2, hidden = 512)|$((blocks / 2))|--layer mh_moe --heads 4 --experts 16 --k 2 --hidden 512"
  "mae|MAE ($heads heads, gate 256, joint training)|mae(heads = heads, gate_hidden = 256)|$blocks|--layer mae --heads $heads --hidden 256"
)
for row in "${layers[@]}"; do
  IFS='|' read -r name what statement count torch_args <<< "$row"
  spec="$dir/$name.moe"
  case $name in
    moe) sed -e 's/^let experts = 8/let experts = 16/' "$base" > "$spec" ;;
    moa|mae) sed "s/attention(heads = heads)/$statement/" "$base" > "$spec" ;;
    mh_moe) sed "/^      moe(experts/,/balance = all_slots)/c\\      $statement" \
              "$base" > "$spec" ;;
  esac
  line=$(grep -n -F "$statement" "$spec" | sed -n 1p | cut -d: -f1 || true)
  [ -n "$line" ] || { echo "layer-bundles: no $name statement" >&2; exit 1; }
  # FLOPs of the kernels at that line: forward, and backward (a gradient
  # op in the group), per layer.
  read -r fwd bwd < <("$compiler" compile "$spec" --dtype bf16 --arch sm_90 \
    --report | awk -v at=":$line:" -v n="$count" '
      / at / && index($NF, at) { if ($0 ~ /_grad/) b += $3; else f += $3 }
      END { printf "%.0f %.0f\n", f / n, b / n }')
  for arch in sm_80 sm_90; do
    out="$dir/$name.$arch.bf16.bundle.json"
    "$compiler" compile "$spec" --arch "$arch" --dtype bf16 -o "$out"
    gzip -9f "$out"
  done
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s --d %s --batch %s --seq %s\n' "$name" \
    "$what" "$line" "$count" "$fwd" "$bwd" "$torch_args" "$d" "$batch" \
    "$seq" >> "$dir/manifest.tsv"
  rm -f "$spec"
done
rm -f "$base"
echo "layer-bundles: $(wc -l < "$dir/manifest.tsv") layer benchmarks in $dir"
