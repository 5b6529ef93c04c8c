#!/usr/bin/python3
"""Builds a GPTQ / AWQ / compressed-tensors checkpoint from a shared fixture's config (tests/quant/README.md).

  make_prequant_checkpoint.py CASE CONFIGS OUT_DIR [--seed N] [--break KIND] [--set PATH=JSON ...]

CONFIGS is archs/configs/tiny (the family's tiny config <family>.json) or ../shared/hf-golden (<family>-base/config.json).
Each CASE is a tiny model (that config with wider dims: every quantized input a multiple of the group size)
whose Linear weights are random, quantized the way the format's tool does it (prequant_formats.py) and written in its
released layout with the release's `quantization_config`; embeddings, norms, routers and float heads are F16 (GPTQ,
AWQ) or BF16 (compressed-tensors). expected.safetensors is the numpy reference (tests/reference) over the
DEQUANTIZED weights, in ../shared/prequant's layout (input_ids, logits, greedy_ids; greedy_logits too), for inputs
with clear greedy margins. The cases cover what the four shared ones do not (CASES below).

--break KIND writes a broken checkpoint instead (lit/onnx/prequant_errors.test): missing-qzeros, missing-scales,
g_idx-length, g_idx-unequal, g_idx-range, packed-shape, weight-shape, zero-range, sym-zero, missing-zero-point,
missing-g_idx; expected.safetensors is not written (nor with --no-expected). --set PATH=JSON sets a quantization_config field (PATH dotted,
e.g. config_groups.group_0.input_activations) to a JSON value, for the config refusals.
"""
import argparse
import json
import os
import re
import sys

import numpy as np

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "reference"))
import hf_reference as ref  # noqa: E402
import make_case  # noqa: E402
import prequant_formats as pf  # noqa: E402
import quant_formats as qf  # noqa: E402

LLAMA = dict(hidden_size=128, intermediate_size=256, head_dim=32)
MOE = dict(hidden_size=128, intermediate_size=256, moe_intermediate_size=64, head_dim=32)
GPTQ_META = {"damp_percent": 0.01, "true_sequential": True, "quant_method": "gptq", "pack_dtype": "int32",
             "model_name_or_path": None, "model_file_base_name": "model",
             "meta": {"quantizer": ["gptqmodel:fixture"], "damp_auto_increment": 0.0025}}


def gptq(bits, group, sym, desc_act=False, fmt="gptq", **extra):
    return dict(GPTQ_META, bits=bits, group_size=group, sym=sym, desc_act=desc_act, static_groups=False,
                lm_head=False, checkpoint_format=fmt, **extra)


def ct(groups, ignore, fmt="pack-quantized"):
    return {"quant_method": "compressed-tensors", "format": fmt, "quantization_status": "compressed",
            "config_groups": groups, "ignore": ignore, "kv_cache_scheme": None, "sparsity_config": {},
            "global_compression_ratio": None, "version": "0.11.0"}


def ct_group(targets, bits, strategy, group=None, sym=True, actorder=None, typ="int", block=None,
             fmt="pack-quantized"):
    return {"targets": targets, "format": fmt, "input_activations": None, "output_activations": None,
            "weights": {"num_bits": bits, "type": typ, "symmetric": sym, "group_size": group, "strategy": strategy,
                        "block_structure": block, "dynamic": False, "actorder": actorder, "observer": "minmax",
                        "observer_kwargs": {}}}


