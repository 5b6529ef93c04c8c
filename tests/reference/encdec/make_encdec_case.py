#!/usr/bin/python3
"""Generates an encoder, encoder-decoder or speech test case in the format of
../shared/hf-golden-encdec (index.md) from the numpy reference
(encdec_reference.py), for the options the fixtures do not exercise.

  make_encdec_case.py CASE_JSON OUT_DIR --archc ARCHC [--seed N]

CASE_JSON holds {"config": <config.json>} and optionally "seq" (S, 8),
"pad" (P, 3: row 1's padding), "dec_len" (T, 6), "steps" (8). The tensor
names and shapes come from `archc --config -emit=weights` (the reference
reads every tensor it uses by its Hugging Face name, so a name archc gets
wrong is a KeyError here); values follow the fixtures' recipe (matrices
N(0, 1/fan_in), embeddings N(0, 0.5^2), norm gains 1 + N(0, 0.1^2), biases
N(0, 0.05^2), T5 relative bias N(0, 0.5^2), final_logits_bias
N(0, 0.2^2), decoders' FFN output x5 and cross-attention output x0.5).
Writes config.json, generation_config.json (encoder-decoders),
model.safetensors (F32) and expected.safetensors (inputs and the
reference's outputs over the F32-rounded weights). Encoder-decoder inputs
are re-drawn until every greedy step has a top-1/top-2 gap >= 0.02.
Deterministic in (case, seed).
"""
import argparse
import json
import os
import subprocess
import sys

import numpy as np

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import encdec_reference as er  # noqa: E402
from hf_reference import write_safetensors  # noqa: E402

ENCODERS = ("bert", "roberta", "xlm-roberta", "distilbert", "modernbert", "mpnet", "deberta-v2")
MIN_MARGIN = 0.02
ATTEMPTS = 200


def weight_list(archc, cfg_path):
    out = subprocess.run([archc, "--config", cfg_path, "-emit=weights"], check=True,
                         capture_output=True, text=True).stdout
    found = []
    for line in out.splitlines():
        parts = line.split(" [")
        if len(parts) != 2:
            continue
        dims = parts[1].split("]")[0]
        found.append((parts[0], [int(d) for d in dims.split(",") if d.strip()]))
    return found


def init(name, shape, rng):
    parts = name.split(".")
    last = parts[-1]
    normish = any(k in name for k in ("LayerNorm", "layer_norm", "layernorm", "norm.", "_norm"))
    if name.endswith("relative_attention_bias.weight"):
        return rng.normal(0, 0.5, shape)
    if name == "final_logits_bias":
        return rng.normal(0, 0.2, shape)
    if normish and last == "weight" and len(shape) == 1:
        return 1.0 + rng.normal(0, 0.1, shape)
    if normish and last == "bias":
        return rng.normal(0, 0.1, shape)
    if last == "bias":
        return rng.normal(0, 0.05, shape)
    if len(shape) == 2 and ("embed" in name or "shared" in name or name.endswith("_embeddings.weight")):
        return rng.normal(0, 0.5, shape)
    fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else shape[0]
    w = rng.normal(0, 1 / np.sqrt(fan_in), shape)
    dec = ".decoder." in "." + name or name.startswith("decoder.")
    if dec and (name.endswith("fc2.weight") or name.endswith("DenseReluDense.wo.weight")):
        w = w * 5.0
    if dec and (name.endswith("encoder_attn.out_proj.weight") or name.endswith("EncDecAttention.o.weight")):
        w = w * 0.5
    return w


