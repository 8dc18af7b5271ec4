#!/usr/bin/env bash
# The cpu device against PyTorch on the CPU, layer by layer, for the MoA,
# MH-MoE and MAE layers: examples/moe_lm.moe grown to d_model D (D / 64
# heads, E 8, batch 4 x 512 tokens) with every attention a MoA layer (E 8,
# top-2, head_dim 64) or a MAE layer (gate width 256, trained jointly), or
# every MoE layer an MH-MoE layer (4 sub-tokens, E 8, top-1, SwiGLU experts
# of width 256). moec's time is what `moec train --profile` attributes to
# the layer's statement, split at the first gradient op into forward and
# backward, per layer and step; PyTorch's is bench/torch_layers.py on the
# same sublayer (norm, layer, auxiliary losses, residual) and shapes.
# Prints markdown table rows. Usage: bench/cpu_layers_vs_torch.sh D [STEPS]
# [THREADS] (from the repository root, after a build; needs python3-torch).
set -euo pipefail
d="$1" steps="${2:-5}" threads="${3:-2}"
heads=$((d / 64))
moec=./build/bin/moec
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

sed -e "s/^let d = 128/let d = $d/" -e "s/^let heads = 4/let heads = $heads/" \
    -e 's/max_seq = 64/max_seq = 512/' -e 's/batch = 16/batch = 4/' \
    -e 's/seq_len = 64/seq_len = 512/' examples/moe_lm.moe > "$out/base.moe"
blocks=$(sed -n 's/^let blocks = \([0-9]*\)/\1/p' "$out/base.moe")
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2fx", b / a }'; }

for layer in moa mh_moe mae; do
  case $layer in
    moa)
      statement="moa(experts = 8, k = 2, head_dim = 64)"
      sed "s/attention(heads = heads)/$statement/" "$out/base.moe" > "$out/$layer.moe"
      count=$blocks torch_args=(--experts 8 --k 2 --head-dim 64)
      what="MoA (E 8, top-2, head_dim 64)" ;;
    mh_moe)
      statement="mh_moe(heads = 4, experts = 8, k = 1, hidden = 256)"
      sed "/^      moe(experts/,/balance = all_slots)/c\\      $statement" \
        "$out/base.moe" > "$out/$layer.moe"
      count=$((blocks / 2)) torch_args=(--heads 4 --experts 8 --k 1 --hidden 256)
      what="MH-MoE (4 sub-tokens, E 8, top-1, SwiGLU 256)" ;;
    mae)
      statement="mae(heads = heads, gate_hidden = 256)"
      sed "s/attention(heads = heads)/$statement/" "$out/base.moe" > "$out/$layer.moe"
      count=$blocks torch_args=(--heads "$heads" --hidden 256)
      what="MAE ($heads heads, gate 256, joint training)" ;;
  esac
  line=$(grep -n -F "$statement" "$out/$layer.moe" | cut -d: -f1 || true)
  [ -n "$line" ] || { echo "no $layer statement in the model" >&2; exit 1; }
  "$moec" compile "$out/$layer.moe" -o "$out/$layer.json"
  OMP_NUM_THREADS=$threads "$moec" train "$out/$layer.json" \
    --steps $((steps + 1)) --log-every 1 --valid-batches 0 --profile \
    > "$out/$layer.txt"
  # "  FILE:LINE:COL forward F ms/step backward B ms/step ..." per layer.
  read -r fwd both < <(awk -v line="$line" -v n="$count" '
    { split($1, loc, ":") } loc[2] == line && $2 == "forward" {
      printf "%.2f %.2f\n", $3 / n, ($3 + $6) / n }' "$out/$layer.txt")
  /usr/bin/python3 bench/torch_layers.py --layer "$layer" --d "$d" \
    --threads "$threads" --repeats "$steps" "${torch_args[@]}" > "$out/torch.txt"
  tf=$(awk '$1 == "forward" { print $2 }' "$out/torch.txt")
  tb=$(awk '$1 == "forward+backward" { print $2 }' "$out/torch.txt")
  shape="d $d, 4 x 512 tokens, $threads threads"
  echo "| \`$layer\` layer forward: $what ($shape) | $fwd ms | $tf ms | $(ratio "$fwd" "$tf") |"
  echo "| \`$layer\` layer forward + backward ($shape) | $both ms | $tb ms | $(ratio "$both" "$tb") |"
done
