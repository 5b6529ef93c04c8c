#!/usr/bin/env python3
"""Checks an archc profile JSON: it parses, has the documented schema, its
numbers are consistent, and (with --table) every number of the table view
appears in it. Usage: check_profile_json.py PROFILE.json [--table TABLE|-]"""
import json
import math
import re
import sys


def fail(msg):
    print("check_profile_json: " + msg)
    sys.exit(1)


def main():
    p = json.load(open(sys.argv[1]))
    for k in ("schema", "model", "runtime", "latency_model", "devices", "points"):
        if k not in p:
            fail("missing key " + k)
    m = p["model"]
    for k in ("params", "weight_tensors", "activated_params_per_token",
              "weight_bytes", "kv_bytes_per_token", "states", "moe"):
        if k not in m:
            fail("model lacks " + k)
    devs = [d["id"] for d in p["devices"]]
    for pt in p["points"]:
        # A decoder's prefill, an encoder's forward, an encoder-decoder's
        # encode and first decoder step; then the decode steps.
        first = [pt[k] for k in ("forward", "encode", "first_step", "prefill")
                 if k in pt]
        if not first:
            fail("a point without a first call")
        for ph in first + pt.get("decode", []):
            c = ph["cost"]
            parts = (c["weight_bytes"] + c["activation_bytes"] +
                     c["kv_read_bytes"] + c["kv_write_bytes"])
            if not math.isclose(parts, c["bytes"], rel_tol=1e-12):
                fail("bytes is not the sum of its parts")
            if not math.isclose(c["matmul_flops"], 2 * c["macs"], rel_tol=1e-12):
                fail("matmul_flops != 2 macs")
            if c["flops"] < c["matmul_flops"]:
                fail("flops < matmul_flops")
            for d in devs:
                t = ph["devices"][d]
                # The phase time sums each op's max(compute, memory): at
                # least the larger sum, at most both sums together (plus
                # the tensor-parallel all-reduces).
                lo = max(t["compute_s"], t["memory_s"])
                hi = t["compute_s"] + t["memory_s"] + t.get("comm_s", 0.0)
                if t["time_s"] < lo * (1 - 1e-12):
                    fail("time below its larger roofline term")
                if t["time_s"] > hi * (1 + 1e-12):
                    fail("time above the sum of its roofline terms")
                if t["tokens_per_s"] <= 0:
                    fail("no throughput")
            gsum = sum(g["cost"]["macs"] for g in ph["groups"])
            if not math.isclose(gsum, c["macs"], rel_tol=1e-9):
                fail("group MACs do not add up to the phase")
    if len(sys.argv) > 3 and sys.argv[2] == "--table":
        table = sys.stdin.read() if sys.argv[3] == "-" else open(sys.argv[3]).read()
        # Every comma-grouped integer of the table is a JSON number.
        numbers = set()
        def walk(x):
            if isinstance(x, dict):
                for v in x.values():
                    walk(v)
            elif isinstance(x, list):
                for v in x:
                    walk(v)
            elif isinstance(x, (int, float)) and not isinstance(x, bool):
                numbers.add(round(float(x)))
        walk(p)
        for tok in re.findall(r"\b\d{1,3}(?:,\d{3})+\b", table):
            if int(tok.replace(",", "")) not in numbers:
                fail("table number %s not in the JSON" % tok)
    print("ok")


if __name__ == "__main__":
    main()