def margin(row):
    top = np.sort(row)[-2:]
    return top[1] - top[0]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("case")
    ap.add_argument("out")
    ap.add_argument("--archc", required=True)
    ap.add_argument("--seed", type=int, default=1234)
    a = ap.parse_args()
    with open(a.case) as f:
        spec = json.load(f)
    cfg = spec["config"]
    name = os.path.splitext(os.path.basename(a.case))[0]
    rng = np.random.default_rng([a.seed, sum(map(ord, name))])
    os.makedirs(a.out, exist_ok=True)
    cfg_path = os.path.join(a.out, "config.json")
    with open(cfg_path, "w") as f:
        json.dump(cfg, f, indent=2)
    W32 = {n: init(n, s, rng).astype(np.float32) for n, s in weight_list(a.archc, cfg_path)}
    write_safetensors(os.path.join(a.out, "model.safetensors"), W32)
    W = {k: v.astype(np.float64) for k, v in W32.items()}
    mt = cfg["model_type"]
    V = cfg.get("vocab_size")
    S, P = spec.get("seq", 8), spec.get("pad", 3)
    pad = cfg.get("pad_token_id", 0)
    meta = {"generator": "tests/reference/encdec/make_encdec_case.py", "hf_class": cfg["architectures"][0],
            "weight_seed": str(a.seed)}
    E = {}
    if mt in ENCODERS:
        ids = rng.integers(0, V, (2, S))
        while (ids == pad).any():
            ids = np.where(ids == pad, rng.integers(0, V, (2, S)), ids)
        mask = np.ones((2, S), np.int64)
        mask[1, S - P:] = 0
        ids[1, S - P:] = pad
        E["input_ids"], E["attention_mask"] = ids.astype(np.int64), mask
        types = None
        if (mt == "bert" and cfg.get("type_vocab_size", 2) > 1) or \
                (mt == "deberta-v2" and cfg.get("type_vocab_size", 0) > 1):
            types = np.zeros((2, S), np.int64)
            types[:, S // 2:] = 1
            types[1, S - P:] = 0
            E["token_type_ids"] = types
        out = er.encoder_outputs(cfg, W, ids, mask, types)
        E.update({k: v.astype(np.float32) for k, v in out.items()})
    else:
        model = er.Seq2Seq(cfg, W)
        T, steps = spec.get("dec_len", 6), spec.get("steps", 8)
        V = W["final_logits_bias"].shape[1] if "final_logits_bias" in W else \
            (W["lm_head.weight"].shape[0] if "lm_head.weight" in W else V)
        start = cfg.get("decoder_start_token_id", 0)
        best = None
        for _ in range(ATTEMPTS):
            if mt == "whisper":
                inputs = {"input_features": rng.standard_normal(
                    (2, cfg["num_mel_bins"], 2 * cfg["max_source_positions"])).astype(np.float32)}
                mask = None
            else:
                ids = rng.integers(3, cfg["vocab_size"], (2, S))
                mask = np.ones((2, S), np.int64)
                mask[1, S - P:] = 0
                ids[1, S - P:] = pad
                inputs = {"input_ids": ids.astype(np.int64), "attention_mask": mask}
            in0 = {k: v[:1] for k, v in inputs.items()}
            g_ids, g_lg = model.greedy(model.encode({k: v.astype(np.float64) if v.dtype == np.float32 else v
                                                     for k, v in in0.items()}),
                                       None if mask is None else mask[:1], start, steps)
            m = min(margin(r) for r in g_lg)
            if best is None or m > best[0]:
                best = (m, inputs, mask, g_ids, g_lg)
            if m >= MIN_MARGIN:
                break
        m, inputs, mask, g_ids, g_lg = best
        if m < MIN_MARGIN:
            sys.exit(f"{name}: no input draw gives greedy margins >= {MIN_MARGIN} (best {m:.4f})")
        dec = np.concatenate([np.full((2, 1), start), rng.integers(3, V, (2, T - 1))], axis=1).astype(np.int64)
        enc = model.encode({k: v.astype(np.float64) if v.dtype == np.float32 else v for k, v in inputs.items()})
        E.update(inputs)
        E["decoder_input_ids"] = dec
        E["encoder_last_hidden_state"] = enc.astype(np.float32)
        E["logits"] = model.logits(enc, mask, dec).astype(np.float32)
        E["greedy_ids"] = np.array([g_ids], np.int64)
        E["greedy_logits"] = g_lg[None].astype(np.float32)
        meta.update({"decoder_start_token_id": str(start), "max_new_tokens": str(steps), "greedy": "true",
                     "min_margin": f"{m:.4f}"})
        gen = {k: cfg[k] for k in ("decoder_start_token_id", "bos_token_id", "eos_token_id", "pad_token_id")
               if k in cfg}
        with open(os.path.join(a.out, "generation_config.json"), "w") as f:
            json.dump(gen, f, indent=2)
    write_safetensors(os.path.join(a.out, "expected.safetensors"), E, meta)
    print(f"{name}: wrote {a.out} ({len(W32)} tensors)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
