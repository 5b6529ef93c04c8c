#!/usr/bin/env python3
"""Checks an ONNX model's float initializers against the safetensors checkpoint it was bound to.

Usage: check_linear_layout.py MODEL.onnx CHECKPOINT.safetensors

Every initializer named after a checkpoint tensor must hold that tensor's values (converted to the
initializer's element type): in the checkpoint's shape, or, for a 2-D tensor stored transposed
([in, out] of an [out, in] Linear weight), its transpose. Prints the number of each, and the
transposed names with their dims; exits 1 on a mismatch.
"""
import json
import os
import struct
import sys

import numpy as np
import onnx
from onnx import numpy_helper


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    base = 8 + n
    types = {"F32": np.float32, "F16": np.float16}
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        lo, hi = t["data_offsets"]
        out[name] = np.frombuffer(data[base + lo:base + hi], dtype=types[t["dtype"]]).reshape(t["shape"])
    return out


def main():
    model_path, ckpt_path = sys.argv[1], sys.argv[2]
    m = onnx.load(model_path, load_external_data=False)
    onnx.external_data_helper.load_external_data_for_model(m, os.path.dirname(os.path.abspath(model_path)))
    ckpt = read_safetensors(ckpt_path)
    same, transposed, bad = 0, [], 0
    for init in m.graph.initializer:
        if init.name not in ckpt:
            continue
        got = numpy_helper.to_array(init)
        want = ckpt[init.name].astype(got.dtype)
        if list(got.shape) == list(want.shape) and np.array_equal(got, want):
            same += 1
        elif want.ndim == 2 and list(got.shape) == list(want.shape[::-1]) and np.array_equal(got, want.T):
            transposed.append((init.name, list(got.shape)))
        else:
            print("MISMATCH", init.name, list(got.shape), list(want.shape))
            bad += 1
    print("as stored", same)
    print("transposed", len(transposed))
    for name, dims in transposed:
        print("T", name, dims)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
