#!/bin/sh
# ctest driver of a transformers.js folder check: what the float16 folder
# must reproduce (tests/reference/rounded_expected.py), then check_model.mjs.
#   run_model_case.sh PYTHON NODE ARCHC CASE_DIR WORK_DIR [check_model.mjs options]
set -e
if [ "$#" -lt 5 ]; then
  echo "usage: $0 PYTHON NODE ARCHC CASE_DIR WORK_DIR [check_model.mjs options]" >&2
  exit 2
fi
py=$1 node=$2 archc=$3 case=$4 work=$5
shift 5
here=$(cd "$(dirname "$0")" && pwd)
# Beside WORK_DIR: check_model.mjs empties WORK_DIR.
expected="$work.rounded-expected.safetensors"
"$py" "$here/../reference/rounded_expected.py" --archc "$archc" --case "$case" \
  --out "$expected" --dtype f16
exec "$node" "$here/check_model.mjs" --archc "$archc" --case "$case" --work "$work" \
  --expected-f16 "$expected" "$@"
