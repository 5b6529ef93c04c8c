#!/bin/sh
# ctest driver of a half-precision check: what the float16 model must
# compute (tests/reference/rounded_expected.py: the numpy reference over the
# checkpoint rounded as the model stores it), then check_dtype.js against it.
#   run_dtype_case.sh PYTHON NODE ARCHC CASE_DIR WORK_DIR [check_dtype.js options]
set -e
if [ "$#" -lt 5 ]; then
  echo "usage: $0 PYTHON NODE ARCHC CASE_DIR WORK_DIR [check_dtype.js options]" >&2
  exit 2
fi
py=$1 node=$2 archc=$3 case=$4 work=$5
shift 5
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$work"
"$py" "$here/../reference/rounded_expected.py" --archc "$archc" --case "$case" \
  --out "$work/rounded-expected.safetensors" --dtype f16
exec "$node" "$here/check_dtype.js" --archc "$archc" --case "$case" --work "$work" \
  --expected "$work/rounded-expected.safetensors" --dtype f16 "$@"
