#!/usr/bin/python3
"""Measures what the quantized tests check, per scheme, over one fixture of
every family, and writes tests/quant/quant_bounds.json, the agreement with
Hugging Face's float logits each class must keep at each scheme
(docs/testing.md, "Quantized models").

  measure_quant_bounds.py ARCHC [--shared ../shared] [--work DIR] [--out FILE]
                          [--schemes int4,int8] [--cases CASE ...] [--merge]

For each scheme and fixture, tests/quant/run_quant_case.py runs with the
scheme's options (those tests/CMakeLists.txt gives the quant.<scheme>.<case>
test) and --hf, and the script collects: the relative L2 error of every
quantized matrix read back from the ONNX file against the checkpoint (min,
median, max), and the agreement of the quantized model's prefill logits with
Hugging Face's float ones (median per-position correlation, top-1 agreement
over the prefill positions). A class's bound at a scheme: correlation at
least 1 - HEADROOM x (1 - measured), top-1 agreement at least the measured
count less one position. The quantization itself is pinned per matrix
(round-to-nearest's error, run_quant_case.py); these bounds catch a graph
that uses the weights worse than it did when measured. The figures print as
a table with, per scheme, the extremes.
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
HEADROOM = 2.0


def scheme_opts(scheme, case):
    """tests/CMakeLists.txt's options of quant.<scheme>.<case>: the Qwen3.5 and
    Jamba fixtures are checked at int8 asymmetric, block 16 (docs/decisions.md)."""
    if scheme == "int8" and re.match(r"^(qwen3_5|jamba)", case):
        return "--quant=int8 --quant-asymmetric --quant-block=16"
    return SCHEMES[scheme]


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
    ap.add_argument("--merge", action="store_true",
                    help="keep --out's other classes and measurements; replace those of --cases")
    ap.add_argument("--out", default=os.path.join(ROOT, "tests", "quant", "quant_bounds.json"))
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
                   "--opts=" + scheme_opts(scheme, case), "--l2", "0,10", "--hf"]
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
            rtn = re.search(r"all weights ([0-9.]+) .*worst matrix ([0-9.]+)", r.stdout)
            with open(os.path.join(a.shared, "hf-golden", case, "config.json")) as f:
                cls = (json.load(f).get("architectures") or [""])[0]
            row = dict(scheme=scheme, case=case, cls=cls, opts=scheme_opts(scheme, case),
                       l2_min=float(m.group(1)), l2_median=float(m.group(2)), l2_max=float(m.group(3)),
                       corr=h["median_corr"], top1=h["top1"], counted=h["counted"],
                       rtn_total=float(rtn.group(1)) if rtn else None,
                       rtn_worst_matrix=float(rtn.group(2)) if rtn else None,
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
              f"{min(r['top1'] for r in s):.3f}; error / round-to-nearest's: all weights max "
              f"{max(r['rtn_total'] or 0 for r in s):.4f}, one matrix max "
              f"{max(r['rtn_worst_matrix'] or 0 for r in s):.4f}")
    if a.merge and os.path.exists(a.out):
        with open(a.out) as f:
            old = json.load(f)
        new = {(r["scheme"], r["case"]): r for r in rows}
        kept = [new.pop((r["scheme"], r["case"]), r) for r in old["measured"]]
        rows = kept + list(new.values())
    bounds = {}
    for r in rows:
        bounds.setdefault(r["cls"], {})[r["scheme"]] = {
            "min_corr": round(max(0.0, 1 - HEADROOM * (1 - r["corr"])), 5),
            "min_top1": round(max(0.0, (round(r["top1"] * r["counted"]) - 1) / r["counted"]), 4)}
    doc = {"about": "Agreement with Hugging Face's float logits of the quantized models of tests/quant "
                    "(run_quant_case.py --bounds), per architectures[0] class and scheme: the median per-position "
                    "correlation of the prefill logits at least 1 - %g x (1 - measured), the fraction of prefill "
                    "positions whose top-1 token is HF's at least the measured count less one position; "
                    "scripts/measure_quant_bounds.py." % HEADROOM,
           "bounds": dict(sorted(bounds.items())),
           "measured": rows}
    if os.path.exists(a.out):
        # The encoder / encoder-decoder bounds (tests/quant/run_quant_encdec_case.py --record) are kept.
        with open(a.out) as f:
            encdec = json.load(f).get("encdec")
        if encdec:
            doc["encdec"] = encdec
    with open(a.out, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
