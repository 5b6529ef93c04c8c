#!/usr/bin/env python3
"""Writes a synthetic bf16 safetensors checkpoint for the tensors listed by
`archc -emit=weights` (stdin): random bits, written tensor by tensor so the
script's memory stays bounded. Usage: make_checkpoint.py OUT.safetensors [--fp8]
With --fp8 the 2-D *_proj weights are stored as DeepSeek-V3-style fine-grained
FP8 (F8_E4M3 + F32 weight_scale_inv per 128x128 block); the config then needs
its quantization_config."""
import json
import struct
import sys

import numpy as np


def main():
    out = sys.argv[1]
    fp8 = "--fp8" in sys.argv[2:]
    tensors = []
    for line in sys.stdin:
        line = line.strip()
        if not line or line.startswith("//"):
            continue
        name, rest = line.split(" ", 1)
        tensors.append((name, json.loads(rest[: rest.index("]") + 1])))
    entries = []  # (name, dtype, shape, bytes per element)
    for name, shape in tensors:
        if fp8 and len(shape) == 2 and name.endswith("_proj.weight"):
            entries.append((name, "F8_E4M3", shape, 1))
            entries.append((name + "_scale_inv", "F32",
                            [-(-shape[0] // 128), -(-shape[1] // 128)], 4))
        else:
            entries.append((name, "BF16", shape, 2))
    entries.sort()
    header, offset = {}, 0
    for name, dtype, shape, size in entries:
        n = int(np.prod(shape)) if shape else 1
        header[name] = {"dtype": dtype, "shape": shape,
                        "data_offsets": [offset, offset + size * n]}
        offset += size * n
    text = json.dumps(header).encode()
    text += b" " * ((8 - (8 + len(text)) % 8) % 8)
    rng = np.random.default_rng(0)
    with open(out, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for name, dtype, shape, size in entries:
            n = int(np.prod(shape)) if shape else 1
            done = 0
            while done < n:
                k = min(n - done, 1 << 24)
                if dtype == "F8_E4M3":  # any finite e4m3 code, either sign
                    f.write(rng.integers(0, 0x7F, k, dtype=np.uint8).tobytes())
                elif dtype == "F32":
                    f.write(np.full(k, 0.002, np.float32).tobytes())
                else:
                    # bf16 values in [-1, 1): sign/exponent bits kept small.
                    v = (rng.standard_normal(k, dtype=np.float32) * 0.02)
                    f.write((v.view(np.uint32) >> 16).astype(np.uint16).tobytes())
                done += k


if __name__ == "__main__":
    main()
