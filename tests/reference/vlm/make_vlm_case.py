#!/usr/bin/python3
"""Generate a vision-language test case in the hf-golden-vlm format.

  make_vlm_case.py <cases/name.json> <out-dir> [--seed N]

The case file holds {"config": <HF config.json>, "images_per_row": [n0, n1],
family options: "grids" (Qwen: [t, h, w] patches per image, all rows'
images in order), "real_sizes" (SmolVLM: [h, w] real pixels per image slot,
0 = a padding slot)}. Writes config.json, model.safetensors (random F32
weights under the HF checkpoint names of vlm_reference.py) and
expected.safetensors (input_ids [2, S], the vision inputs, image_features,
logits, Qwen position_ids / rope_deltas / greedy_position_ids, Gemma 3
token_type_ids, greedy_ids [1, S + 6], greedy_logits [1, 6, V], metadata
images_per_row), computed by vlm_reference.py from the float32-rounded
weights. Inputs are re-drawn until every greedy step has a top-1/top-2 gap
>= 0.02 and generates no special token. Deterministic in (case, seed).
"""
import argparse
import json
import os
import sys

import numpy as np

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import selfcheck_vlm  # noqa: E402
import vlm_reference as vr  # noqa: E402

STEPS = 6
MIN_MARGIN = 0.02
ATTEMPTS = 200


def init(name, shape, kind, rng):
    last = name.split(".")[-1]
    gemma_offset = kind == "gemma3" and ("language_model" in name or "mm_soft_emb_norm" in name)
    if "norm" in name.split(".")[-2] or name.split(".")[-2] in ("ln_q", "pre_layrnorm", "post_layernorm",
                                                                "layernorm") or "layer_norm" in name:
        if last == "weight":
            return (0.0 if gemma_offset else 1.0) + rng.normal(0, 0.1, shape)
        return rng.normal(0, 0.05, shape)
    if last == "bias" or last == "in_proj_bias":
        return rng.normal(0, 0.05, shape)
    if "embed_tokens" in name:
        return rng.normal(0, 0.1 if kind == "gemma3" else 0.25, shape)
    if "position_embedding" in name or "class_embedding" in name or "pos_embed" in name or "probe" in name:
        return rng.normal(0, 0.2, shape)
    if name.endswith("mm_input_projection_weight"):
        return rng.normal(0, 1 / np.sqrt(shape[0]), shape)
    fan_in = int(np.prod(shape[1:]))
    return rng.normal(0, 1 / np.sqrt(fan_in), shape)


def specials(c, V):
    return {"image": c.get("image_token_id", c.get("image_token_index")),
            "a": V - 2, "b": V - 3, "c": V - 4}


