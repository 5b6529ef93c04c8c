#!/usr/bin/env python3
"""Prints the weight bytes of an emitted ONNX model or a safetensors checkpoint, and of a profile.

Usage: weight_bytes.py onnx MODEL.onnx        bytes of the initializers' external data (each byte range once:
                                              views of one region, e.g. a stacked expert tensor's experts,
                                              count once; alignment padding is not data)
       weight_bytes.py safetensors FILE       sum of the tensors' data bytes
       weight_bytes.py profile PROFILE.json   the profile's model.weight_bytes
"""
import json
import struct
import sys


def onnx_bytes(path):
    import onnx
    m = onnx.load(path, load_external_data=False)
    ranges = set()
    for t in m.graph.initializer:
        kv = {e.key: e.value for e in t.external_data}
        if "offset" in kv:
            ranges.add((int(kv["offset"]), int(kv["length"])))
        else:
            ranges.add((id(t), len(t.raw_data)))
    covered, end = 0, -1
    for off, n in sorted(ranges):
        start = max(off, end)
        if off + n > start:
            covered += off + n - start
        end = max(end, off + n)
    return covered


def safetensors_bytes(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
    return sum(e["data_offsets"][1] - e["data_offsets"][0] for k, e in header.items() if k != "__metadata__")


def main():
    kind, path = sys.argv[1], sys.argv[2]
    if kind == "onnx":
        print(onnx_bytes(path))
    elif kind == "safetensors":
        print(safetensors_bytes(path))
    else:
        print(int(json.load(open(path))["model"]["weight_bytes"]))


if __name__ == "__main__":
    main()
