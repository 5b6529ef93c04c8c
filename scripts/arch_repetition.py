#!/usr/bin/python3
"""How much of the family files' code is repeated verbatim across families.

Definition (docs/decisions.md, "Measuring repetition across families"):

- The family files are archs/*.arch (not archs/std/, the shared library).
- A file's *body lines* are its lines outside `config { ... }` blocks, with
  comments removed (`// ...` to the end of the line and `/* ... */`, outside
  string literals) and surrounding whitespace trimmed, that hold a letter or a
  digit (empty lines and lines of brackets alone, `}` or `})`, are not body
  lines: they carry no content, and counting them would measure brace
  style).
- A body line is *repeated* when the same trimmed text is a body line of
  another family file (one occurrence elsewhere is enough; repeats inside one
  file do not count).
- The figure is repeated body lines / body lines, over all family files.

Usage: arch_repetition.py [--archs DIR] [--max PERCENT] [--verbose]
Prints the figure and a per-file table; with --max, exits 1 when the figure
is above PERCENT.
"""
import argparse
import collections
import glob
import os
import re
import sys


def strip_comments(text):
    """Removes // and /* */ comments outside string literals."""
    out = []
    i, n = 0, len(text)
    in_string = False
    while i < n:
        c = text[i]
        if in_string:
            out.append(c)
            if c == "\\" and i + 1 < n:
                out.append(text[i + 1])
                i += 2
                continue
            if c == '"':
                in_string = False
            i += 1
        elif c == '"':
            in_string = True
            out.append(c)
            i += 1
        elif text.startswith("//", i):
            while i < n and text[i] != "\n":
                i += 1
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end < 0 else end + 2
            out.append("\n" * text.count("\n", i, end))  # keep line numbers
            i = end
        else:
            out.append(c)
            i += 1
    return "".join(out)


def body_lines(path):
    """The trimmed, non-empty lines of a file outside `config { }` blocks."""
    with open(path, encoding="utf-8") as f:
        lines = strip_comments(f.read()).split("\n")
    result = []
    depth = 0  # brace depth inside a config block (0: outside)
    for raw in lines:
        line = raw.strip()
        if depth == 0 and (line == "config {" or line.startswith("config {")):
            depth = line.count("{") - line.count("}")
            continue
        if depth > 0:
            depth += line.count("{") - line.count("}")
            continue
        if re.search(r"[A-Za-z0-9]", line):
            result.append(line)
    return result


def measure(archs_dir):
    files = sorted(glob.glob(os.path.join(archs_dir, "*.arch")))
    bodies = {f: body_lines(f) for f in files}
    owners = collections.defaultdict(set)
    for f, lines in bodies.items():
        for line in lines:
            owners[line].add(f)
    rows = []
    for f, lines in bodies.items():
        repeated = [l for l in lines if len(owners[l]) > 1]
        rows.append((os.path.basename(f), len(lines), len(repeated), repeated))
    return rows


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--archs", default=os.path.join(here, "..", "archs"))
    ap.add_argument("--max", type=float, help="fail above this percentage")
    ap.add_argument("--verbose", action="store_true",
                    help="list the repeated lines of each file")
    args = ap.parse_args()
    rows = measure(args.archs)
    if not rows:
        print(f"no .arch files in {args.archs}", file=sys.stderr)
        return 1
    total = sum(r[1] for r in rows)
    repeated = sum(r[2] for r in rows)
    pct = 100.0 * repeated / total if total else 0.0
    print(f"{'file':24} {'body':>5} {'repeated':>9}")
    for name, n, r, lines in rows:
        print(f"{name:24} {n:5} {r:9}")
        if args.verbose:
            for l in lines:
                print(f"    {l}")
    print(f"repetition: {repeated} of {total} body lines ({pct:.1f}%)"
          f" in {len(rows)} family files")
    if args.max is not None and pct > args.max:
        print(f"error: repetition {pct:.1f}% is above {args.max:g}%",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
