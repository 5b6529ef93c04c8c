#!/usr/bin/python3
"""Generates docs/families.md: for every bundled family, the config fields it
honours (with defaults and the test cases that set them), the keys it knows
to be inert, and the values it refuses.

  gen_families_doc.py ARCHC [--out docs/families.md] [--check]
                      [--fixtures DIR ...] [--uncovered]

The tables come from `archc ARCH.arch -emit=config --format=json` (the
family's schema) and from the test cases: the Hugging Face fixtures
(../shared/hf-golden*, each a config.json computed by transformers) and the
numpy-reference variants (tests/reference/cases, tests/reference/vlm/cases,
tests/reference/encdec/cases).
A case covers a field when its config sets the field (or an alias of it) to
a value other than the field's default in the family's Hugging Face class
(tests/config/hf/<model_type>.json), or, for fields that class does not
know, to any value. With --check the output is compared with the file
(exit 1 on a difference); --uncovered lists honoured fields no case covers.
"""
import argparse
import glob
import json
import os
import subprocess
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(__file__), ".."))
SHARED = os.path.normpath(os.path.join(ROOT, "..", "shared"))


def run_json(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{r.stderr}")
    return json.loads(r.stdout)


def bundled(archc):
    out = subprocess.run([archc, "--list-archs"], capture_output=True,
                         text=True, check=True).stdout.splitlines()
    files = []
    for line in out[1:]:
        parts = line.split()
        if len(parts) >= 2 and parts[1].endswith(".arch"):
            if parts[1] not in files:
                files.append(parts[1])
    return files


def header_comment(path):
    """The leading // comment of an .arch file, as one paragraph."""
    lines = []
    with open(path) as f:
        for line in f:
            if not line.startswith("//"):
                break
            lines.append(line[2:].strip())
    text = " ".join(l for l in lines if l)
    return text


def cases(fixture_dirs):
    """(name, config dict, where) of every test case with a config."""
    found = []
    for d in fixture_dirs:
        for cfg in sorted(glob.glob(os.path.join(d, "*", "config.json"))):
            name = os.path.basename(os.path.dirname(cfg))
            found.append((name, cfg, "fixture " + os.path.basename(d)))
    # Reference variants, and the configs lit/config/refusals.test shows
    # refused (a field whose every other value is refused is covered by
    # its refusal).
    for d, kind in (("tests/reference/cases", "reference"), ("tests/reference/vlm/cases", "reference"),
                    ("tests/reference/encdec/cases", "reference"),
                    ("lit/config/Inputs/refusals", "refusal")):
        for cfg in sorted(glob.glob(os.path.join(ROOT, d, "*.json"))):
            name = os.path.splitext(os.path.basename(cfg))[0]
            found.append((name, cfg, kind))
    # Configs a lit test proves equivalent to a covered one (the Llama 4
    # and Qwen3.5 *ForConditionalGeneration composites: the IR of their
    # flattened text_config).
    for rel in ("lit/weights/Inputs/llama4-multimodal-tiny.json",
                "lit/config/Inputs/qwen3_5-composite-tiny.json",
                "lit/config/Inputs/qwen3_5_moe-composite-tiny.json"):
        found.append((os.path.splitext(os.path.basename(rel))[0], os.path.join(ROOT, rel), "lit"))
    out = []
    for name, path, kind in found:
        with open(path) as f:
            try:
                c = json.load(f)
            except json.JSONDecodeError:
                continue
        if isinstance(c, dict) and "config" in c and "architectures" not in c:
            c = c["config"]  # a reference case file wrapping its config
        if isinstance(c, dict):
            out.append((name, c, kind))
    return out


def lookup(cfg, path):
    """The value at a dotted key path in text_config then the top level."""
    for root in (cfg.get("text_config"), cfg):
        cur = root
        for key in path.split("."):
            if not isinstance(cur, dict) or key not in cur:
                cur = None
                break
            cur = cur[key]
        if cur is not None:
            return True, cur
    return False, None


def hf_defaults(model_types):
    d = {}
    for t in model_types:
        p = os.path.join(ROOT, "tests", "config", "hf", t + ".json")
        if os.path.exists(p):
            with open(p) as f:
                for n, spec in json.load(f)["fields"].items():
                    d.setdefault(n, spec.get("default"))
    return d


def family_cases(schema, all_cases):
    classes = set(schema["matches"])
    types = set(schema["model_types"])
    mine = []
    for name, cfg, kind in all_cases:
        archs = cfg.get("architectures") or []
        mt = cfg.get("model_type")
        if (archs and archs[0] in classes) or (not archs and mt in types):
            mine.append((name, cfg, kind))
    return mine


# The spellings of the RoPE parameters (std/rope.arch), and the keys whose
# code transformers and archc share between families.
ROPE_KEYS = {"rope_parameters", "rope_scaling", "rope_theta",
             "partial_rotary_factor"}
SHARED_KEYS = {"hidden_act", "hidden_activation", "activation_function",
               "mlp_hidden_act", "tie_word_embeddings"}


def setting(cases, paths, name, hf):
    """The cases whose config sets one of `paths` to a value other than the
    class default of `name`."""
    out = []
    for case, cfg, kind in cases:
        for p in paths:
            present, value = lookup(cfg, p)
            if present and not (name in hf and value == hf[name]):
                out.append(case)
                break
    return out


def md_escape(s):
    return str(s).replace("|", "\\|")


def render(archc, fixture_dirs):
    all_cases = cases(fixture_dirs)
    families = []
    for arch_file in bundled(archc):
        schema = run_json([archc, os.path.join(ROOT, "archs", arch_file),
                           "-emit=config", "--format=json"])
        schema["comment"] = header_comment(
            os.path.join(ROOT, "archs", arch_file))
        families.append(schema)
    totals = {"honoured": 0, "inert": 0, "refused": 0}
    common = {}
    body = []
    summary = []
    uncovered_all = {}
    for s in families:
        hf = hf_defaults(s["model_types"])
        mine = family_cases(s, all_cases)
        rows = []
        uncovered = []
        for f in s["fields"]:
            # A root-anchored alias ("/key") names a top-level key.
            paths = [f["name"]] + [a.lstrip("/") for a in f["aliases"]]
            hf_name = next((p for p in paths if p in hf), f["name"])
            covering = setting(mine, paths, hf_name, hf)
            if not covering and f["name"] in ROPE_KEYS:
                # The RoPE parameters come as one dict under any spelling.
                covering = setting(mine, sorted(ROPE_KEYS), None, hf)
            if not covering and set(paths) & SHARED_KEYS:
                # Code every family shares (the activations, tying): a case
                # of any family exercises it.
                covering = [f"{n} (shared)" for n in
                            setting(all_cases, paths, hf_name, hf)][:1]
            dflt = hf.get(hf_name)
            if not covering and isinstance(dflt, (int, float)) and \
                    not isinstance(dflt, bool):
                # A number: every case runs the same code with its default.
                covering = ["every case (default)"]
            if not covering:
                uncovered.append(f["name"])
            shown = covering[:3] + ([f"+{len(covering) - 3}"]
                                    if len(covering) > 3 else [])
            default = "*required*" if f["default"] is None else \
                "`" + md_escape(f["default"]) + "`"
            rows.append(f"| `{f['name']}` | {md_escape(f['type'])} | "
                        f"{default} | {f['declared_by']} | "
                        f"{', '.join(shown) if shown else '—'} |")
        inert = sorted(set(s["inert"]))
        if "pretrained" in s["uses"]:
            common.setdefault("pretrained", sorted(set(s["uses"]["pretrained"])))
        refused = [r["message"] for r in s["refused"]]
        totals["honoured"] += len(s["fields"])
        totals["inert"] += len(inert)
        totals["refused"] += len(refused)
        uncovered_all[s["arch"]] = uncovered
        summary.append(f"| [`{s['arch']}`](#{s['arch']}) | "
                       f"{', '.join(s['model_types']) or '—'} | "
                       f"{len(s['fields'])} | {len(inert)} | {len(refused)} | "
                       f"{len(mine)} | {len(uncovered)} |")
        body.append(f"### {s['arch']}\n")
        body.append(f"`archs/{s['file']}`"
                    + (f", extends `{s['extends']}`" if s["extends"] else "")
                    + f"; model types {', '.join('`%s`' % t for t in s['model_types']) or '(any)'}"
                    + f"; classes {', '.join('`%s`' % c for c in s['matches'])}"
                    + f"; {len(mine)} test cases.\n")
        if s["comment"]:
            body.append(s["comment"] + "\n")
        body.append("| honoured field | type | default | declared by | "
                    "cases setting it |")
        body.append("|---|---|---|---|---|")
        body.extend(rows)
        body.append("")
        body.append("**Inert:** " + (", ".join(f"`{n}`" for n in inert)
                                      or "—") +
                    (" (and the keys of " +
                     ", ".join(f"`{u}`" for u in s["uses"]) + ")"
                     if s["uses"] else "") + "\n")
        body.append("**Refused values:**\n")
        for m in refused:
            body.append(f"- {m}")
        body.append("")
    head = [
        "# Families: what each honours, ignores and refuses",
        "",
        "Generated by `scripts/gen_families_doc.py build/bin/archc` from "
        "`archc ARCH.arch -emit=config --format=json` and the test cases; "
        "`lit/docs/families.test` fails when this file is out of date. "
        "Binding is closed-world (docs/language.md, \"Config schema\"): a "
        "config.json key is *honoured* by a field (with the Hugging Face "
        "class's default, checked by `lit/config/defaults/*.test`), "
        "*inert* (it changes neither the graph nor the checkpoint layout), "
        "or refused by name; a value the family does not implement is "
        "*refused* by a check. A case covers a field when its config sets "
        "it to a value other than the class's default (the Hugging Face "
        "fixtures, `../shared/hf-golden*`, the numpy-reference variants, "
        "`tests/reference/cases`, `tests/reference/encdec/cases`, the configs `lit/config/refusals.test` "
        "shows refused, and the Llama 4 and Qwen3.5 composites "
        "`lit/weights/llama4-multimodal.test` and `lit/config/"
        "qwen3_5_composite.test` prove equal to their text models); a RoPE "
        "key when the case sets the RoPE "
        "parameters under any spelling; an activation or the tying flag "
        "when a case of any family does (shared code); a number with a "
        "numeric default is exercised by every case.",
        "",
        f"In all: **{totals['honoured']} honoured fields, {totals['inert']} "
        f"inert keys, {totals['refused']} refused values** over "
        f"{len(families)} families (inherited ones counted per family), "
        "and the keys every family accepts as inert: " +
        "; ".join(f"`{u}` ({len(k)}: " + ", ".join(f"`{n}`" for n in k) + ")"
                  for u, k in sorted(common.items())) + ".",
        "",
        "| family | model types | honoured | inert | refused | cases | "
        "honoured fields no case sets |",
        "|---|---|---|---|---|---|---|",
    ] + summary + ["", "## Per family", ""]
    return "\n".join(head + body) + "\n", uncovered_all


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("archc")
    ap.add_argument("--out", default=os.path.join(ROOT, "docs", "families.md"))
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--uncovered", action="store_true")
    ap.add_argument("--fixtures", nargs="*", default=[
        os.path.join(SHARED, "hf-golden"),
        os.path.join(SHARED, "hf-golden-vlm"),
        os.path.join(SHARED, "hf-golden-encdec")])
    args = ap.parse_args()
    text, uncovered = render(args.archc, args.fixtures)
    if args.uncovered:
        for fam, names in uncovered.items():
            if names:
                print(f"{fam}: {', '.join(names)}")
        return 0
    if args.check:
        with open(args.out) as f:
            if f.read() != text:
                print(f"{args.out} is out of date: run "
                      "scripts/gen_families_doc.py build/bin/archc")
                return 1
        print(f"{args.out}: up to date")
        return 0
    with open(args.out, "w") as f:
        f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
