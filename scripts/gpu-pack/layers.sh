#!/usr/bin/env bash
# The layer benchmarks of the GPU suite (run.sh calls it after the
# examples): each layer of layers/manifest.tsv (see layer-bundles.sh) timed
# in moec on the cuda device (`moec train --profile`, the time of the
# kernels attributed to the layer's statement, forward and backward apart,
# per layer and step), in PyTorch on the same GPU as the papers' code runs
# it (eager, bf16, loops over experts), with torch.compile where the
# installed PyTorch has it, and a cuBLAS bf16 matrix product of the same
# FLOPs; each with its achieved TFLOP/s beside the ~800 TFLOP/s dense bf16
# ceiling of an H100. Writes OUTDIR/layers.md and OUTDIR/layers.tsv.
# Usage: layers.sh OUTDIR TILES (sm_80 or sm_90). Environment:
# MOEC_PACK_LAYER_STEPS (moec steps, default 12), MOEC_PACK_TORCH_DEVICE
# (default cuda; none skips PyTorch, to check the script without a GPU),
# MOEC_PACK_END (run.sh's time budget: the epoch second by which every
# command is stopped; a layer that cannot start before it is skipped).
# Exit status: 0, 1 when a benchmark failed, 7 when the budget cut one
# short and none failed.
set -uo pipefail
pack="$(cd "$(dirname "$0")" && pwd)"
out="$1" tiles="$2"
moec="$pack/bin/moec"
steps="${MOEC_PACK_LAYER_STEPS:-12}"
device="${MOEC_PACK_TORCH_DEVICE:-cuda}"
logs="$out/logs"
mkdir -p "$logs" "$out/layers"
tsv="$out/layers.tsv"
: > "$tsv"
status=0
stopped=0
end="${MOEC_PACK_END:-}"
# shellcheck source=budget.sh
. "$pack/budget.sh"
# Runs a command, stopped (status 124) at MOEC_PACK_END when it is set.
limited() { run_until "$end" "$@"; }
# Seconds PyTorch may take for one layer (eager, cuBLAS, torch.compile).
torch_cap="${MOEC_PACK_TORCH_CAP_S:-150}"

tflops() { awk -v f="$1" -v ms="$2" 'BEGIN { if (ms > 0) printf "%.1f", f / (ms * 1e9); else print "-" }'; }
value() { awk -v k="$1" '$1 == k { print $2 }' "$2"; }

# Times one layer in moec: "forward backward" ms per layer and step, "0 0"
# (and status 1) when the run fails. Arguments: log file, MOEC_CUBLASLT.
moec_layer() {
  local rc
  MOEC_CACHE_DIR="$out/cache/layers" MOEC_CUBLASLT="$2" limited "$moec" train \
    "$bundle" --device cuda --steps "$steps" --valid-batches 0 \
    --log-every 1000 --profile > "$1" 2>&1 < /dev/null
  rc=$?
  [ $rc -eq 0 ] || { echo "0 0"; return $rc; }
  # "  FILE:LINE:COL  forward F ms/step  backward B ms/step ..."
  awk -v at=":$line:" -v n="$count" '
    index($1, at) && $2 == "forward" { printf "%f %f\n", $3 / n, $6 / n; found = 1 }
    END { if (!found) { print "0 0"; exit 1 } }' "$1"
}

