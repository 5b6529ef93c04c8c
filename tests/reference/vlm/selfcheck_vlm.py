#!/usr/bin/python3
"""Checks the numpy VLM reference against a Hugging Face fixture of
../shared/hf-golden-vlm: image features, batch-2 logits, Qwen's M-RoPE
positions, greedy ids and step logits (each step an uncached forward of the
sequence so far, HF's cached and uncached runs agree per the fixtures).

  selfcheck_vlm.py <case-dir>      exit 0 pass, 1 fail, 77 fixture absent
"""
import json
import os
import sys

import numpy as np

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import vlm_reference as vr  # noqa: E402


def rows_inputs(exp, c, rows):
    """The vision inputs of the images of `rows` (images_per_row metadata)."""
    per = json.loads(exp["__meta__"].get("images_per_row", "null") or "null")
    B = exp["input_ids"].shape[0]
    per = per or [1] * B
    first = [sum(per[:b]) for b in range(B)]
    imgs = [i for b in rows for i in range(first[b], first[b] + per[b])]
    inp = {}
    kind = c["model_type"]
    if kind in ("qwen2_5_vl", "qwen3_vl"):
        g = exp["image_grid_thw"]
        counts = [int(np.prod(g[i])) for i in range(g.shape[0])]
        starts = np.concatenate([[0], np.cumsum(counts)])
        inp["pixel_values"] = np.concatenate([exp["pixel_values"][starts[i]:starts[i + 1]] for i in imgs])
        inp["image_grid_thw"] = g[imgs]
    elif kind == "smolvlm":
        inp["pixel_values"] = exp["pixel_values"][rows]
        inp["pixel_attention_mask"] = exp["pixel_attention_mask"][rows]
    else:
        inp["pixel_values"] = exp["pixel_values"][imgs]
    if "token_type_ids" in exp:
        inp["token_type_ids"] = exp["token_type_ids"][rows]
    return inp


def evaluate(case_dir):
    """Reference outputs for a case: dict of arrays like expected.safetensors."""
    c = json.load(open(os.path.join(case_dir, "config.json")))
    weights, _ = vr.read_safetensors(os.path.join(case_dir, "model.safetensors"))
    vr.check_weights(c, weights)
    exp, meta = vr.read_safetensors(os.path.join(case_dir, "expected.safetensors"))
    exp = dict(exp)
    exp["__meta__"] = meta
    model = vr.VlmModel(c, weights)
    ids = exp["input_ids"].astype(np.int64)
    B, S = ids.shape
    out = {}
    inp = rows_inputs(exp, c, list(range(B)))
    qwen = c["model_type"] in ("qwen2_5_vl", "qwen3_vl")
    if qwen:
        pos, deltas = model.rope_index(ids, inp["image_grid_thw"])
        out["position_ids"], out["rope_deltas"] = pos, deltas
        inp["position_ids"] = pos
    feats = model.image_features(inp)
    out["image_features"] = feats[0]
    out["logits"] = model.forward(ids, inp, feats)
    # Greedy continuation of row 0 (uncached: one forward per step).
    steps = int(meta.get("max_new_tokens", 6))
    inp0 = rows_inputs(exp, c, [0])
    feats0 = model.image_features(inp0)
    seq = list(ids[0])
    step_logits = []
    for j in range(steps):
        cur = np.array([seq], dtype=np.int64)
        i0 = dict(inp0)
        if qwen:
            p, d = model.rope_index(ids[:1], inp0["image_grid_thw"])
            extra = np.arange(S, len(seq))[None] + d[0]
            i0["position_ids"] = np.concatenate([p, np.broadcast_to(extra, (3, 1, len(seq) - S))], axis=2)
        if "token_type_ids" in inp0:
            i0["token_type_ids"] = np.concatenate(
                [inp0["token_type_ids"], np.zeros((1, len(seq) - S), dtype=np.int64)], axis=1)
        logits = model.forward(cur, i0, feats0)[0, -1]
        step_logits.append(logits)
        seq.append(int(np.argmax(logits)))
    out["greedy_ids"] = np.array([seq], dtype=np.int64)
    out["greedy_logits"] = np.array([step_logits])
    if qwen:
        p, d = model.rope_index(ids[:1], inp0["image_grid_thw"])
        extra = np.arange(S, len(seq))[None] + d[0]
        out["greedy_position_ids"] = np.concatenate([p, np.broadcast_to(extra, (3, 1, len(seq) - S))], axis=2)
    return out


def main():
    case = sys.argv[1]
    if not os.path.exists(os.path.join(case, "expected.safetensors")):
        print(f"SKIP: {case} not found")
        sys.exit(1)
    ref = evaluate(case)
    exp, _ = vr.read_safetensors(os.path.join(case, "expected.safetensors"))
    name = os.path.basename(case.rstrip("/"))
    ok = True
    tol = 1e-4 * max(1.0, float(np.abs(exp["logits"]).max()))
    for key, t in (("image_features", 1e-4 * max(1.0, float(np.abs(exp["image_features"]).max()))),
                   ("logits", tol), ("greedy_logits", tol)):
        d = float(np.abs(ref[key] - exp[key]).max()) if ref[key].shape == exp[key].shape else float("inf")
        good = d <= t
        ok &= good
        print(f"{'ok  ' if good else 'FAIL'} {name} {key}: max|diff| = {d:.3e} (tol {t:.3e})")
    for key in ("greedy_ids", "position_ids", "rope_deltas", "greedy_position_ids"):
        if key in exp:
            same = ref[key].shape == exp[key].shape and np.array_equal(ref[key], exp[key])
            ok &= same
            print(f"{'ok  ' if same else 'FAIL'} {name} {key} {'equal' if same else 'differ'}")
    print(("PASS " if ok else "FAIL ") + name)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
