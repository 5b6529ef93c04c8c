#!/usr/bin/python3
"""Which numpy-reference variants rest only on options a Hugging Face fixture
confirms.

  check_confirmed.py [--shared DIR] [--unconfirmed] [--case NAME]

A variant (tests/reference/cases/*.json) is a config the reference computes
and archc must reproduce. The reference was checked against transformers on
the fixtures only (ref.selfcheck.*), so a variant pins Hugging Face's
behaviour only where a fixture of the same class exercises the same options.
An option is a key (a dotted path inside a dict) whose value differs from
the class's default (tests/config/hf/<model_type>.json), inert keys
(std/pretrained.arch's: token ids and the like) aside. A fixture confirms it
when it sets the key to the same value (strings, booleans, null), or to any
value (lists, and numbers whose default is none: they switch a feature on).
A number where the class has a number by default needs no fixture: every
fixture runs the same code with the default.
Fixtures of the same class confirm a family's options; fixtures of any class
confirm the options whose code transformers shares between families (the
RoPE parameters of modeling_rope_utils, activation names of ACT2FN, tied
embeddings), which the reference implements once too.

Prints one line per variant: `confirmed NAME` or `unconfirmed NAME: option,
...`. --unconfirmed prints only the names of the unconfirmed ones (CMake
labels their tests), --case one variant.
"""
import argparse
import glob
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))


def defaults(model_type):
    p = os.path.join(ROOT, "tests", "config", "hf", model_type + ".json")
    if not os.path.exists(p):
        return {}
    with open(p) as f:
        return {k: v.get("default") for k, v in json.load(f)["fields"].items()}


def options(cfg, dflt, prefix=""):
    """(path, value) of every key that differs from its default."""
    out = []
    for k, v in cfg.items():
        if k in ("architectures", "model_type", "torch_dtype", "dtype",
                 "transformers_version"):
            continue
        path = prefix + k
        d = dflt.get(k) if isinstance(dflt, dict) else None
        if isinstance(v, dict) and k not in ("id2label", "label2id"):
            out += options(v, d if isinstance(d, dict) else {}, path + ".")
            continue
        if v != d and path not in INERT:
            out.append((path, v))
    return out


# Keys whose code transformers (and the reference) share across families.
SHARED = ("rope_scaling.", "rope_parameters.", "hidden_act", "hidden_activation",
          "activation_function", "mlp_hidden_act", "tie_word_embeddings")
# PreTrainedConfig's inert keys (archs/std/pretrained.arch) a variant may set.
INERT = {"bos_token_id", "eos_token_id", "pad_token_id", "sep_token_id",
         "use_cache", "initializer_range", "attention_dropout",
         "hidden_dropout", "router_aux_loss_coef", "output_router_logits"}


def shared(path):
    return any(path == k or path.startswith(k) for k in SHARED)


def confirms(value, seen):
    if isinstance(value, (str, bool)) or value is None:
        return value in seen
    return True  # a number or list: its presence will do


def load(path):
    with open(path) as f:
        c = json.load(f)
    return c.get("text_config", c) if "text_config" in c and \
        "model_type" not in c.get("text_config", {}) else c


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shared", default=os.path.join(ROOT, "..", "shared"))
    ap.add_argument("--unconfirmed", action="store_true")
    ap.add_argument("--case")
    a = ap.parse_args()
    # What the fixtures of each class set.
    seen = {}
    for cfg_path in glob.glob(os.path.join(a.shared, "hf-golden*", "*",
                                           "config.json")):
        with open(cfg_path) as f:
            cfg = json.load(f)
        cls = (cfg.get("architectures") or [""])[0]
        d = defaults(cfg.get("model_type", ""))
        for path, v in options(cfg, d):
            seen.setdefault(cls, {}).setdefault(path, []).append(v)
            if shared(path):
                seen.setdefault("*", {}).setdefault(path, []).append(v)
    status = 0
    for case_path in sorted(glob.glob(os.path.join(HERE, "cases", "*.json"))):
        name = os.path.splitext(os.path.basename(case_path))[0]
        if a.case and name != a.case:
            continue
        with open(case_path) as f:
            cfg = json.load(f)
        cls = (cfg.get("architectures") or [""])[0]
        d = defaults(cfg.get("model_type", ""))
        def confirmed(p, v):
            top = p.split(".")[0]
            if isinstance(v, (int, float)) and not isinstance(v, bool) and \
                    isinstance(d.get(top), (int, float)) and "." not in p:
                return True
            for where in [cls] + (["*"] if shared(p) else []):
                if p in seen.get(where, {}) and confirms(v, seen[where][p]):
                    return True
            return False
        missing = [f"{p}={json.dumps(v)}" for p, v in options(cfg, d)
                   if not confirmed(p, v)]
        if a.unconfirmed:
            if missing:
                print(name)
        elif missing:
            print(f"unconfirmed {name}: {', '.join(missing)}")
        else:
            print(f"confirmed {name}")
    return status


if __name__ == "__main__":
    sys.exit(main())
