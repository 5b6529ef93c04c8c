#!/bin/sh
# ctest driver for one encoder / encoder-decoder case in half precision: the
# numpy reference over the case's weights rounded to float16
# (rounded_expected_encdec.py), then archc's --dtype=f16 folder against it
# with tests/ort/check_encdec.js --dtype f16 and the bound given.
#   run_encdec_f16.sh PYTHON NODE ARCHC CASE_DIR WORK_DIR BOUND
set -e
if [ "$#" -lt 6 ]; then
  echo "usage: $0 PYTHON NODE ARCHC CASE_DIR WORK_DIR BOUND" >&2
  exit 2
fi
py=$1 node=$2 archc=$3 case=$4 work=$5 bound=$6
here=$(cd "$(dirname "$0")" && pwd)
rm -rf "$work"
mkdir -p "$work"
"$py" "$here/rounded_expected_encdec.py" "$case" "$work/expected_f16.safetensors"
exec "$node" "$here/../../ort/check_encdec.js" --archc "$archc" --case "$case" --work "$work/ort" \
  --dtype f16 --expected "$work/expected_f16.safetensors" --bound "$bound"
