#!/usr/bin/python3
"""Generate a variant test case in the hf-golden format from a HF-style config.json.

  make_case.py <cases/name.json> <out-dir> --family F [--seed N]

Writes <out-dir>/config.json (the case file, verbatim), <out-dir>/model.safetensors (random F32 weights under
the HF checkpoint names) and <out-dir>/expected.safetensors (input_ids [2,7], logits [2,7,V], greedy_ids
[1,13], greedy_logits [1,8,V], metadata as in ../shared/hf-golden/index.md), all computed by hf_reference.py
from the float32-rounded weights.

Inputs are re-drawn (deterministically from the seed) until every greedy step has a top1-top2 margin
>= 0.01, the greedy tokens contain no eos, MoE router choices are clear (k-th vs (k+1)-th probability gap
>= 1e-3 for every token the ORT checker routes) and, if possible, the greedy tokens are not all alike.
The output is a deterministic function of (case file, family, seed).

A case may come with a `<name>.scales` file next to it (JSON {"name substring": factor}): every weight
whose checkpoint name contains a substring is multiplied by its factor, so that a case can reach a
region the default scales never do (a clipped activation's clip, say). The config stays Hugging Face's.
"""
import argparse
import json
import os
import sys

import numpy as np

sys.dont_write_bytecode = True  # keep the source tree clean when run from ctest
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hf_reference as ref  # noqa: E402

S, S0, STEPS = 7, 5, 8
MIN_MARGIN = 0.01
MIN_ROUTER_GAP = 1e-3
ATTEMPTS = 400


def weight_std_or_init(name, shape):
    """('normal', std) or ('norm', None) for a checkpoint tensor, chosen so logits are well spread."""
    last = name.split(".")[-1]
    base = name[: -len(last) - 1]
    if base.endswith(("layernorm", "norm", "ln_1", "ln_2", "ln_f", "q_norm", "k_norm")):
        return ("norm", None) if last == "weight" else ("normal", 0.05)
    if last == "bias":
        return ("normal", 0.1)
    if base.endswith(("embed_tokens", "wte")):
        return ("normal", 0.5 if "embed_tokens" in base else 0.3)
    if base.endswith("wpe"):
        return ("normal", 0.1)
    if base.endswith("lm_head"):
        return ("normal", 2.0 / np.sqrt(shape[1]))
    if base.endswith(".gate"):                              # MoE router [E, D]
        return ("normal", 2.0 / np.sqrt(shape[1]))
    if ".c_attn" in base or ".c_proj" in base or ".c_fc" in base:
        return ("normal", 1.0 / np.sqrt(shape[0]))          # Conv1D [in, out]
    return ("normal", 1.0 / np.sqrt(shape[1]))              # nn.Linear [out, in]


def make_weights(shapes, seed, family):
    rng = np.random.default_rng(seed)
    plugin = ref.PLUGINS.get(family)
    out = {}
    for name in sorted(shapes):
        shape = tuple(shapes[name])
        init = plugin.weight_init(name, shape) if plugin and hasattr(plugin, "weight_init") else None
        kind, std = init or weight_std_or_init(name, shape)
        if kind == "randint":  # integer tables (e.g. DeepSeek-V4's tid2eid), int64
            out[name] = rng.integers(std[0], std[1], size=shape).astype(np.int64)
            continue
        if kind == "norm":
            a = 1.0 + rng.uniform(-0.2, 0.2, size=shape)
        elif kind == "uniform":
            a = rng.uniform(std[0], std[1], size=shape)
        else:
            a = rng.normal(0.0, std, size=shape)
        out[name] = a.astype(np.float32)
    return out


def special_ids(cfg):
    ids = set()
    for k in ("bos_token_id", "eos_token_id", "pad_token_id"):
        v = cfg.get(k)
        if isinstance(v, list):
            ids.update(v)
        elif v is not None:
            ids.add(v)
    return ids


def eos_ids(cfg):
    v = cfg.get("eos_token_id")
    return set(v) if isinstance(v, list) else ({v} if v is not None else set())


