#!/usr/bin/env python3
"""Writes a synthetic safetensors checkpoint from `archc -emit=weights` output.

Usage: archc ... -emit=weights | make_safetensors.py OUT [options]
  --dtype F32|F16|BF16     element type (default F32)
  --drop NAME              leave a tensor out
  --reshape NAME           store a tensor with its first dim + 1
  --extra NAME             add an unexpected tensor
  --truncate N             cut the file to N bytes less than its size
Values are deterministic (a ramp), which is all binding tests need.
"""
import json
import struct
import sys


def main():
    args = sys.argv[1:]
    out = args.pop(0)
    opts = {"dtype": "F32", "drop": [], "reshape": [], "extra": [], "truncate": 0}
    while args:
        k = args.pop(0).lstrip("-")
        v = args.pop(0)
        if isinstance(opts[k], list):
            opts[k].append(v)
        elif k == "truncate":
            opts[k] = int(v)
        else:
            opts[k] = v
    size = {"F32": 4, "F16": 2, "BF16": 2}[opts["dtype"]]
    tensors = []
    for line in sys.stdin:
        line = line.strip()
        if not line or line.startswith("//"):
            continue
        name, rest = line.split(" ", 1)
        shape = json.loads(rest[: rest.index("]") + 1])
        if name in opts["drop"]:
            continue
        if name in opts["reshape"]:
            shape[0] += 1
        tensors.append((name, shape))
    for name in opts["extra"]:
        tensors.append((name, [2]))
    header, blobs, offset = {}, [], 0
    for name, shape in sorted(tensors):
        n = 1
        for d in shape:
            n *= d
        if opts["dtype"] == "F32":
            blob = struct.pack("<%df" % n, *[(i % 7) * 0.01 for i in range(n)])
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


if __name__ == "__main__":
    main()
