#!/usr/bin/python3
"""Writes a safetensors checkpoint from `archc -emit=weights` output, fast at any size.

Usage: archc ... -emit=weights | patterned_safetensors.py OUT [--dtype BF16|F32]

Element i of the t-th tensor (in name order) is value (i + 7 t) % 251 of a fixed table of 251
distinct small values: a period that divides no row, so a matrix differs from its transpose
and from its neighbours. The file is written in pieces of 8 MiB (memory stays small whatever
the tensors' size).
"""
import json
import struct
import sys

from weight_listing import read_listing

PERIOD = 251


def table(dtype):
    values = [((k * 37) % PERIOD - 125) / 256.0 for k in range(PERIOD)]
    if dtype == "F32":
        return [struct.pack("<f", v) for v in values]
    # bf16: the top half of the f32 (these values are exact in bf16).
    return [struct.pack("<f", v)[2:] for v in values]


def main():
    out = sys.argv[1]
    dtype = sys.argv[3] if len(sys.argv) > 3 and sys.argv[2] == "--dtype" else "BF16"
    size = {"F32": 4, "BF16": 2}[dtype]
    tensors = sorted(read_listing(sys.stdin))
    header, offset = {}, 0
    for name, shape in tensors:
        n = 1
        for d in shape:
            n *= d
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + n * size]}
        offset += n * size
    text = json.dumps(header).encode()
    text += b" " * ((8 - (8 + len(text)) % 8) % 8)
    cycle = b"".join(table(dtype))
    # Whole periods of 8 MiB or less, from any starting element.
    reps = max(1, (8 << 20) // len(cycle))
    long_cycle = cycle * (reps + 1)
    with open(out, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for t, (name, shape) in enumerate(tensors):
            n = 1
            for d in shape:
                n *= d
            i = 0
            while i < n:
                k = min(n - i, reps * PERIOD)
                start = (i + 7 * t) % PERIOD
                f.write(long_cycle[start * size:(start + k) * size])
                i += k


if __name__ == "__main__":
    main()
