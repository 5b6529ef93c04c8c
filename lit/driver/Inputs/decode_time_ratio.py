#!/usr/bin/python3
"""decode_time_ratio.py A.json B.json: the ratio of the first decode point's
memory time on B's only device to A's (two -emit=profile --format=json
reports of the same model)."""
import json
import sys


def memory_s(path):
    report = json.load(open(path))
    point = next(p["decode"][0] for p in report["points"] if p.get("decode"))
    (device,) = point["devices"].values()
    return device["memory_s"], device["time_s"]


a, b = memory_s(sys.argv[1]), memory_s(sys.argv[2])
print(f"decode memory time ratio {b[0] / a[0]:.3f}, time ratio {b[1] / a[1]:.3f}")
