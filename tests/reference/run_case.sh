#!/bin/sh
# ctest driver for one reference variant: generate the case with the numpy reference, then check archc's
# ONNX (of --target TARGET, default portable) against it with the ONNX Runtime checker.
#   run_case.sh PYTHON NODE ARCHC ARCH_FILE FAMILY CASE_JSON OUT_DIR WORK_DIR [SEED [TARGET]]
set -e
if [ "$#" -lt 8 ]; then
  echo "usage: $0 PYTHON NODE ARCHC ARCH_FILE FAMILY CASE_JSON OUT_DIR WORK_DIR [SEED [TARGET]]" >&2
  exit 2
fi
py=$1 node=$2 archc=$3 arch=$4 family=$5 case_json=$6 out=$7 work=$8 seed=${9:-1234} target=${10:-portable}
here=$(cd "$(dirname "$0")" && pwd)
# Which of the case's options a Hugging Face fixture confirms: an
# unconfirmed variant checks that archc and the reference agree, not HF.
"$py" "$here/check_confirmed.py" --case "$(basename "$case_json" .json)"
"$py" "$here/make_case.py" "$case_json" "$out" --family "$family" --seed "$seed"
exec "$node" "$here/../ort/check_fixture.js" --archc "$archc" --arch "$arch" --case "$out" --work "$work" \
  --target "$target"
