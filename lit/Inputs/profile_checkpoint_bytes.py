#!/usr/bin/env python3
"""Checks a profile's weight bytes against the checkpoint it was bound to.

Usage: profile_checkpoint_bytes.py PROFILE.json CHECKPOINT.safetensors

From the safetensors header alone (every tensor's data bytes: packed codes,
scales, zero points, g_idx, float tensors), prints one line per check, each
"ok" or "FAIL" with both numbers:
  - total: the profile's model.weight_bytes against the sum over all tensors;
  - every prefill and decode group "layers a..b" (per layer kind): its
    weight_bytes against the tensors of model.layers.{a..b-1}: each layer's
    weights read once per step, a routed expert's tensors (`.experts.<e>.`)
    times the expected share of the E experts a step of T tokens activates
    with top-k routing, 1 - (1 - k/E)^T (docs/profile.md; from the profile's
    model.moe: k and E); exact, or to 1e-12 relative where that share is
    fractional (the profile sums in another order);
  - every device of every phase: memory_needed_bytes against the checkpoint
    bytes plus the phase's kv_bytes (tensor parallel 1).
"""
import json
import re
import struct
import sys


def tensor_bytes(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
    return {k: e["data_offsets"][1] - e["data_offsets"][0] for k, e in header.items() if k != "__metadata__"}


def main():
    profile = json.load(open(sys.argv[1]))
    sizes = tensor_bytes(sys.argv[2])
    total = sum(sizes.values())
    dense, expert = {}, {}
    for name, b in sizes.items():
        m = re.match(r"model\.layers\.(\d+)\.", name)
        if m:
            part = expert if re.search(r"\.experts\.\d+\.", name) else dense
            part[int(m.group(1))] = part.get(int(m.group(1)), 0) + b
    moe = profile["model"]["moe"]
    if len(moe) > 1 or (expert and not moe):
        sys.exit("one MoE kind expected")
    k, e = (moe[0]["top_k"], moe[0]["experts"]) if moe else (0, 1)

    def check(what, got, want, rel=0.0):
        ok = abs(got - want) <= rel * abs(want)
        print(f"{'ok' if ok else 'FAIL'} {what}: {got:.0f} {'==' if ok else '!='} {want:.0f}")

    check("total", profile["model"]["weight_bytes"], total)
    for point in profile["points"]:
        for phase in [point["prefill"]] + point["decode"]:
            label = f"{phase['phase']} b{phase['batch']} s{phase['seq']}"
            for g in phase["groups"]:
                m = re.fullmatch(r"layers (\d+)\.\.(\d+)", g["group"])
                if not m:
                    continue
                layers = range(int(m.group(1)), int(m.group(2)))
                share = 1 - (1 - k / e) ** phase["tokens"]
                want = sum(dense.get(i, 0) + expert.get(i, 0) * share for i in layers)
                fractional = any(expert.get(i) for i in layers) and share != 1
                check(f"{label} {g['group']}", g["cost"]["weight_bytes"], want, 1e-12 if fractional else 0.0)
            for dev, d in sorted(phase["devices"].items()):
                check(f"{label} {dev} memory", d["memory_needed_bytes"], total + phase["kv_bytes"])


if __name__ == "__main__":
    main()
