# shellcheck shell=bash
# The GPU suite's time budget, sourced by run.sh and layers.sh.
#
# run_until END COMMAND...: runs COMMAND, stopped at the epoch second END
# (empty: never) with timeout's status 124; a command killed after
# ignoring the stop counts as stopped all the same.
run_until() {
  local end="$1" rc s
  shift
  [ -n "$end" ] || { "$@"; return; }
  s=$((end - $(date +%s)))
  [ "$s" -gt 0 ] || return 124
  timeout -k 5 "$s" "$@"
  rc=$?
  [ $rc -eq 137 ] && [ "$(date +%s)" -ge "$end" ] && rc=124
  return $rc
}

# run_capped SECONDS END COMMAND...: run_until the sooner of END and
# SECONDS from now; status 125 when its own SECONDS stopped it, 124 when
# END did.
run_capped() {
  local cap=$(( $(date +%s) + $1 )) end="$2" rc
  shift 2
  [ -n "$end" ] && [ "$end" -lt "$cap" ] && cap=$end
  run_until "$cap" "$@"
  rc=$?
  [ $rc -eq 124 ] && [ "$cap" != "$end" ] && rc=125
  return $rc
}
