#!/usr/bin/env bash
# Builds moec and runs the whole test suite (unit tests and lit tests, all
# under CTest). Prints "N passed, N failed" last.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/build.sh

log=$(mktemp)
trap 'rm -f "$log"' EXIT
status=0
ctest --test-dir build --output-on-failure -j "${MOEC_JOBS:-$(nproc)}" \
  --timeout 1800 2>&1 | tee "$log" || status=$?

summary=$(grep -E "tests passed, [0-9]+ tests failed out of [0-9]+" "$log" | tail -n 1 || true)
if [ -n "$summary" ]; then
  failed=$(echo "$summary" | sed -E 's/.* ([0-9]+) tests failed out of ([0-9]+).*/\1/')
  total=$(echo "$summary" | sed -E 's/.* ([0-9]+) tests failed out of ([0-9]+).*/\2/')
  echo "$((total - failed)) passed, $failed failed"
else
  echo "0 passed, 1 failed"
  status=1
fi
exit $status
