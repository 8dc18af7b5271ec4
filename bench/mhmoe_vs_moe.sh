#!/usr/bin/env bash
# MH-MoE against a plain MoE of the same parameter count, side by side on
# the cpu device: examples/mhmoe_lm.moe as it is, and the same model with
# each mh_moe layer replaced by a moe layer (SwiGLU, top-1, tutel capacity,
# top-1 balance loss, no z-loss) whose expert width F' makes the layer's
# parameters equal (within one F' step). Prints a markdown table: the
# training loss (mean of the last 25 steps) every 50 steps and ms/step.
# Usage: bench/mhmoe_vs_moe.sh [THREADS] from the repository root after
# scripts/build.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
moec=./build/bin/moec
threads=${1:-2}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The example's layer: d 128, h 4 (m 32), E 8, F 256, both projections.
d=128 heads=4 experts=8 hidden=256
m=$((d / heads))
mh_params=$((2 * (d * d + d) + m * experts + experts * 3 * m * hidden))
plain_hidden=$(( (mh_params - d * experts + 3 * experts * d / 2) / (3 * experts * d) ))
plain_params=$((d * experts + experts * 3 * d * plain_hidden))

cp examples/mhmoe_lm.moe "$work/mhmoe.moe"
sed -e "s/mh_moe(heads = 4, experts = 8, k = 1, hidden = 256)/moe(experts = 8, k = 1, hidden = $plain_hidden, activation = silu, glu = true, capacity = tutel, balance = top1)/" \
    -e "s/  balance_loss = 0.01/  balance_loss = 0.01\n  z_loss = 0/" \
    examples/mhmoe_lm.moe > "$work/plain.moe"
grep -q "hidden = $plain_hidden" "$work/plain.moe"

for model in mhmoe plain; do
  OMP_NUM_THREADS=$threads "$moec" train "$work/$model.moe" --device cpu \
    --valid-batches 0 > "$work/$model.txt"
done

loss_at() { # FILE STEP
  awk -v s="$2" '$1 == "step" { split($2, a, "/"); if (a[1] == s) print $4 }' "$1"
}
ms_per_step() {
  awk '$1 == "step" { for (i = 1; i < NF; ++i) if ($(i + 1) == "ms/step") v = $i } END { print v }' "$1"
}

echo "| model | layer parameters | step 50 | 100 | 150 | 200 | 250 | 300 | ms/step |"
echo "|---|---|---|---|---|---|---|---|---|"
for model in mhmoe plain; do
  if [ "$model" = mhmoe ]; then
    name="mh_moe(heads 4, E 8, F $hidden)"; params=$mh_params
  else
    name="moe(E 8, F $plain_hidden)"; params=$plain_params
  fi
  row="| $name | $params |"
  for s in 50 100 150 200 250 300; do
    row="$row $(loss_at "$work/$model.txt" $s) |"
  done
  echo "$row $(ms_per_step "$work/$model.txt") |"
done
