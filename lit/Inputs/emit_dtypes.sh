#!/bin/sh
# Emits every named tiny config as ONNX in each dtype (random weights).
#   emit_dtypes.sh ARCHC CONFIG_DIR OUT_DIR "dtype ..." config ...
set -e
archc=$1 configs=$2 out=$3 dtypes=$4
shift 4
for c in "$@"; do
  for d in $dtypes; do
    mkdir -p "$out/$c-$d"
    "$archc" --config "$configs/tiny/$c.json" -emit=onnx --dtype="$d" --init=random \
      -o "$out/$c-$d/model.onnx"
  done
done
