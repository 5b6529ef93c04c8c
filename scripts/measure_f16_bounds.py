#!/usr/bin/python3
"""Measures the half-precision error of every Hugging Face fixture and
writes tests/ort/f16_bounds.json, the per-family bounds tests/ort/
check_dtype.js, check_vlm.js and the transformers.js checker hold the
--dtype=f16 models to.

  measure_f16_bounds.py ARCHC [--shared ../shared] [--out FILE] [--work DIR]
                        [--cases CASE ...]

What a float16 model must reproduce is the model its float16 weights
define: tests/reference/rounded_expected.py runs the numpy reference over the
fixture's checkpoint rounded to float16 where the model stores float16. For
each fixture of ../shared/hf-golden and each target (portable, ort),
check_dtype.js --measure --expected reports max|f16 - that reference| over
the prefill logits and the cached greedy steps, relative to max(1,
max|logit|): the error of the graph's half-precision arithmetic. A family's
bound is HEADROOM times the largest over its fixtures, rounded up to two
significant digits (the headroom allows for another CPU or ONNX Runtime
build rounding differently).

Each measurement also records, for the reader:
  * `vs_hf`: the same error of the f16 model against Hugging Face's float32
    logits (check_dtype.js --measure without --expected);
  * `weight_floor`: max|reference over the rounded weights - HF| over the
    prefill logits, relative as above, what float16 weights cost whatever the
    graph computes in (numpy only, no archc arithmetic). Where it reaches the
    fixture's first-step gap, no float16 model can be compared with HF's
    tokens; the script names those fixtures.
Vision-language fixtures (../shared/hf-golden-vlm) are measured against HF
(check_vlm.js --measure: features, prefill and cached step logits).
A fixture tests/exclusions.txt excludes from the f16 tests is measured and
printed but sets no bound.
"""
import argparse
import glob
import json
import math
import os
import subprocess
import sys

import numpy as np

ROOT = os.path.normpath(os.path.join(os.path.dirname(__file__), ".."))
sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(ROOT, "tests", "reference"))
import hf_reference as ref  # noqa: E402

HEADROOM = 2.0


def round_up(x):
    if x <= 0:
        return 1e-6
    e = math.floor(math.log10(x)) - 1
    return math.ceil(x / 10 ** e) * 10 ** e


