#!/usr/bin/python3
"""Writes lit/config/defaults/<model_type>.test for every Hugging Face config
class in tests/config/hf/ that a bundled family claims (a causal-LM,
vision-language, encoder or encoder-decoder class, not a vision
sub-config): each runs
tests/config/check_hf_config.py on the class. With --check, exits 1 when a
class has no test or a test no class (lit/config/defaults_listed.test).

  gen_defaults_tests.py [--check]
"""
import glob
import json
import os
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(__file__), ".."))
OUT = os.path.join(ROOT, "lit", "config", "defaults")
TEMPLATE = """\
# {cls} (transformers, {source}): the family binds every field of the
# class to the class's default and accounts for each one (honoured or
# inert); tests/config/check_hf_config.py, tests/config/hf/{mt}.json.
# RUN: %python %S/../../../tests/config/check_hf_config.py %archc {mt} | FileCheck %s
# CHECK: ok   {mt} ({cls})
"""


def classes():
    out = {}
    for path in sorted(glob.glob(os.path.join(ROOT, "tests", "config", "hf",
                                              "*.json"))):
        with open(path) as f:
            c = json.load(f)
        mt = c.get("model_type")
        archs = c.get("architectures") or []
        if not mt or not archs or os.path.basename(path).startswith("_"):
            continue
        if not any(a.endswith(("ForCausalLM", "ForConditionalGeneration",
                               "LMHeadModel", "ForMaskedLM", "MTModel"))
                   for a in archs):
            continue
        src = c.get("source", {})
        commit = src.get("config_commit") or src.get("snapshot_commit") or ""
        out[mt] = TEMPLATE.format(
            cls=c["config_class"], mt=mt,
            source=src.get("config_path", "").split("/")[-1] +
            (" at " + commit[:12] if commit else ""))
    return out


def main():
    want = classes()
    have = {os.path.splitext(os.path.basename(p))[0]: p
            for p in glob.glob(os.path.join(OUT, "*.test"))}
    if "--check" in sys.argv:
        missing = sorted(set(want) - set(have))
        extra = sorted(set(have) - set(want))
        for m in missing:
            print(f"no test for {m}: run scripts/gen_defaults_tests.py")
        for e in extra:
            print(f"test without a class: {e}")
        if not missing and not extra:
            print(f"defaults tests: {len(want)} classes, each tested")
        return 1 if missing or extra else 0
    os.makedirs(OUT, exist_ok=True)
    for mt, text in want.items():
        with open(os.path.join(OUT, mt + ".test"), "w") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