# name: fixture family, dims, quantization_config, options
CASES = {
    # GPTQ asymmetric with act-order (desc_act: groups along a permutation, g_idx non-monotonic), v1 zero offset
    # with a true zero of 0 (GPTQModel's word-level subtraction borrows from the next field).
    "gptq-actorder-asym": dict(family="llama", dims=LLAMA, qc=gptq(4, 32, False, desc_act=True),
                               act_order=True, zero_zero=True),
    # 8-bit GPTQ, group 64, symmetric (zero 128 = MatMulNBits' default), tied head.
    "gptq-int8-g64": dict(family="qwen2", dims=dict(LLAMA, tie_word_embeddings=True), qc=gptq(8, 64, True)),
    # gptq_v2 (no zero offset), one group per row (group_size -1), asymmetric.
    "gptq-v2-rowgroup": dict(family="llama", dims=LLAMA, qc=gptq(4, -1, False, fmt="gptq_v2")),
    # 3-bit (codes straddling words) and 2-bit, in MatMulNBits 4-bit containers.
    "gptq-3bit": dict(family="llama", dims=LLAMA, qc=gptq(3, 32, True)),
    "gptq-2bit-asym": dict(family="llama", dims=LLAMA, qc=gptq(2, 32, False)),
    # GPTQModel dynamic: a module left float (-:), down_proj at 8 bits g64 (+:); lm_head quantized; desc_act with
    # static_groups (natural groups, g_idx = i // gs stored).
    "gptq-dynamic-lmhead": dict(family="llama", dims=LLAMA,
                                qc=dict(gptq(4, 32, True, desc_act=True), static_groups=True, lm_head=True,
                                        dynamic={r"-:model\.layers\.1\.self_attn\.o_proj": {},
                                                 r"+:.*down_proj": {"bits": 8, "group_size": 64}})),
    # MoE experts (Qwen3-MoE: per-expert Linears quantized, the router float).
    "gptq-qwen3_moe": dict(family="qwen3_moe", dims=MOE, qc=gptq(4, 32, True)),
    "gptq-qwen3_moe-int8": dict(family="qwen3_moe", dims=MOE, qc=gptq(8, 32, True)),
    # AWQ group 64, untied float lm_head, modules_to_not_convert.
    "awq-g64-floathead": dict(family="llama", dims=LLAMA,
                              qc={"quant_method": "awq", "bits": 4, "group_size": 64, "zero_point": True,
                                  "version": "gemm", "modules_to_not_convert": ["layers.1.mlp.up_proj"]}),
    # AWQ on Mixtral's experts.
    "awq-mixtral": dict(family="mixtral", dims=dict(hidden_size=128, intermediate_size=128, head_dim=32),
                        qc={"quant_method": "awq", "bits": 4, "group_size": 32, "zero_point": True,
                            "version": "gemm", "modules_to_not_convert": None}),
    # compressed-tensors int4 asymmetric, packed zero points, an ignore list with an exact name and a re: pattern.
    "ct-w4a16-asym-ignore": dict(family="llama", dims=LLAMA, qc=ct(
        {"group_0": ct_group(["Linear"], 4, "group", 32, sym=False)},
        ["lm_head", r"re:.*layers\.0\.mlp\.down_proj$"])),
    # The same with the older unpacked I8 zero points, and act-order groups (weight_g_idx).
    "ct-w4a16-legacy-zp-actorder": dict(family="llama", dims=LLAMA, qc=ct(
        {"group_0": ct_group(["Linear"], 4, "group", 32, sym=False, actorder="group")}, ["lm_head"]),
        legacy_zp=True, act_order=True),
    # compressed-tensors int8 channel-wise (W8A16), and a second group at int4 for the MLP (mixed precision).
    "ct-int8-channel": dict(family="qwen3", dims=LLAMA, qc=ct(
        {"group_0": ct_group(["Linear"], 8, "channel")}, ["lm_head"])),
    "ct-mixed-int4-int8": dict(family="llama", dims=LLAMA, qc=ct(
        {"group_0": ct_group([r"re:.*mlp\..*_proj$"], 4, "group", 64),
         "group_1": ct_group([r"re:.*self_attn\..*_proj$"], 8, "channel")}, ["lm_head"], fmt="mixed-precision")),
    # compressed-tensors FP8 per tensor and per 128 x 128 block.
    "ct-fp8-tensor": dict(family="llama", dims=LLAMA, qc=ct(
        {"group_0": ct_group(["Linear"], 8, "tensor", typ="float", fmt="float-quantized")}, ["lm_head"],
        fmt="float-quantized")),
    "ct-fp8-block": dict(family="qwen3", dims=dict(LLAMA, intermediate_size=320), qc=ct(
        {"group_0": ct_group(["Linear"], 8, "block", typ="float", block=[128, 128], fmt="float-quantized")},
        ["lm_head"], fmt="float-quantized")),
}

