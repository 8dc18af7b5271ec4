#!/usr/bin/env bash
# The MAE paper's comparison on the cpu device: examples/mae_lm.moe trained
# by block coordinate descent (MAE), the same model trained jointly (no
# phases: NOBCD), with uniform responsibilities (one head dropped at random
# per sequence: UNI-MAE) and with plain attention (BASE). Prints a markdown
# table: the training loss (mean of the last 25 steps) every 100 steps, the
# validation cross-entropy and ms/step.
# Usage: bench/mae_variants.sh [THREADS] from the repository root after
# scripts/build.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
moec=./build/bin/moec
threads=${1:-2}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

cp examples/mae_lm.moe "$work/mae.moe"
# Without the train section's groups and phases (each spans lines up to
# the closing parenthesis of its call).
sed -e '/^  groups = /d' -e '/^  phases = /,/)$/d' examples/mae_lm.moe \
  > "$work/nobcd.moe"
sed -e 's/mae(heads = 4, gate_hidden = 64)/mae(heads = 4, responsibilities = uniform)/' \
  "$work/nobcd.moe" > "$work/uniform.moe"
sed -e 's/mae(heads = 4, gate_hidden = 64)/attention(heads = 4)/' \
  "$work/nobcd.moe" > "$work/base.moe"
grep -q "responsibilities = uniform" "$work/uniform.moe"
grep -q "attention(heads = 4)" "$work/base.moe"
! grep -q "phases" "$work/nobcd.moe"

for model in mae nobcd uniform base; do
  OMP_NUM_THREADS=$threads "$moec" train "$work/$model.moe" --device cpu \
    > "$work/$model.txt"
done

loss_at() { # FILE STEP (the field after "loss": a phase may come first)
  awk -v s="$2" '$1 == "step" { split($2, a, "/"); if (a[1] != s) next
    for (i = 3; i < NF; ++i) if ($i == "loss") { print $(i + 1); exit } }' "$1"
}
ms_per_step() {
  awk '$1 == "step" { for (i = 1; i < NF; ++i) if ($(i + 1) == "ms/step") v = $i } END { print v }' "$1"
}
validation() {
  awk '$1 == "validation:" { print $3 }' "$1"
}

echo "| model | step 100 | 200 | 300 | validation | ms/step |"
echo "|---|---|---|---|---|---|"
for model in mae nobcd uniform base; do
  case $model in
    mae) name="MAE, coordinate descent" ;;
    nobcd) name="MAE, joint (NOBCD)" ;;
    uniform) name="uniform responsibilities (UNI-MAE)" ;;
    base) name="multi-head attention (BASE)" ;;
  esac
  row="| $name |"
  for s in 100 200 300; do
    row="$row $(loss_at "$work/$model.txt" $s) |"
  done
  echo "$row $(validation "$work/$model.txt") | $(ms_per_step "$work/$model.txt") |"
done
