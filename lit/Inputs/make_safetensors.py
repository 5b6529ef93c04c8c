#!/usr/bin/env python3
"""Writes a synthetic safetensors checkpoint from `archc -emit=weights` output.

Usage: archc ... -emit=weights | make_safetensors.py OUT [options]
  --dtype F32|F16|BF16     element type (default F32)
  --drop NAME              leave a tensor out
  --reshape NAME           store a tensor with its first dim + 1
  --extra NAME             add an unexpected tensor
  --truncate N             cut the file to N bytes less than its size
  --ramp N                 F32 values are (i % N) * 0.01 (default 7)
  --shards N               write OUT as a directory holding N shards
                           (model-0000K-of-0000N.safetensors) and
                           model.safetensors.index.json, Hugging Face style
Values are deterministic (a ramp), which is all binding tests need; a ramp whose period does not
divide a row plus one (e.g. 11 for rows of 64) tells a square matrix from its transpose.
"""
import json
import os
import struct
import sys

from weight_listing import read_listing


def main():
    args = sys.argv[1:]
    out = args.pop(0)
    opts = {"dtype": "F32", "drop": [], "reshape": [], "extra": [], "truncate": 0,
            "shards": 1, "ramp": 7}
    while args:
        k = args.pop(0).lstrip("-")
        v = args.pop(0)
        if isinstance(opts[k], list):
            opts[k].append(v)
        elif k in ("truncate", "shards", "ramp"):
            opts[k] = int(v)
        else:
            opts[k] = v
    size = {"F32": 4, "F16": 2, "BF16": 2}[opts["dtype"]]
    tensors = []
    for name, shape in read_listing(sys.stdin):
        if name in opts["drop"]:
            continue
        if name in opts["reshape"]:
            shape[0] += 1
        tensors.append((name, shape))
    for name in opts["extra"]:
        tensors.append((name, [2]))
    if opts["shards"] == 1:
        write_file(out, sorted(tensors), opts)
        return
    # Round-robin over the shards so every shard holds tensors of all kinds.
    os.makedirs(out, exist_ok=True)
    count = opts["shards"]
    weight_map, total = {}, 0
    for k in range(count):
        part = sorted(tensors)[k::count]
        name = "model-%05d-of-%05d.safetensors" % (k + 1, count)
        total += write_file(os.path.join(out, name), part, opts)
        for t, _ in part:
            weight_map[t] = name
    with open(os.path.join(out, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map},
                  f, indent=2, sort_keys=True)


def write_file(out, tensors, opts):
    """Writes one safetensors file; returns its data size in bytes."""
    header, blobs, offset = {}, [], 0
    for name, shape in tensors:
        n = 1
        for d in shape:
            n *= d
        if opts["dtype"] == "F32":
            blob = struct.pack("<%df" % n, *[(i % opts["ramp"]) * 0.01 for i in range(n)])
        else:
            blob = struct.pack("<%dH" % n, *[0x3C00 if opts["dtype"] == "F16" else 0x3F80] * n)
        header[name] = {"dtype": opts["dtype"], "shape": shape,
                        "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    text = json.dumps(header).encode()
    text += b" " * ((8 - (8 + len(text)) % 8) % 8)
    data = struct.pack("<Q", len(text)) + text + b"".join(blobs)
    if opts["truncate"]:
        data = data[: len(data) - opts["truncate"]]
    with open(out, "wb") as f:
        f.write(data)
    return offset

if __name__ == "__main__":
    main()