LINEAR = re.compile(r"\.((q|k|v|o|gate|up|down)_proj|w1|w2|w3)\.weight$")


def module_of(name):
    return name[:-len(".weight")]


def quantize(case, spec, weights, rng, broken):
    """{stored name: (dtype, array)} and {logical name: dequantized values} of the checkpoint."""
    qc = spec["qc"]
    method = qc["quant_method"]
    float_dt = "BF16" if method == "compressed-tensors" else "F16"
    stored, values, perms = {}, {}, {}
    for name, w in sorted(weights.items()):
        if w.dtype == np.int64:
            stored[name], values[name] = ("I64", w), w
            continue
        module = module_of(name) if name.endswith(".weight") else None
        scheme = pf.module_scheme(qc, module) if module and w.ndim == 2 and \
            (LINEAR.search(name) or module == "lm_head") else None
        if scheme is None:
            if float_dt == "BF16":
                bits = qf.bf16_round(w)
                stored[name], values[name] = ("BF16", bits), qf.bf16_value(bits)
            else:
                h = w.astype(np.float16)
                stored[name], values[name] = ("F16", h), h.astype(np.float64)
            continue
        out_, in_ = w.shape
        perm = None
        if spec.get("act_order"):
            # One order per input: q/k/v share theirs, gate/up theirs (GPTQ's Hessian order of that input).
            key = re.sub(r"(q|k|v)_proj$", "qkv", re.sub(r"(gate|up)_proj$", "gate_up", module))
            perm = perms.setdefault(key, rng.permutation(in_))
        if method == "gptq":
            force = [(0, 3), (0, 9)] if spec.get("zero_zero") and "q_proj" in module else None
            t, deq = pf.gptq_encode(w, scheme["bits"], scheme["group"], scheme["sym"], perm,
                                    v1=qc.get("checkpoint_format") != "gptq_v2",
                                    static_groups=qc.get("static_groups", False), force_zero=force)
            for k, v in t.items():
                stored[f"{module}.{k}"] = ({"qweight": "I32", "qzeros": "I32", "scales": "F16",
                                            "g_idx": "I32"}[k], v)
        elif method == "awq":
            t, deq = pf.awq_encode(w, scheme["group"])
            for k, v in t.items():
                stored[f"{module}.{k}"] = ("F16" if k == "scales" else "I32", v)
        else:
            if scheme["format"] == "float-quantized":
                t, deq = pf.ct_fp8_encode(w, scheme["strategy"], tuple(scheme["block"] or (128, 128)))
            else:
                t, deq = pf.ct_pack_encode(w, scheme["bits"], scheme["strategy"], scheme["group"], scheme["sym"],
                                           legacy_zp=spec.get("legacy_zp", False), g_perm=perm)
            for k, v in t.items():
                stored[f"{module}.{k}"] = v
        values[name] = deq
    if broken:
        break_checkpoint(broken, stored, qc)
    return stored, values


def break_checkpoint(kind, stored, qc):
    """One defect in the first layer's q_proj (o_proj / down_proj where the kind needs it)."""
    m = "model.layers.0.self_attn.q_proj"
    if kind == "missing-qzeros":
        del stored[m + ".qzeros"]
    elif kind == "missing-scales":
        del stored[m + (".weight_scale" if m + ".weight_scale" in stored else ".scales")]
    elif kind == "g_idx-length":
        dt, g = stored[m + ".g_idx"]
        stored[m + ".g_idx"] = (dt, g[:-32])
    elif kind == "g_idx-unequal":
        dt, g = stored[m + ".g_idx"]
        g = g.copy()
        g[np.where(g == 0)[0][0]] = 1                 # group 0 one input short, group 1 one over
        stored[m + ".g_idx"] = (dt, g)
    elif kind == "g_idx-range":
        dt, g = stored[m + ".g_idx"]
        g = g.copy()
        g[5] = 99
        stored[m + ".g_idx"] = (dt, g)
    elif kind == "packed-shape":
        dt, p = stored[m + ".qweight"]
        stored[m + ".qweight"] = (dt, p[:-1])
    elif kind == "weight-shape":
        stored[m + ".weight_shape"] = ("I64", np.array([128, 96], np.int64))
    elif kind == "zero-range":
        dt, z = stored[m + ".weight_zero_point"]
        z = z.copy()
        z[2, 0] = 40                                     # a 4-bit zero point of 40
        stored[m + ".weight_zero_point"] = (dt, z)
    elif kind == "sym-zero":
        dt, z = stored[m + ".qzeros"]
        z = z.copy()
        z[0, 0] = 0x77777776                           # zero point 7 (stored 6) where sym: true needs 8
        stored[m + ".qzeros"] = (dt, z)
    elif kind == "missing-zero-point":
        del stored[m + ".weight_zero_point"]
    elif kind == "missing-g_idx":
        del stored[m + ".g_idx"]
    else:
        raise SystemExit(f"unknown --break {kind}")


