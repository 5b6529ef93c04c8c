#!/usr/bin/env python3
"""Writes a synthetic bf16 safetensors checkpoint for the tensors listed by
`archc -emit=weights` (stdin): random bits, written tensor by tensor so the
script's memory stays bounded. Usage: make_checkpoint.py OUT.safetensors"""
import json
import struct
import sys

import numpy as np


def main():
    out = sys.argv[1]
    tensors = []
    for line in sys.stdin:
        line = line.strip()
        if not line or line.startswith("//"):
            continue
        name, rest = line.split(" ", 1)
        tensors.append((name, json.loads(rest[: rest.index("]") + 1])))
    header, offset = {}, 0
    for name, shape in sorted(tensors):
        n = int(np.prod(shape)) if shape else 1
        header[name] = {"dtype": "BF16", "shape": shape,
                        "data_offsets": [offset, offset + 2 * n]}
        offset += 2 * n
    text = json.dumps(header).encode()
    text += b" " * ((8 - (8 + len(text)) % 8) % 8)
    rng = np.random.default_rng(0)
    with open(out, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for name, shape in sorted(tensors):
            n = int(np.prod(shape)) if shape else 1
            done = 0
            while done < n:
                k = min(n - done, 1 << 24)
                # bf16 values in [-1, 1): sign/exponent bits kept small.
                v = (rng.standard_normal(k, dtype=np.float32) * 0.02)
                f.write((v.view(np.uint32) >> 16).astype(np.uint16).tobytes())
                done += k


if __name__ == "__main__":
    main()
