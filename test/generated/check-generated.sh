#!/usr/bin/env bash
# The committed outputs of moec-tblgen must equal what the ODS files give
# now. Usage: check-generated.sh GENERATED_DIR SOURCE_DIR
set -euo pipefail
generated="$1"
src="$2"
status=0
for pair in "MoeDefs.h:runtime/support/include/moec/support/MoeDefs.h" \
            "defs.cuh:runtime/device/defs.cuh"; do
  if ! diff -u "$src/${pair#*:}" "$generated/${pair%%:*}"; then
    echo "FAIL: ${pair#*:} is out of date with the ODS files; run" \
         "cmake --build build --target moec-update-generated and commit it"
    status=1
  fi
done
[ $status -eq 0 ] && echo "generated files are current"
exit $status