def layout(c, kind, per_row, tokens, rng, V):
    """Token rows (before equalising) and their token_type rows."""
    sp = specials(c, V)
    text = lambda n: list(rng.integers(4, V - 5, n))  # noqa: E731
    rows, img = [], 0
    for n in per_row:
        r = []
        if kind == "gemma3":
            r = [2] + text(2)
        elif kind in ("llava", "smolvlm"):
            r = [1] + text(2)
        else:
            r = text(2)
        for _ in range(n):
            t = tokens[img]
            img += 1
            if kind == "gemma3":
                r += [3, c.get("boi_token_index", V - 3)] + [sp["image"]] * t + [c.get("eoi_token_index", V - 2), 3]
            elif kind == "llava":
                r += [sp["image"]] * t
            elif kind == "smolvlm":
                r += [V - 3, V - 2] + [sp["image"]] * t + [V - 3]
            else:
                r += [c["vision_start_token_id"]] + [sp["image"]] * t + [c["vision_end_token_id"]]
            r += text(2)
        rows.append(r)
    S = max(len(r) for r in rows) + 2
    rows = [r + text(S - len(r)) for r in rows]
    return np.array(rows, dtype=np.int64)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("case")
    ap.add_argument("out")
    ap.add_argument("--seed", type=int, default=1234)
    a = ap.parse_args()
    spec = json.load(open(a.case))
    c = spec["config"]
    kind = c["model_type"]
    per_row = spec.get("images_per_row", [1, 1])
    tc = c.get("text_config") or c
    V = tc["vocab_size"]
    vc = c["vision_config"]
    rng = np.random.default_rng(a.seed)
    shapes = vr.expected_weight_shapes(c)
    weights = {n: init(n, tuple(shapes[n]), kind, rng).astype(np.float32) for n in sorted(shapes)}
    model = vr.VlmModel(c, weights)
    n_img = sum(per_row)
    for attempt in range(ATTEMPTS):
        r = np.random.default_rng(a.seed * 1000 + attempt + 1)
        exp = {}
        if kind in ("qwen2_5_vl", "qwen3_vl"):
            grids = np.array(spec["grids"], dtype=np.int64)
            m = vc.get("spatial_merge_size", 2)
            tokens = [int(np.prod(g)) // (m * m) for g in grids]
            P = vc.get("patch_size", 16 if kind == "qwen3_vl" else 14)
            dim = vc.get("in_channels", 3) * vc.get("temporal_patch_size", 2) * P * P
            exp["pixel_values"] = r.uniform(-1, 1, (int(grids.prod(axis=1).sum()), dim)).astype(np.float32)
            exp["image_grid_thw"] = grids
        else:
            size = vc.get("image_size", 224)
            P = vc.get("patch_size", 16 if kind == "gemma3" else 32)  # SigLIP / CLIP, SmolVLM
            n = (size // P) ** 2
            if kind == "gemma3":
                tokens = [c.get("mm_tokens_per_image", 256)] * n_img
            elif kind == "llava":
                full = c.get("vision_feature_select_strategy", "default") == "full"
                tokens = [n + (1 if full else 0)] * n_img
            else:
                sf = c.get("scale_factor", 2)
                tokens = [n // (sf * sf)] * n_img
            C = vc.get("num_channels", 3)
            if kind == "smolvlm":
                slots = max(per_row)
                sizes = spec.get("real_sizes")
                pv = np.zeros((2, slots, C, size, size), np.float32)
                pm = np.zeros((2, slots, size, size), np.int64)
                k = 0
                for b, cnt in enumerate(per_row):
                    for j in range(cnt):
                        hr, wr = sizes[k] if sizes else (size, size)
                        k += 1
                        pv[b, j, :, :hr, :wr] = r.uniform(-1, 1, (C, hr, wr))
                        pm[b, j, :hr, :wr] = 1
                exp["pixel_values"], exp["pixel_attention_mask"] = pv, pm
            else:
                exp["pixel_values"] = r.uniform(-1, 1, (n_img, C, size, size)).astype(np.float32)
        ids = layout(c, kind, per_row, tokens, r, V)
        exp["input_ids"] = ids
        if kind == "gemma3":
            exp["token_type_ids"] = (ids == model.image_token).astype(np.int64)
        tmp = os.path.join(a.out, ".tmp")
        os.makedirs(tmp, exist_ok=True)
        meta = {"images_per_row": json.dumps(per_row), "max_new_tokens": str(STEPS),
                "generator": "tests/reference/vlm/make_vlm_case.py", "seed": str(a.seed)}
        vr.write_safetensors(os.path.join(tmp, "expected.safetensors"), exp, meta)
        vr.write_safetensors(os.path.join(tmp, "model.safetensors"), weights)
        json.dump(c, open(os.path.join(tmp, "config.json"), "w"), indent=2)
        out = selfcheck_vlm.evaluate(tmp)
        gl = out["greedy_logits"][0]
        top = np.sort(gl, axis=-1)
        margins = top[:, -1] - top[:, -2]
        gen = out["greedy_ids"][0, ids.shape[1]:]
        special = set(specials(c, V).values()) | {c.get("boi_token_index"), c.get("eoi_token_index"),
                                                   c.get("vision_start_token_id"), c.get("vision_end_token_id"),
                                                   tc.get("eos_token_id"), 3}
        varied = len(set(int(t) for t in gen)) >= 3 or attempt >= ATTEMPTS // 2
        if margins.min() >= MIN_MARGIN and not any(int(t) in special for t in gen) and varied:
            break
    else:
        raise SystemExit(f"no input with clear greedy steps after {ATTEMPTS} attempts")
    for k in ("image_features", "logits", "greedy_ids", "greedy_logits", "position_ids", "rope_deltas",
              "greedy_position_ids"):
        if k in out:
            v = out[k]
            exp[k] = v.astype(np.float32) if v.dtype == np.float64 else v.astype(np.int64)
    meta["margin"] = f"{margins.min():.4f}"
    os.makedirs(a.out, exist_ok=True)
    vr.write_safetensors(os.path.join(a.out, "expected.safetensors"), exp, meta)
    vr.write_safetensors(os.path.join(a.out, "model.safetensors"), weights)
    with open(os.path.join(a.out, "config.json"), "w") as f:
        json.dump(c, f, indent=2)
    for n in os.listdir(tmp):
        os.remove(os.path.join(tmp, n))
    os.rmdir(tmp)
    print(f"wrote {a.out}: S = {ids.shape[1]}, images {per_row}, margin {margins.min():.4f}, "
          f"attempt {attempt + 1}")


if __name__ == "__main__":
    main()
