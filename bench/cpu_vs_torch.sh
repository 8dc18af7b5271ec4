#!/usr/bin/env bash
# The cpu device against PyTorch on the CPU, same thread count, measured in
# one run: examples/moe_lm.moe grown to d_model D with E experts, batch 4 x
# 512 tokens, and its attention and expert layers alone. Prints markdown
# table rows: training, the layers, the forward alone and decoding.
# Usage: bench/cpu_vs_torch.sh D E [STEPS] [THREADS]
# (from the repository root, after a build; needs python3-torch).
# K=k routes each token to k experts (default 2) and HIDDEN=h makes each
# expert h wide (default 2 D): fine-grained experts, e.g. E 64, K=8,
# HIDDEN=D/2, do the FLOPs of the default top-2 with a quarter of its width
# per expert. Variants, of which the training step, the forward and
# decoding are compared (not the layers alone): MOA="E K" makes every
# block's attention MoA with E experts, top K, head dimension 64; MAE=G
# every attention MAE with a gate G wide (trained jointly); MHMOE=H every
# MoE layer MH-MoE with H sub-tokens (SwiGLU experts HIDDEN wide, top K of
# the E experts).
set -euo pipefail
d="$1" experts="$2" steps="${3:-5}" threads="${4:-2}"
k="${K:-2}" hidden="${HIDDEN:-$((2 * d))}"
heads=$((d / 64))
moec=./build/bin/moec
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

sed -e "s/^let d = 128/let d = $d/" -e "s/^let heads = 4/let heads = $heads/" \
    -e "s/^let experts = 8/let experts = $experts/" \
    -e "s/k = 2, hidden = 2 \* d,/k = $k, hidden = $hidden,/" \
    -e 's/max_seq = 64/max_seq = 512/' -e 's/batch = 16/batch = 4/' \
    -e 's/seq_len = 64/seq_len = 512/' examples/moe_lm.moe > "$out/model.moe"
torch_args=(--d "$d" --heads "$heads" --experts "$experts" --k "$k"
  --expert-hidden "$hidden" --threads "$threads")
name="moe_lm" variant=""
if [ -n "${MOA:-}" ]; then
  read -r moa_experts moa_k <<< "$MOA"
  sed -i "s/attention(heads = heads)/moa(experts = $moa_experts, k = $moa_k, head_dim = 64)/" \
    "$out/model.moe"
  torch_args+=(--moa-experts "$moa_experts" --moa-k "$moa_k" --moa-head-dim 64)
  name="moe_lm with MoA (E $moa_experts, top-$moa_k, head_dim 64)" variant=moa
elif [ -n "${MAE:-}" ]; then
  sed -i "s/attention(heads = heads)/mae(heads = heads, gate_hidden = $MAE)/" \
    "$out/model.moe"
  torch_args+=(--mae-gate "$MAE")
  name="moe_lm with MAE ($heads heads, gate $MAE, joint training)" variant=mae
fi
if [ -n "${MHMOE:-}" ]; then
  sed -i "/^      moe(experts/,/balance = all_slots)/c\\      mh_moe(heads = $MHMOE, experts = experts, k = $k, hidden = $hidden)" \
    "$out/model.moe"
  torch_args+=(--mh-moe-heads "$MHMOE")
  name="moe_lm with MH-MoE ($MHMOE sub-tokens, SwiGLU experts)" variant=mh_moe
fi
if [ -n "$variant" ] && ! grep -q "^ *$variant(" "$out/model.moe"; then
  echo "cpu_vs_torch.sh: examples/moe_lm.moe changed: no $variant layer written" >&2
  exit 1
fi
"$moec" compile "$out/model.moe" -o "$out/model.json"
# One warm-up step more than PyTorch's timed steps, as PyTorch's peer runs
# one untimed: the mean of steps 2.. from the running means of steps 1 and N.
OMP_NUM_THREADS=$threads "$moec" train "$out/model.json" --steps $((steps + 1)) \
  --log-every 1 --valid-batches 0 --profile --save "$out/weights.ckpt" > "$out/moec.txt"
moec_ms=$(sed -n 's/.* mean \([0-9.]*\) ms\/step.*/\1/p' "$out/moec.txt" |
  awk -v n=$((steps + 1)) 'NR == 1 { first = $1 } END { printf "%.0f", (n * $1 - first) / (n - 1) }')
# Per call of an op: ms/step divided by calls per step. The profile leaves
# out the first step, so it covers the same STEPS steps PyTorch times.
per_call() {
  awk -v op="$1" -v steps="$steps" \
    '$1 == op { printf "%.2f", $2 / ($5 / steps) }' "$out/moec.txt"
}
torch_ms=$(/usr/bin/python3 bench/torch_moe_lm.py "${torch_args[@]}" \
  --steps "$steps" | sed -n 's/.* \([0-9.]*\) ms\/step.*/\1/p')
shape="d $d, $heads heads, E $experts top-$k, 4 x 512 tokens, $threads threads"
[ "$hidden" = $((2 * d)) ] ||
  shape="d $d, $heads heads, E $experts top-$k, experts $hidden wide, 4 x 512 tokens, $threads threads"
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2fx", b / a }'; }
echo "| $name training step ($shape) | $moec_ms ms | $torch_ms ms | $(ratio "$moec_ms" "$torch_ms") |"
forward_row() {
  OMP_NUM_THREADS=$threads "$moec" eval "$out/model.json" --weights "$out/weights.ckpt" \
    --batches $((steps + 1)) > "$out/eval.txt"
  m=$(sed -n 's/^time: \([0-9.]*\) ms per batch.*/\1/p' "$out/eval.txt")
  t=$(/usr/bin/python3 bench/torch_moe_lm.py "${torch_args[@]}" --steps "$steps" \
    --forward | sed -n 's/^torch forward \([0-9.]*\) ms.*/\1/p')
  echo "| $name forward: held-out loss, no gradients ($shape) | $m ms | $t ms | $(ratio "$m" "$t") |"
}
# Greedy decoding of one sequence with the caches, per token after a
# 16-token prompt (moec run prints its time).
decode_row() {
  OMP_NUM_THREADS=$threads "$moec" run "$out/model.json" --weights "$out/weights.ckpt" \
    --prompt "the cat sat on t" --max-tokens 129 > "$out/run.txt"
  m=$(sed -n 's/.* tokens after it at \([0-9.]*\) ms each.*/\1/p' "$out/run.txt")
  t=$(/usr/bin/python3 bench/torch_moe_lm.py "${torch_args[@]}" --decode 128 |
    sed -n 's/.* \([0-9.]*\) ms\/token.*/\1/p')
  echo "| $name decoding, KV cache, batch 1, per token after a 16-token prompt ($shape) | $m ms | $t ms | $(ratio "$m" "$t") |"
}
if [ -n "$variant" ]; then
  forward_row
  decode_row
  exit 0
fi
/usr/bin/python3 bench/torch_moe_lm.py "${torch_args[@]}" --layers > "$out/torch.txt"
for op in moe.attention moe.attention_grad moe.expert_ffn moe.expert_ffn_grad; do
  m=$(per_call "$op")
  t=$(awk -v op="$op" '$2 == op { print $3 }' "$out/torch.txt")
  echo "| \`$op\` per layer ($shape) | $m ms | $t ms | $(ratio "$m" "$t") |"
done
# Without gradients: the held-out loss of a batch of the same shape, and
# decoding.
forward_row
decode_row
