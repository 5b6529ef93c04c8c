#!/usr/bin/env python3
"""Writes a small checkpoint in a released quantized layout from `archc -emit=weights` output, and its config.

Usage: archc ... -emit=weights | make_quantized_checkpoint.py CONFIG_IN OUT_DIR FORMAT [options]
  FORMAT  fp8     2-D *_proj weights F8_E4M3 + <name>_scale_inv F32 per 128x128 block (DeepSeek-V3)
          v4      2-D *_proj weights F8_E4M3 + <base>.scale F8_E8M0; mlp.down_proj FP4 (I8 [out, in/2] +
                  <base>.scale F8_E8M0 [out, in/32]) (DeepSeek-V4, expert_dtype fp4)
          mxfp4   stacked experts <name>_blocks U8 [E, out, in/32, 16] + <name>_scales U8 (gpt-oss)
  --quant-method M       quant_method written to config.json (default: the format's)
  --no-quant-config      write no quantization_config
  --drop NAME            leave a tensor out (e.g. a scale)
  --extra NAME           add a tensor [1] F32 (e.g. a scale of an unquantized weight)
  --scale-shape NAME     store scale tensor NAME with its first dim + 1
  --packed-shape NAME    store packed/blocks tensor NAME with its last dim + 1
  --nan-scale NAME       set the first byte of ue8m0 scale NAME to 0xFF (NaN)
Writes OUT_DIR/config.json and OUT_DIR/model.safetensors; values are deterministic.
"""
import json
import os
import re
import struct
import sys


def main():
    args = sys.argv[1:]
    cfg_in, out, fmt = args[0], args[1], args[2]
    args = args[3:]
    opts = {"drop": [], "extra": [], "scale-shape": [], "packed-shape": [], "nan-scale": []}
    method = {"fp8": "fp8", "v4": "fp8", "mxfp4": "mxfp4"}[fmt]
    quant_config = True
    while args:
        k = args.pop(0).lstrip("-")
        if k == "no-quant-config":
            quant_config = False
        elif k == "quant-method":
            method = args.pop(0)
        else:
            opts[k].append(args.pop(0))
    with open(cfg_in) as f:
        cfg = json.load(f)
    if quant_config:
        qc = {"quant_method": method}
        if method == "fp8":
            qc.update({"activation_scheme": "dynamic", "fmt": "e4m3", "weight_block_size": [128, 128]})
            if fmt == "v4":
                qc["scale_fmt"] = "ue8m0"
        cfg["quantization_config"] = qc
    if fmt == "v4":
        cfg["expert_dtype"] = "fp4"
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)

    tensors = {}  # name -> (dtype, shape, bytes)

    def put(name, dtype, shape, data):
        tensors[name] = (dtype, list(shape), data)

    def ramp(n, size):
        return bytes((i * 7 + 3) % 251 for i in range(n * size))

    for line in sys.stdin:
        m = re.match(r"^(\S+) \[([^\]]*)\] (\S+)$", line.strip())
        if not m:
            continue
        name, dims, dtype = m.group(1), [int(d) for d in m.group(2).split(", ") if d], m.group(3)
        n = 1
        for d in dims:
            n *= d
        if dtype == "i64":
            put(name, "I64", dims, struct.pack(f"<{n}q", *[i % 2 for i in range(n)]))
            continue
        if fmt == "mxfp4" and len(dims) == 3 and re.search(r"experts\.(gate_up|down)_proj$", name):
            e, i, o = dims  # the model reads [E, in, out]; blocks are [E, out, in/32, 16]
            put(name + "_blocks", "U8", [e, o, i // 32, 16], ramp(e * o * i // 2, 1))
            put(name + "_scales", "U8", [e, o, i // 32], bytes([120 + (j % 8) for j in range(e * o * i // 32)]))
            continue
        if fmt == "v4" and len(dims) == 2 and name.endswith("mlp.down_proj.weight"):
            o, i = dims
            put(name, "I8", [o, (i + 1) // 2], ramp(o * ((i + 1) // 2), 1))
            put(name[:-7] + ".scale", "F8_E8M0", [o, (i + 31) // 32], bytes([124] * (o * ((i + 31) // 32))))
            continue
        if fmt in ("fp8", "v4") and len(dims) == 2 and name.endswith("_proj.weight"):
            o, i = dims
            put(name, "F8_E4M3", dims, bytes((j * 5) % 0x7E for j in range(n)))
            so, si = -(-o // 128), -(-i // 128)
            if fmt == "v4":
                put(name[:-7] + ".scale", "F8_E8M0", [so, si], bytes([120] * (so * si)))
            else:
                put(name + "_scale_inv", "F32", [so, si], struct.pack(f"<{so * si}f", *([0.01] * (so * si))))
            continue
        put(name, "F32", dims, struct.pack(f"<{n}f", *[((j % 17) - 8) / 64 for j in range(n)]))

    for name in opts["drop"]:
        del tensors[name]
    for name in opts["extra"]:
        put(name, "F32", [1], struct.pack("<f", 1.0))
    for name in opts["scale-shape"] + opts["packed-shape"]:
        dtype, shape, data = tensors[name]
        shape = list(shape)
        axis = 0 if name in opts["scale-shape"] else len(shape) - 1
        per = len(data) // max(1, eval("*".join(str(d) for d in shape)))
        shape[axis] += 1
        count = 1
        for d in shape:
            count *= d
        tensors[name] = (dtype, shape, (data * 2)[:count * per])
    for name in opts["nan-scale"]:
        dtype, shape, data = tensors[name]
        tensors[name] = (dtype, shape, b"\xff" + data[1:])

    header, blobs, off = {}, [], 0
    for name in sorted(tensors):
        dtype, shape, data = tensors[name]
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [off, off + len(data)]}
        blobs.append(data)
        off += len(data)
    h = json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(os.path.join(out, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


if __name__ == "__main__":
    main()
