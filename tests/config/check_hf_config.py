#!/usr/bin/python3
"""Compares a family's config binding with its Hugging Face config class.

  check_hf_config.py ARCHC MODEL_TYPE [--arch FILE.arch] [--hf DIR]

tests/config/hf/<model_type>.json records the class (transformers 5): its
fields, their defaults (literal, or `derived` from other fields as Python
expressions), and which fields PreTrainedConfig contributes
(tests/config/hf/_pretrained.json). Two runs of `archc -emit=config
--format=json` on configs that name only the model type and class:

1. defaults: with no other key, every field archc honours must bind to the
   class's default (a derived default evaluated on the class's defaults);
2. coverage: with every field of the class present (at its default), archc
   must account for each one, as honoured (a field of that name) or inert;
   a key it neither reads nor declares inert is an error there.

A class whose own defaults do not build a model (a field defaulting to None
that its modelling code divides by) records `defaults_run`: {"set": {...},
"why": ...}. archc must then refuse the bare defaults, naming one of those
fields, and run 1 sets them.

Exit 0 when both hold, 1 with the differences listed.
"""
import argparse
import json
import math
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))

# Keys archc reads that a transformers-5 class has no field for: the
# transformers-4 spellings its rope standardisation still accepts.
LEGACY_KEYS = {"rope_scaling", "rope_theta", "partial_rotary_factor"}


def infinities(v):
    """JSON has no infinity: the tables write "inf" / "-inf", -emit=config
    "Infinity" / "-Infinity"."""
    if v in ("inf", "Infinity"):
        return math.inf
    if v in ("-inf", "-Infinity"):
        return -math.inf
    if isinstance(v, list):
        return [infinities(x) for x in v]
    if isinstance(v, dict):
        return {k: infinities(x) for k, x in v.items()}
    return v


def load_class(hf_dir, model_type):
    path = os.path.join(hf_dir, model_type + ".json")
    with open(path) as f:
        c = json.load(f)
    for spec in c["fields"].values():
        if "default" in spec:
            spec["default"] = infinities(spec["default"])
    return c


def run_archc(archc, arch, config, extra=()):
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "config.json")
        with open(path, "w") as f:
            json.dump(config, f)
        cmd = [archc] + ([arch] if arch else []) + [
            "--config", path, "-emit=config", "--format=json", *extra]
        r = subprocess.run(cmd, capture_output=True, text=True)
        return r.returncode, r.stdout, r.stderr


def same(a, b):
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b or a == b and type(a) == type(b)
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b or (math.isfinite(a) and math.isfinite(b) and
                          abs(a - b) <= 1e-12 * max(abs(a), abs(b)))
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    return a == b


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("archc")
    ap.add_argument("model_type")
    ap.add_argument("--arch", help="the .arch file (default: the bundled "
                    "family matching the class)")
    ap.add_argument("--hf", default=os.path.join(HERE, "hf"))
    args = ap.parse_args()

    cls = load_class(args.hf, args.model_type)
    fields = cls["fields"]
    base = {"model_type": args.model_type,
            "architectures": [cls["architectures"][0]]}
    problems = []

    # 1. Defaults (a class whose defaults do not build a model: refused by
    # name, then with the keys it needs).
    unrunnable = cls.get("defaults_run", {}).get("set", {})
    if unrunnable:
        rc, out, err = run_archc(args.archc, args.arch, base)
        if rc == 0 or not any(k in err for k in unrunnable):
            problems.append(f"the class's own defaults do not build a model "
                            f"({cls['defaults_run']['why']}), but archc does "
                            f"not refuse them naming {sorted(unrunnable)}")
        base = dict(base, **unrunnable)
    rc, out, err = run_archc(args.archc, args.arch, base)
    if rc != 0:
        print(f"FAIL {args.model_type}: archc refuses the class's own "
              f"defaults:\n{err}")
        return 1
    bound = {}
    for f in json.loads(out)["fields"]:
        if f["source"] != "inert" and f["arch"] == json.loads(out)["arch"]:
            bound[f["name"]] = f
    defaults = {n: unrunnable.get(n, spec.get("default"))
                for n, spec in fields.items()}
    values = dict(defaults)
    for n, spec in fields.items():
        if "derived" in spec and spec.get("default") is None:
            try:
                values[n] = eval(spec["derived"], {"math": math},
                                 dict(defaults))
            except Exception as e:  # a note, not an expression
                values[n] = ("?", str(e))
    checked = 0
    for n, spec in fields.items():
        if n not in bound:
            continue
        want = values[n]
        if isinstance(want, tuple):
            continue
        got = infinities(bound[n]["value"])
        checked += 1
        if not same(got, want):
            problems.append(f"default of '{n}': archc {json.dumps(got)} "
                            f"({bound[n]['source']}), transformers "
                            f"{json.dumps(want)}")

    # 2. Coverage: every field present at its default.
    full = dict(base)
    for n, spec in fields.items():
        full[n] = unrunnable.get(n, spec.get("default"))
    rc, out, err = run_archc(args.archc, args.arch, full,
                             ["--allow-unknown-config"])
    if rc != 0:
        problems.append("archc refuses the class's fields at their "
                        "defaults:\n" + err)
    else:
        # A key no field (under its name or an alias) reads and no inert
        # declaration names is what archc warns about.
        for line in err.splitlines():
            if "is not a field of" in line:
                problems.append(line.split("warning: ", 1)[-1])

    status = "ok  " if not problems else "FAIL"
    print(f"{status} {args.model_type} ({cls['config_class']}): "
          f"{checked} defaults compared, {len(fields)} fields accounted")
    for p in problems:
        print("  " + p)
    return 0 if not problems else 1


if __name__ == "__main__":
    sys.exit(main())