def last_json(r):
    line = r.stdout.strip().splitlines()[-1] if r.stdout.strip() else ""
    return json.loads(line) if r.returncode == 0 and line.startswith("{") else None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("archc")
    ap.add_argument("--shared", default=os.path.join(ROOT, "..", "shared"))
    ap.add_argument("--out", default=os.path.join(ROOT, "tests", "ort", "f16_bounds.json"))
    ap.add_argument("--work", default="/tmp/archc-f16-bounds")
    ap.add_argument("--cases", nargs="*", help="only these fixtures")
    args = ap.parse_args()
    keep = lambda c: not args.cases or os.path.basename(os.path.dirname(c)) in args.cases  # noqa: E731
    cases = [c for c in sorted(glob.glob(os.path.join(args.shared, "hf-golden", "*", "expected.safetensors")))
             if keep(c)]
    vlm_cases = [c for c in sorted(glob.glob(os.path.join(args.shared, "hf-golden-vlm", "*",
                                                          "expected.safetensors"))) if keep(c)]
    measured, failed = [], []
    for exp in cases:
        case = os.path.dirname(exp)
        name = os.path.basename(case)
        expected = os.path.join(args.work, "rounded", name + ".safetensors")
        r = subprocess.run(["/usr/bin/python3", os.path.join(ROOT, "tests", "reference", "rounded_expected.py"),
                            "--archc", args.archc, "--case", case, "--out", expected],
                           capture_output=True, text=True)
        if r.returncode != 0:
            failed.append(f"{name} (reference): {(r.stdout + r.stderr).strip()[-300:]}")
            continue
        hf, _ = ref.read_safetensors(exp)
        rx, _ = ref.read_safetensors(expected)
        scale = max(1.0, float(np.abs(hf["logits"]).max()))
        floor = float(np.abs(rx["logits"].astype(np.float64) - hf["logits"]).max()) / scale
        for target in ("portable", "ort"):
            cmd = ["node", os.path.join(ROOT, "tests", "ort", "check_dtype.js"), "--archc", args.archc,
                   "--case", case, "--dtype", "f16", "--target", target, "--measure", "--work",
                   os.path.join(args.work, target, name)]
            m = last_json(subprocess.run(cmd + ["--expected", expected], capture_output=True, text=True))
            h = last_json(subprocess.run(cmd, capture_output=True, text=True))
            if m is None or h is None:
                failed.append(f"{name} {target}")
                continue
            m["vs_hf"] = h["relative_error"]
            m["hf_first_gap"] = h["first_gap"]
            m["weight_floor"] = floor
            measured.append(m)
            print(f"{name:40s} {target:8s} {m['relative_error']:.3e} gap {m['first_gap']:.3e}  vs HF "
                  f"{m['vs_hf']:.3e} floor {floor:.3e}{'' if m['tokens_equal'] else '  tokens differ'}")
    for exp in vlm_cases:
        case = os.path.dirname(exp)
        name = os.path.basename(case)
        m = last_json(subprocess.run(["node", os.path.join(ROOT, "tests", "ort", "check_vlm.js"), "--archc",
                                      args.archc, "--case", case, "--work", os.path.join(args.work, "vlm", name),
                                      "--dtype", "f16", "--measure"], capture_output=True, text=True))
        if m is None:
            failed.append(f"{name} (vision-language)")
            continue
        m["against"] = "hf"
        measured.append(m)
        print(f"{name:40s} vlm      {m['relative_error']:.3e} gap {m['first_gap']:.3e} (against HF)")
    excluded = set()
    with open(os.path.join(ROOT, "tests", "exclusions.txt")) as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 2 and parts[0] in ("f16", "vlm-f16"):
                excluded.add(parts[1])
    bounds = {}
    for m in measured:
        if m["case"] in excluded:
            m["excluded"] = True
            continue
        b = bounds.setdefault(m["class"], {})
        b[m["target"]] = max(b.get(m["target"], 0.0), m["relative_error"])
    for cls, b in bounds.items():
        for t in b:
            b[t] = round_up(HEADROOM * b[t])
    doc = {
        "about": "Half-precision bounds of tests/ort/check_dtype.js (and check_vlm.js, the transformers.js "
                 "checker), per architectures[0] class and target: relative to max(1, max|logit|) of a fixture, "
                 "%g x the largest error measured over the family's fixtures against the numpy reference over "
                 "the float16-rounded checkpoint (vision-language classes: against HF); "
                 "scripts/measure_f16_bounds.py." % HEADROOM,
        "bounds": dict(sorted(bounds.items())),
        "measured": measured,
    }
    with open(args.out, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    for m in measured:
        if m.get("excluded"):
            print(f"excluded: {m['case']} {m['target']}: {m['relative_error']:.3e} (no bound taken from it)")
            continue
        tol = bounds[m["class"]][m["target"]]
        if 2 * tol >= m["first_gap"]:
            print(f"first token only: {m['case']} {m['target']}: twice the bound {tol:.2e} reaches the expected "
                  f"first-step gap {m['first_gap']:.3e} (the check requires the first token and no later one)")
        if "weight_floor" in m and m["weight_floor"] >= m["hf_first_gap"] / 2:
            print(f"weights alone: {m['case']} {m['target']}: float16 weights move the logits by "
                  f"{m['weight_floor']:.3e}, HF's first-step gap is {m['hf_first_gap']:.3e}")
    for f in failed:
        print("could not measure " + f)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
