#!/usr/bin/python3
"""Checks that every shared fixture has the tests that apply to it.

  check_coverage.py --ctest CTEST --build BUILD_DIR --shared SHARED [--list]

The registered tests (`ctest -N` in BUILD_DIR) must hold, for every case of
SHARED/hf-golden: ort.<case>, ort.target-ort.<case>, f16.<case>,
ref.selfcheck.<case>, tjs.<case>, and for one case of each family (the
architectures[0] class) quant.int4.*, quant.int8.* and f16-ort.*; for every
case of SHARED/hf-golden-vlm: vlm.<case>, vlm-f16.<case>,
ref.selfcheck.vlm.<case>, tjs.vlm.<case>; for every case of SHARED/hf-golden-encdec:
encdec.<case>, encdec-f16.<case>, ref.selfcheck.encdec.<case>,
tjs.encdec.<case>; for every case of SHARED/prequant: prequant.<case>.
tests/exclusions.txt may exclude a kind for a case
("KIND CASE reason") or a whole folder ("folder NAME reason"); any other
fixture folder of SHARED is an error until it has tests or an exclusion.
--list prints every fixture with the tests it has. Exit 0 when complete, 1
with the uncovered fixtures listed.
"""
import argparse
import glob
import json
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

PER_CASE = {
    "hf-golden": ["ort.{}", "ort.target-ort.{}", "f16.{}", "ref.selfcheck.{}",
                  "tjs.{}"],
    "hf-golden-vlm": ["vlm.{}", "vlm-f16.{}", "ref.selfcheck.vlm.{}",
                      "tjs.vlm.{}"],
    "hf-golden-encdec": ["encdec.{}", "encdec-f16.{}", "ref.selfcheck.encdec.{}",
                         "tjs.encdec.{}"],
    "prequant": ["prequant.{}"],
}
PER_FAMILY = {"hf-golden": ["quant.int4.{}", "quant.int8.{}", "f16-ort.{}"]}


def exclusions():
    cases, folders = {}, {}
    with open(os.path.join(HERE, "exclusions.txt")) as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            kind, name, reason = (line.split(None, 2) + ["", ""])[:3]
            if kind == "folder":
                folders[name] = reason
            else:
                cases[(kind, name)] = reason
    return cases, folders


def registered(ctest, build):
    out = subprocess.run([ctest, "-N"], cwd=build, capture_output=True,
                         text=True, check=True).stdout
    return set(re.findall(r"Test\s+#\d+: (\S+)", out))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ctest", default="ctest")
    ap.add_argument("--build", required=True)
    ap.add_argument("--shared", required=True)
    ap.add_argument("--list", action="store_true")
    a = ap.parse_args()
    tests = registered(a.ctest, a.build)
    excluded, excluded_folders = exclusions()
    problems = []
    n_cases = 0
    for folder in sorted(os.listdir(a.shared)):
        path = os.path.join(a.shared, folder)
        cases = sorted(os.path.basename(os.path.dirname(p)) for p in
                       glob.glob(os.path.join(path, "*", "config.json")))
        if not cases:
            continue  # docs, notes, configs: no fixture cases
        if folder in excluded_folders:
            if a.list:
                print(f"{folder}: {len(cases)} cases excluded: "
                      f"{excluded_folders[folder]}")
            continue
        if folder not in PER_CASE:
            problems.append(f"{folder}: {len(cases)} fixture cases and no "
                            "test kind for them (add tests, or a 'folder' "
                            "line to tests/exclusions.txt with the reason)")
            continue
        families = {}
        for case in cases:
            n_cases += 1
            with open(os.path.join(path, case, "config.json")) as f:
                cls = (json.load(f).get("architectures") or [""])[0]
            families.setdefault(cls, []).append(case)
            have = [k.format(case) for k in PER_CASE[folder]
                    if k.format(case) in tests]
            for k in PER_CASE[folder]:
                kind = k.split(".{}")[0]
                if k.format(case) not in tests and (kind, case) not in excluded:
                    problems.append(f"{folder}/{case}: no {k.format(case)}")
            if a.list:
                print(f"{folder}/{case} ({cls}): {', '.join(have)}")
        for cls, members in sorted(families.items()):
            for k in PER_FAMILY.get(folder, []):
                if not any(k.format(c) in tests for c in members):
                    problems.append(f"{folder}: family {cls} has no "
                                    f"{k.format('<case>')} test")
    for p in problems:
        print("FAIL " + p)
    if not problems:
        print(f"coverage: every one of {n_cases} fixture cases has its tests")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