def build(case, fixture_root, out, seed, broken, sets=(), expected=True):
    spec = CASES[case]
    family = spec["family"]
    path = os.path.join(fixture_root, f"{family}-base", "config.json")
    if not os.path.exists(path):
        path = os.path.join(fixture_root, f"{family}.json")
    with open(path) as f:
        cfg = json.load(f)
    cfg.update(spec["dims"])
    ref_cfg = dict(cfg)
    cfg["torch_dtype"] = "bfloat16" if spec["qc"]["quant_method"] == "compressed-tensors" else "float16"
    cfg["quantization_config"] = spec["qc"]
    shapes = ref.expected_weight_shapes(ref_cfg, family)
    weights = make_case.make_weights(shapes, seed, family)
    stored, values = quantize(case, spec, weights, np.random.default_rng([seed, 7]), broken)
    qc = cfg["quantization_config"] = json.loads(json.dumps(spec["qc"]))
    for item in sets:
        key, value = item.split("=", 1)
        *parents, last = key.split(".")
        node = qc
        for p in parents:
            node = node[p]
        node[last] = json.loads(value)
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    qf.write_safetensors(os.path.join(out, "model.safetensors"), stored)
    if broken or not expected:
        print(f"make_prequant_checkpoint {case}{' --break ' + broken if broken else ''}: {len(stored)} tensors")
        return
    model = ref.Model(ref_cfg, values, family)
    chosen = None
    for attempt in range(make_case.ATTEMPTS):
        r = make_case.try_inputs(model, ref_cfg, np.random.default_rng([seed, attempt]))
        if r is not None:
            chosen = (attempt, r)
            break
    if chosen is None:
        sys.exit(f"{case}: no input with clear greedy margins")
    attempt, (rows, logits, toks, step_logits, margins, gap) = chosen
    ref.write_safetensors(os.path.join(out, "expected.safetensors"), {
        "input_ids": rows.astype(np.int64), "logits": logits.astype(np.float32),
        "greedy_ids": np.asarray([rows[0, :make_case.S0].tolist() + toks], np.int64),
        "greedy_logits": step_logits[None].astype(np.float32)},
        {"generator": "tests/quant/make_prequant_checkpoint.py (numpy reference over the dequantized weights)",
         "case": case, "weight_seed": seed, "input_seed": f"[{seed}, {attempt}]"})
    print(f"make_prequant_checkpoint {case}: {len(stored)} tensors, greedy {toks}, min margin {min(margins):.4f}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("case", choices=sorted(CASES))
    ap.add_argument("fixtures", help="archs/configs/tiny or ../shared/hf-golden (the family's config)")
    ap.add_argument("out")
    ap.add_argument("--seed", type=int, default=4321)
    ap.add_argument("--break", dest="broken")
    ap.add_argument("--set", action="append", default=[])
    ap.add_argument("--no-expected", action="store_true", help="skip expected.safetensors (binding tests)")
    a = ap.parse_args()
    build(a.case, a.fixtures, a.out, a.seed, a.broken, a.set, not a.no_expected)
    return 0


if __name__ == "__main__":
    sys.exit(main())