# The table so far, rewritten after every layer.
write_table() {
  {
    echo "## Layers on the GPU ($tiles tiles, bf16, $(date -u +%Y-%m-%d))"
    echo
    echo "One layer per training step: moec's kernels attributed to the layer's"
    echo "statement (\`moec train --device cuda --profile\`, launches timed one by"
    echo "one), PyTorch eager and torch.compile on the same shapes (forward, and"
    echo "forward + backward), and a cuBLAS bf16 matrix product of the layer's"
    echo "forward FLOPs. TFLOP/s from moec's FLOP count of the layer; H100"
    echo "dense bf16 ceiling about 800 TFLOP/s."
    echo
    echo "moec's dense GEMMs that fuse nothing run on cuBLASLt; the next column"
    echo "is the same run with MOEC_CUBLASLT=0 (moec's own kernels only)."
    echo
    echo "| layer | pass | FLOPs | moec ms (TFLOP/s) | moec, own GEMMs ms | PyTorch eager ms | torch.compile ms | cuBLAS same FLOPs ms (TFLOP/s) | moec vs eager |"
    echo "|---|---|---|---|---|---|---|---|---|"
    while IFS=$'\t' read -r name fwd bwd mf mb te teb tc tcb cu rc of ob; do
      what=$(awk -F'\t' -v n="$name" '$1 == n { print $2 }' "$pack/layers/manifest.tsv")
      if [ "$rc" = 124 ] || [ "$rc" = skipped ]; then
        [ "$rc" = 124 ] && why="stopped at the time budget's end" ||
          why="skipped: the time budget ran out"
        echo "| $what | forward, backward | $why | | | | | | |"
        continue
      fi
      both=$(awk -v a="$mf" -v b="$mb" 'BEGIN { printf "%.3f", a + b }')
      total=$(awk -v a="$fwd" -v b="$bwd" 'BEGIN { printf "%.0f", a + b }')
      ratio() { awk -v m="$1" -v t="$2" 'BEGIN { if (m > 0 && t > 0) printf "%.2fx", t / m; else print "-" }'; }
      own=$(awk -v a="$of" -v b="$ob" 'BEGIN { printf "%.3f", a + b }')
      echo "| $what | forward | $(awk -v f="$fwd" 'BEGIN { printf "%.1f G", f / 1e9 }') | $(printf '%.3f' "$mf") ($(tflops "$fwd" "$mf")) | $(printf '%.3f' "$of") | $te | $tc | $cu ($(tflops "$fwd" "$cu")) | $(ratio "$mf" "$te") |"
      echo "| $what | forward + backward | $(awk -v f="$total" 'BEGIN { printf "%.1f G", f / 1e9 }') | $both ($(tflops "$total" "$both")) | $own | $teb | $tcb | | $(ratio "$both" "$teb") |"
    done < "$tsv"
  } > "$out/layers.md"
}

# A command's status: a failure fails the suite, one stopped at the
# budget's end (124, timeout's) leaves it incomplete.
account() {
  case "$1" in
    0) ;;
    124) stopped=1 ;;
    *) status=1 ;;
  esac
}

while IFS=$'\t' read -r name what line count fwd_flops bwd_flops torch_args; do
  if [ -n "$end" ] && [ $(( end - $(date +%s) )) -le 0 ]; then
    echo "run.sh: layer $name: skipped, the time budget ran out"
    printf '%s\t%s\t%s\t0\t0\t-\t-\t-\t-\t-\tskipped\t0\t0\n' "$name" \
      "$fwd_flops" "$bwd_flops" >> "$tsv"
    stopped=1
    continue
  fi
  bundle="$out/layers/$name.bundle.json"
  gunzip -c "$pack/layers/$name.$tiles.bf16.bundle.json.gz" > "$bundle"
  # With cuBLASLt for the dense GEMMs the plan gives it, and without it
  # (every GEMM moec's own kernel): whether the library pays, measured.
  times=$(moec_layer "$logs/layer-$name-moec.txt" 1)
  rc=$?
  read -r mf mb <<< "$times"
  times=$(moec_layer "$logs/layer-$name-moec-own.txt" 0)
  rc_own=$?
  read -r of ob <<< "$times"
  account $rc
  account $rc_own
  [ $rc -ne 0 ] || rc=$rc_own
  torch_log="$logs/layer-$name-torch.txt"
  : > "$torch_log"
  if [ "$device" != none ]; then
    # PyTorch is the reference, not the subject: a torch.compile that takes
    # minutes costs its own figures (printed last), not the next layers'.
    # shellcheck disable=SC2086
    run_capped "$torch_cap" "$end" python3 -u "$pack/torch_layers.py" $torch_args \
      --device "$device" --dtype bf16 --compile --cublas-flops "$fwd_flops" \
      --repeats 20 > "$torch_log" 2>&1 < /dev/null
    rc_torch=$?
    if [ $rc_torch -eq 125 ]; then
      echo "run.sh: layer $name: PyTorch stopped after ${torch_cap} s" \
           "(its figures so far are kept)"
    else
      account $rc_torch
    fi
  fi
  te=$(value forward "$torch_log") teb=$(value forward+backward "$torch_log")
  tc=$(value compiled-forward "$torch_log") tcb=$(value compiled-forward+backward "$torch_log")
  cu=$(value cublas "$torch_log")
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$name" \
    "$fwd_flops" "$bwd_flops" "$mf" "$mb" "${te:--}" "${teb:--}" "${tc:--}" \
    "${tcb:--}" "${cu:--}" "$rc" "$of" "$ob" >> "$tsv"
  echo "run.sh: layer $name: moec forward $mf ms, backward $mb ms" \
       "(own GEMMs only: $of / $ob ms);" \
       "torch eager ${te:--} / ${teb:--} ms, compiled ${tc:--} / ${tcb:--} ms;" \
       "cuBLAS same FLOPs ${cu:--} ms"
  write_table
done < "$pack/layers/manifest.tsv"
write_table
[ $status -eq 0 ] && [ $stopped -eq 1 ] && status=7
exit $status