def try_inputs(model, cfg, rng):
    V = model.spec.vocab
    allowed = np.array(sorted(set(range(V)) - special_ids(cfg)))
    rows = rng.choice(allowed, size=(2, S), replace=True)
    if np.array_equal(rows[0], rows[1]):
        return None
    model.router_gaps = []
    logits = model.forward(rows)
    toks, step_logits, margins = model.greedy(rows[0, :S0].tolist(), STEPS)
    if min(margins) < MIN_MARGIN or eos_ids(cfg) & set(toks):
        return None
    # Tokens/positions the ORT checker routes besides the above: the full greedy sequence and the
    # (d) decode step on both rows (row 0 + its first token; row 1's first S-2 tokens + that token).
    model.forward(np.asarray([rows[0, :S0].tolist() + toks]))
    model.forward(np.asarray([rows[0].tolist() + [int(rows[0, 0])]]))
    model.forward(np.asarray([rows[1, :S - 2].tolist() + [int(rows[0, 0])]]))
    gap = min(model.router_gaps) if model.router_gaps else None
    if gap is not None and gap < MIN_ROUTER_GAP:
        return None
    return rows, logits, toks, step_logits, margins, gap


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("case")
    ap.add_argument("out")
    ap.add_argument("--family", required=True, choices=sorted(ref.HF_CLASS))
    ap.add_argument("--seed", type=int, default=1234)
    a = ap.parse_args()

    with open(a.case) as f:
        text = f.read()
    cfg = json.loads(text)
    shapes = ref.expected_weight_shapes(cfg, a.family)
    weights = make_weights(shapes, a.seed, a.family)
    scales_path = os.path.splitext(a.case)[0] + ".scales"
    if os.path.exists(scales_path):
        with open(scales_path) as f:
            scales = json.load(f)
        for part, factor in scales.items():
            hit = [n for n in weights if part in n]
            if not hit:
                sys.exit(f"make_case: {scales_path}: no weight name contains {part!r}")
            for n in hit:
                weights[n] = (weights[n] * np.float32(factor)).astype(np.float32)
    model = ref.Model(cfg, weights, a.family)

    chosen, fallback = None, None
    for attempt in range(ATTEMPTS):
        r = try_inputs(model, cfg, np.random.default_rng([a.seed, attempt]))
        if r is None:
            continue
        if len(set(r[2])) >= 3:
            chosen = (attempt, r)
            break
        if fallback is None:
            fallback = (attempt, r)
    chosen = chosen or fallback
    if chosen is None:
        sys.exit(f"make_case: no input with greedy margins >= {MIN_MARGIN} in {ATTEMPTS} draws; "
                 "change --seed or the weight scales")
    attempt, (rows, logits, toks, step_logits, margins, gap) = chosen

    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "config.json"), "w") as f:
        f.write(text)
    ref.write_safetensors(os.path.join(a.out, "model.safetensors"), weights)
    greedy_ids = np.asarray([rows[0, :S0].tolist() + toks], dtype=np.int64)
    meta = {
        "prompt_len": S0,
        "max_new_tokens": STEPS,
        "weight_seed": a.seed,
        "input_seed": f"[{a.seed}, {attempt}]",
        "hf_class": ref.HF_CLASS[a.family],
        "generator": "tests/reference/hf_reference.py (independent numpy float64 reference, not HF)",
        "greedy": f"recomputed greedy, no eos reached, min margin {min(margins):.4f}",
    }
    if gap is not None:
        meta["router_gap"] = f"{gap:.4g}"
    ref.write_safetensors(os.path.join(a.out, "expected.safetensors"), {
        "input_ids": rows.astype(np.int64),
        "logits": logits.astype(np.float32),
        "greedy_ids": greedy_ids,
        "greedy_logits": step_logits[None].astype(np.float32),
    }, meta)
    print(f"make_case {os.path.basename(a.case)} ({a.family}, seed {a.seed}, draw {attempt}): "
          f"max|logits| {np.abs(logits).max():.3f}, greedy {toks}, min margin {min(margins):.4f}"
          + (f", min router gap {gap:.4g}" if gap is not None else ""))


if __name__ == "__main__":
    main()
