#!/usr/bin/python3
"""Measures the half-precision error of every Hugging Face fixture and
writes tests/ort/f16_bounds.json, the per-family bounds tests/ort/
check_dtype.js holds the --dtype=f16 models to.

  measure_f16_bounds.py ARCHC [--shared ../shared] [--out FILE] [--work DIR]

For each fixture of ../shared/hf-golden and each target (portable, ort),
check_dtype.js --measure reports max|f16 - HF f32| over the prefill logits
and the cached greedy steps, relative to max(1, max|logit|). A family's bound
is HEADROOM times the largest over its fixtures, rounded up to two
significant digits: the measured error is a property of half precision on
the family's graph (11-bit significands accumulating over the layers), and
the headroom allows for another CPU or ONNX Runtime build rounding
differently. The file records each fixture's measurement, so a reviewer can
see what every bound rests on.

Each measurement also records `weight_floor`: the same error of the float32
graph over the checkpoint's weights rounded to half precision
(check_dtype.js --round-weights), what half-precision weights cost whatever
the graph computes in. An error near its floor is the fixture's own
sensitivity (a near-tied routing decision, a model that amplifies any
perturbation), not the graph's arithmetic; the script names the fixtures
whose floor alone leaves a bound no room below half HF's first-step gap.
"""
import argparse
import glob
import json
import math
import os
import subprocess
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(__file__), ".."))
HEADROOM = 2.0


def round_up(x):
    if x <= 0:
        return 1e-6
    e = math.floor(math.log10(x)) - 1
    return math.ceil(x / 10 ** e) * 10 ** e


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("archc")
    ap.add_argument("--shared", default=os.path.join(ROOT, "..", "shared"))
    ap.add_argument("--out", default=os.path.join(ROOT, "tests", "ort",
                                                  "f16_bounds.json"))
    ap.add_argument("--work", default="/tmp/archc-f16-bounds")
    ap.add_argument("--cases", nargs="*", help="only these fixtures")
    args = ap.parse_args()
    cases = sorted(glob.glob(os.path.join(args.shared, "hf-golden", "*",
                                          "expected.safetensors")))
    if args.cases:
        cases = [c for c in cases
                 if os.path.basename(os.path.dirname(c)) in args.cases]
    measured, failed = [], []
    for exp in cases:
        case = os.path.dirname(exp)
        for target in ("portable", "ort"):
            cmd = ["node", os.path.join(ROOT, "tests", "ort", "check_dtype.js"),
                   "--archc", args.archc, "--case", case, "--dtype", "f16",
                   "--target", target, "--measure", "--work",
                   os.path.join(args.work, target, os.path.basename(case))]
            r = subprocess.run(cmd, capture_output=True, text=True)
            line = r.stdout.strip().splitlines()[-1] if r.stdout.strip() else ""
            if r.returncode != 0 or not line.startswith("{"):
                failed.append(f"{os.path.basename(case)} {target}: "
                              f"{(r.stdout + r.stderr).strip()[-300:]}")
                continue
            m = json.loads(line)
            r = subprocess.run(cmd + ["--round-weights"], capture_output=True,
                               text=True)
            line = r.stdout.strip().splitlines()[-1] if r.stdout.strip() else ""
            if r.returncode != 0 or not line.startswith("{"):
                failed.append(f"{os.path.basename(case)} {target} "
                              f"(rounded weights): "
                              f"{(r.stdout + r.stderr).strip()[-300:]}")
                continue
            m["weight_floor"] = json.loads(line)["relative_error"]
            measured.append(m)
            print(f"{m['case']:40s} {target:8s} {m['relative_error']:.3e}"
                  f" gap {m['first_gap']:.3e} floor {m['weight_floor']:.3e}"
                  f"{'' if m['tokens_equal'] else '  tokens differ'}")
    bounds = {}
    for m in measured:
        b = bounds.setdefault(m["class"], {})
        b[m["target"]] = max(b.get(m["target"], 0.0), m["relative_error"])
    for cls, b in bounds.items():
        for t in b:
            b[t] = round_up(HEADROOM * b[t])
    doc = {
        "about": "Half-precision bounds of tests/ort/check_dtype.js, per "
                 "architectures[0] class and target: relative to max(1, "
                 "max|logit|) of a fixture, %g x the largest error measured "
                 "over the family's fixtures (scripts/measure_f16_bounds.py)."
                 % HEADROOM,
        "bounds": dict(sorted(bounds.items())),
        "measured": measured,
    }
    with open(args.out, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    for m in measured:
        if 2 * round_up(HEADROOM * m["weight_floor"]) >= m["first_gap"]:
            print(f"no room: {m['case']} {m['target']}: half-precision "
                  f"weights alone err by {m['weight_floor']:.3e}, HF's "
                  f"first-step gap is {m['first_gap']:.3e}")
    for f in failed:
        print("could not measure " + f)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
