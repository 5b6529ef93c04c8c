#!/usr/bin/env python3
"""Crafts the hostile inputs of the hardening tests (lit/driver/hardening_*.test).

  hardening.py poke FILE TENSOR ELEMENT VALUE
      overwrite one element of a safetensors tensor in place: VALUE is a
      float (nan, inf, -inf, 1e6, ...) written in the tensor's dtype (F32,
      F16, BF16), or 0xNN, a raw byte (F8_E4M3, U8, I8)
  hardening.py nested-dtype OUT BYTES
      a safetensors file whose one tensor has a dtype of nested arrays
      (a header of about BYTES bytes)
  hardening.py dup-header OUT
      a safetensors file naming one tensor twice in its header
  hardening.py nested-json OUT BYTES
      a JSON document of nested arrays of about BYTES bytes
  hardening.py big-index DIR ENTRIES
      DIR/model.safetensors.index.json with ENTRIES tensors, each in its own
      (absent) shard
  hardening.py index DIR TENSOR=FILE ...
      DIR/model.safetensors.index.json mapping each TENSOR to FILE (a
      TENSOR given twice is written twice)
  hardening.py sums DIR
      one line per file under DIR (sorted, symlinks not followed): its
      path, kind and the SHA-256 of its bytes (to compare before and after)
  hardening.py big-json OUT BYTES
      a valid JSON object padded to BYTES bytes
  hardening.py closed-pipe COMMAND ARGS...
      runs COMMAND with its standard output a pipe nobody reads (closed at
      once) and exits with its code (128 + N for signal N)
  hardening.py list N COMMAND ARGS...
      runs COMMAND with every "@LIST" in ARGS replaced by "1,2,...,N"
      (lists too long to write in a test) and exits with its code
"""
import hashlib
import json
import os
import struct
import subprocess
import sys


def header_of(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        return n, json.loads(f.read(n))


def poke(path, tensor, element, value):
    n, header = header_of(path)
    t = header[tensor]
    begin = t["data_offsets"][0]
    dtype = t["dtype"]
    if value.startswith("0x"):
        raw = bytes([int(value, 16)])
        size = 1
    else:
        v = float(value)
        if dtype == "F32":
            raw, size = struct.pack("<f", v), 4
        elif dtype == "F16":
            raw, size = struct.pack("<e", v) if abs(v) < 65520 or v != v else (
                b"\x00\x7c" if v > 0 else b"\x00\xfc"), 2
        elif dtype == "BF16":
            raw, size = struct.pack("<f", v)[2:], 2
        else:
            sys.exit("poke: a float needs an F32, F16 or BF16 tensor, not " + dtype)
    with open(path, "r+b") as f:
        f.seek(8 + n + begin + int(element) * size)
        f.write(raw)


def write_safetensors(path, header_text, data=b""):
    raw = header_text.encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(raw)))
        f.write(raw)
        f.write(data)


def nested_dtype(path, size):
    depth = int(size) // 2
    dtype = "[" * depth + "]" * depth
    write_safetensors(path, '{"w": {"dtype": %s, "shape": [1], "data_offsets": [0, 4]}}' % dtype,
                      b"\0\0\0\0")


def dup_header(path):
    write_safetensors(path, '{"model.norm.weight": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},'
                            ' "model.norm.weight": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}}',
                      struct.pack("<ff", 1.0, 2.0))


def nested_json(path, size):
    depth = int(size) // 2
    with open(path, "w") as f:
        f.write("[" * depth + "]" * depth)


def big_index(folder, entries):
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "model.safetensors.index.json"), "w") as f:
        f.write('{"metadata": {}, "weight_map": {')
        f.write(",".join('"t.%d": "shard-%d.safetensors"' % (i, i) for i in range(int(entries))))
        f.write("}}")


def index(folder, pairs):
    os.makedirs(folder, exist_ok=True)
    items = []
    for p in pairs:
        k, v = p.split("=", 1)
        items.append("%s: %s" % (json.dumps(k), json.dumps(v)))
    with open(os.path.join(folder, "model.safetensors.index.json"), "w") as f:
        f.write('{"metadata": {}, "weight_map": {' + ", ".join(items) + "}}")


def sums(folder):
    for root, dirs, files in os.walk(folder):
        dirs.sort()
        for name in sorted(files + [d for d in dirs if os.path.islink(os.path.join(root, d))]):
            p = os.path.join(root, name)
            rel = os.path.relpath(p, folder)
            if os.path.islink(p):
                print(rel, "link", os.readlink(p))
            else:
                with open(p, "rb") as f:
                    print(rel, "file", hashlib.sha256(f.read()).hexdigest())


def big_json(path, size):
    pad = int(size) - 20
    with open(path, "w") as f:
        f.write('{"pad": "%s"}' % ("x" * pad))


def run_list(n, command):
    values = ",".join(str(i) for i in range(1, int(n) + 1))
    sys.exit(subprocess.call([a.replace("@LIST", values) for a in command]))


def run_closed_pipe(command):
    # The reader is gone before the command starts: every write fails
    # (EPIPE; SIGPIPE where it is not ignored). The child gets SIGPIPE's
    # default disposition back (restore_signals), as from a shell.
    r, w = os.pipe()
    os.close(r)
    rc = subprocess.call(command, stdout=w)
    sys.exit(rc if rc >= 0 else 128 - rc)


def main():
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "list":
        run_list(args[0], args[1:])
    if cmd == "closed-pipe":
        run_closed_pipe(args)
    {"poke": lambda: poke(*args),
     "nested-dtype": lambda: nested_dtype(*args),
     "dup-header": lambda: dup_header(*args),
     "nested-json": lambda: nested_json(*args),
     "big-index": lambda: big_index(*args),
     "index": lambda: index(args[0], args[1:]),
     "sums": lambda: sums(*args),
     "big-json": lambda: big_json(*args)}[cmd]()


if __name__ == "__main__":
    main()
