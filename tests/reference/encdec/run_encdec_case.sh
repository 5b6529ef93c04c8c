#!/bin/sh
# ctest driver for one encoder / encoder-decoder reference variant: generate
# the case with the numpy reference (make_encdec_case.py), then check archc's
# model folder against it with the ONNX Runtime checker
# (tests/ort/check_encdec.js), in transformers.js
# (tests/transformersjs/check_encdec.mjs) and in half precision
# (run_encdec_f16.sh).
#   run_encdec_case.sh PYTHON NODE ARCHC CASE_JSON OUT_DIR WORK_DIR [SEED]
set -e
if [ "$#" -lt 6 ]; then
  echo "usage: $0 PYTHON NODE ARCHC CASE_JSON OUT_DIR WORK_DIR [SEED]" >&2
  exit 2
fi
py=$1 node=$2 archc=$3 case_json=$4 out=$5 work=$6 seed=${7:-1234}
here=$(cd "$(dirname "$0")" && pwd)
rm -rf "$out"
"$py" "$here/make_encdec_case.py" "$case_json" "$out" --archc "$archc" --seed "$seed"
"$node" "$here/../../ort/check_encdec.js" --archc "$archc" --case "$out" --work "$work/ort"
"$node" "$here/../../transformersjs/check_encdec.mjs" --archc "$archc" --case "$out" --work "$work/tjs"
# --dtype=f16 against the reference over the float16-rounded checkpoint:
# 6e-3, twice the largest difference measured over the variants (2.75e-3,
# t5-gated_gelu_untied_buckets; T5 and mT5 1.0e-3 to 2.75e-3, the other
# families at most 8.8e-4).
exec sh "$here/run_encdec_f16.sh" "$py" "$node" "$archc" "$out" "$work/f16" 6e-3
