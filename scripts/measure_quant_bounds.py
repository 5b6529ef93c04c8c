#!/usr/bin/python3
"""Measures what the quantized tests check, per scheme, over one fixture of
every family, and prints the figures tests/CMakeLists.txt's thresholds rest
on (docs/testing.md, "Quantized models").

  measure_quant_bounds.py ARCHC [--shared ../shared] [--work DIR]
                          [--schemes int4,int8] [--cases CASE ...]

For each scheme and fixture, tests/quant/run_quant_case.py runs with the
scheme's options and --hf, and the script collects: the relative L2 error of
every quantized matrix read back from the ONNX file against the checkpoint
(min, median, max), and the agreement of the quantized model's prefill
logits with Hugging Face's float ones (median per-position correlation,
top-1 agreement). It prints a table and, per scheme, the extremes; the
thresholds are set from them with the margins docs/testing.md states.
"""
import argparse
import glob
import json
import os
import re
import subprocess
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(__file__), ".."))
SCHEMES = {
    "int4": "--quant=int4",
    "int8": "--quant=int8",
}


def representatives(shared):
    """One fixture per architectures[0] class: the -base case when there is
    one, else the first (tests/Fixtures.cmake's rule)."""
    by_class = {}
    for cfg in sorted(glob.glob(os.path.join(shared, "hf-golden", "*",
                                             "config.json"))):
        case = os.path.basename(os.path.dirname(cfg))
        with open(cfg) as f:
            cls = (json.load(f).get("architectures") or [""])[0]
        by_class.setdefault(cls, []).append(case)
    picked = []
    for cls, cases in by_class.items():
        base = [c for c in cases if c.endswith("-base")]
        picked.append(base[0] if base else cases[0])
    return sorted(picked)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("archc")
    ap.add_argument("--shared", default=os.path.join(ROOT, "..", "shared"))
    ap.add_argument("--work", default="/tmp/archc-quant-bounds")
    ap.add_argument("--schemes", default="int4,int8")
    ap.add_argument("--cases", nargs="*")
    a = ap.parse_args()
    cases = a.cases or representatives(a.shared)
    rows = []
    for scheme in a.schemes.split(","):
        for case in cases:
            work = os.path.join(a.work, scheme, case)
            cmd = ["/usr/bin/python3", os.path.join(ROOT, "tests", "quant",
                                                    "run_quant_case.py"),
                   "--archc", a.archc, "--arch", "auto", "--family", "auto",
                   "--node", "node", "--case",
                   os.path.join(a.shared, "hf-golden", case), "--work", work,
                   "--opts=" + SCHEMES[scheme], "--l2", "0,10", "--hf"]
            r = subprocess.run(cmd, capture_output=True, text=True)
            m = re.search(r"relative L2 error min ([0-9.]+) median ([0-9.]+) "
                          r"max ([0-9.]+)", r.stdout)
            agree = os.path.join(work, "hf_agreement.json")
            if not m or not os.path.exists(agree):
                print(f"{scheme} {case}: could not measure "
                      f"(exit {r.returncode})\n{r.stdout[-600:]}")
                continue
            with open(agree) as f:
                h = json.load(f)
            row = dict(scheme=scheme, case=case, l2_min=float(m.group(1)),
                       l2_median=float(m.group(2)), l2_max=float(m.group(3)),
                       corr=h["median_corr"], top1=h["top1"],
                       passed=r.returncode == 0)
            rows.append(row)
            print(f"{scheme} {case:32s} L2 {row['l2_min']:.4f} "
                  f"{row['l2_median']:.4f} {row['l2_max']:.4f}  corr "
                  f"{row['corr']:.5f}  top-1 {row['top1']:.3f}"
                  f"{'' if row['passed'] else '  (reference checks failed)'}")
    for scheme in a.schemes.split(","):
        s = [r for r in rows if r["scheme"] == scheme]
        if not s:
            continue
        print(f"{scheme}: {len(s)} fixtures; L2 min {min(r['l2_min'] for r in s):.4f} "
              f"max {max(r['l2_max'] for r in s):.4f}; correlation min "
              f"{min(r['corr'] for r in s):.5f}; top-1 min "
              f"{min(r['top1'] for r in s):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
