#!/usr/bin/python3
"""Checks the numpy reference (encdec_reference.py) against one fixture of
../shared/hf-golden-encdec (or a generated case of the same format) by the
fixtures' rule: tol = 1e-4 * max(1, max|expected|) per tensor; encoder
outputs on the real positions (pooler_output, mean_pooled and a sequence
classifier's logits whole), teacher-forced logits, greedy ids exactly and
their step logits.

  selfcheck_encdec.py CASE_DIR
Exit 0 = the reference reproduces the case.
"""
import json
import os
import sys

import numpy as np

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import encdec_reference as er  # noqa: E402
from hf_reference import read_safetensors, write_safetensors  # noqa: E402


def load(case):
    with open(os.path.join(case, "config.json")) as f:
        cfg = json.load(f)
    W, _ = read_safetensors(os.path.join(case, "model.safetensors"))
    W = {k: v.astype(np.float64) for k, v in W.items()}
    E, meta = read_safetensors(os.path.join(case, "expected.safetensors"))
    return cfg, W, E, meta


def compute(cfg, W, E):
    """What the reference computes for the case's inputs (same keys)."""
    out = {}
    mask = E.get("attention_mask")
    if "decoder_input_ids" not in E:
        types = E.get("token_type_ids")
        r = er.encoder_outputs(cfg, W, E["input_ids"], mask, types)
        out.update(r)
        if "mean_pooled" in E:
            h = r["last_hidden_state"]
            m = mask[:, :, None].astype(np.float64)
            out["mean_pooled"] = (h * m).sum(1) / m.sum(1)
        return out
    model = er.Seq2Seq(cfg, W)
    inputs = {k: E[k] for k in ("input_ids", "attention_mask", "input_features") if k in E}
    enc = model.encode(inputs)
    out["encoder_last_hidden_state"] = enc
    out["logits"] = model.logits(enc, mask, E["decoder_input_ids"])
    steps = E["greedy_logits"].shape[1]
    in0 = {k: v[:1] for k, v in inputs.items()}
    ids, lg = model.greedy(model.encode(in0), None if mask is None else mask[:1],
                           int(E["greedy_ids"][0, 0]), steps)
    out["greedy_ids"] = np.array([ids])
    out["greedy_logits"] = lg[None]
    return out


INPUTS = ("input_ids", "attention_mask", "token_type_ids", "input_features", "decoder_input_ids")


def write_expected(path, E, got, meta):
    """An expected.safetensors for another model of the case: its inputs and the reference's outputs `got`
    (compute()) under the fixture's names and dtypes."""
    res = {k: v for k, v in E.items() if k in INPUTS}
    for k, v in got.items():
        if k in E:
            res[k] = np.asarray(v).astype(E[k].dtype)
    write_safetensors(path, res, meta)


def compare(E, got):
    """[(name, diff, tol, ok)] for every output the case stores."""
    res = []
    mask = E.get("attention_mask")
    for k in ("last_hidden_state", "logits", "pooler_output", "mean_pooled",
              "encoder_last_hidden_state", "greedy_logits"):
        if k not in E:
            continue
        want = E[k].astype(np.float64)
        if k not in got:
            res.append((k, float("inf"), 0.0, False))
            continue
        g = got[k]
        tol = 1e-4 * max(1.0, float(np.abs(want).max()))
        if g.shape != want.shape:
            res.append((f"{k} shape {g.shape} vs {want.shape}", float("inf"), tol, False))
            continue
        d = np.abs(g - want)
        seq_out = k in ("last_hidden_state", "encoder_last_hidden_state") or \
            (k == "logits" and "decoder_input_ids" not in E and want.ndim == 3)
        if seq_out and mask is not None:
            d = d[mask == 1]
        diff = float(d.max())
        res.append((k, diff, tol, diff <= tol))
    if "greedy_ids" in E:
        same = np.array_equal(np.asarray(got["greedy_ids"]), E["greedy_ids"])
        res.append((f"greedy_ids {got['greedy_ids'][0].tolist()} vs {E['greedy_ids'][0].tolist()}",
                    0.0 if same else 1.0, 0.0, same))
    return res


def main():
    case = os.path.normpath(sys.argv[1])
    if not os.path.exists(os.path.join(case, "expected.safetensors")):
        print(f"FAIL: {case} not found")
        return 1
    cfg, W, E, _ = load(case)
    got = compute(cfg, W, E)
    ok = True
    for name, diff, tol, good in compare(E, got):
        print(f"{'ok  ' if good else 'FAIL'} {os.path.basename(case)} {name}: max|diff| = {diff:.3e} (tol {tol:.3e})")
        ok &= good
    print(f"{os.path.basename(case)}: {'reference reproduces the case' if ok else 'MISMATCH'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
