#!/bin/sh
# ctest driver for one released quantized checkpoint format (tests/quant/README.md):
#   1. build the checkpoint from a shared fixture's config (make_quantized_checkpoint.py);
#   2. bind it (no --quant): ONNX Runtime reproduces the numpy reference over its dequantized weights
#      (prefill, greedy ids, cache, padding, single pass), on the portable graph and on --target=ort;
#   3. -emit=profile --weights counts exactly the checkpoint's bytes;
#   4. --quant=int4 over it (FP8 / FP4 / MXFP4 re-quantized to int4): read-back L2 error, reference, ORT;
#      and --quant=int8 --target=ort (MoE layers on QMoE);
#   5. with FOLDER_FILE and TJS_DTYPE: the checkpoint folder compiled into a model folder with --quant=int4
#      (run_quant_case.py --folder): the folder's files, read-back, reference, ORT, transformers.js.
#   run_checkpoint_case.sh PYTHON NODE ARCHC ARCH_FILE FAMILY FORMAT FIXTURE_DIR WORK_DIR [FOLDER_FILE TJS_DTYPE]
set -e
if [ "$#" -ne 8 ] && [ "$#" -ne 10 ]; then
  echo "usage: $0 PYTHON NODE ARCHC ARCH_FILE FAMILY FORMAT FIXTURE_DIR WORK_DIR [FOLDER_FILE TJS_DTYPE]" >&2
  exit 2
fi
py=$1 node=$2 archc=$3 arch=$4 family=$5 format=$6 fixture=$7 work=$8
here=$(cd "$(dirname "$0")" && pwd)
if [ ! -f "$fixture/config.json" ]; then
  echo "SKIP: fixture $fixture not found"
  exit 77
fi
ckpt=$work/checkpoint
rm -rf "$work"
mkdir -p "$work"
"$py" "$here/make_quantized_checkpoint.py" "$format" "$fixture" "$ckpt"
"$node" "$here/../ort/check_quant.js" --archc "$archc" --arch "$arch" --config "$ckpt/config.json" \
  --weights "$ckpt/model.safetensors" --work "$work/bind" --expected "$ckpt/expected.safetensors" --name "$format"
# The same on --target=ort: MoE layers read the dequantized experts through ORT's MoE op.
"$node" "$here/../ort/check_quant.js" --archc "$archc" --arch "$arch" --config "$ckpt/config.json" \
  --weights "$ckpt/model.safetensors" --work "$work/bind-ort" --expected "$ckpt/expected.safetensors" \
  --name "$format --target=ort" --opts "--target=ort"
"$archc" "$arch" --config "$ckpt/config.json" -emit=profile --weights "$ckpt" --format=json > "$work/profile.json"
stored=$("$py" "$here/../../lit/Inputs/weight_bytes.py" safetensors "$ckpt/model.safetensors")
counted=$("$py" "$here/../../lit/Inputs/weight_bytes.py" profile "$work/profile.json")
if [ "$stored" != "$counted" ]; then
  echo "FAIL $format: -emit=profile --weights counts $counted weight bytes, the checkpoint holds $stored"
  exit 1
fi
echo "ok   $format -emit=profile --weights: $counted weight bytes = the checkpoint's tensor bytes"
"$py" "$here/run_quant_case.py" --archc "$archc" --arch "$arch" --family "$family" --node "$node" \
  --case "$ckpt" --work "$work/int4" --opts=--quant=int4 --l2 0.05,0.15
# --quant=int8 on --target=ort: the MoE layers re-quantized into ORT's QMoE (block 16: the
# fixtures' intermediate sizes are 16 to 32).
expect=
case $family in deepseek_v3|deepseek_v4|gpt_oss) expect="--expect-op QMoE" ;; esac
"$py" "$here/run_quant_case.py" --archc "$archc" --arch "$arch" --family "$family" --node "$node" \
  --case "$ckpt" --work "$work/int8-ort" "--opts=--quant=int8 --quant-block=16 --target=ort" --l2 0.001,0.01 $expect
if [ "$#" -eq 10 ]; then
  "$py" "$here/run_quant_case.py" --archc "$archc" --arch "$arch" --family "$family" --node "$node" \
    --case "$ckpt" --work "$work/folder" --opts=--quant=int4 --l2 0.05,0.15 --folder "$9" --tjs "${10}"
fi
