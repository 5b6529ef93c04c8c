#!/usr/bin/python3
"""Builds a checkpoint in a released quantized format from a shared fixture's config (tests/quant/README.md).

  make_quantized_checkpoint.py FORMAT FIXTURE_DIR OUT_DIR [--seed N]

FORMAT             as released by                          stored tensors
  deepseek_v3-fp8  DeepSeek-V3 / V3.1, Kimi-K2             every Linear weight F8_E4M3 + `*.weight_scale_inv` F32
                                                           [ceil(out/128), ceil(in/128)]; embed, lm_head, router,
                                                           norms BF16; e_score_correction_bias F32
  qwen3-fp8        Qwen3-*-FP8 (dense)                     Linear weights F8_E4M3 + `weight_scale_inv` BF16;
                                                           embed, lm_head, norms BF16
  deepseek_v4      DeepSeek-V4-Flash (expert_dtype fp4)    attention + shared-expert Linears F8_E4M3 + `X.scale`
                                                           F8_E8M0 per 128x128; routed experts I8 [out, in/2] of
                                                           packed e2m1 + `X.scale` F8_E8M0 [out, in/32]; compressor,
                                                           indexer weights_proj, router, embed, head, norms BF16;
                                                           hyper-connections, sinks, ape, gate bias F32
  gpt_oss-mxfp4    gpt-oss-20b / 120b                      experts `*_blocks` U8 [E, out, in/32, 16] + `*_scales` U8
                                                           [E, out, in/32], expert biases and everything else BF16

The config is the fixture's, with the widths enlarged so that weights span several 128-blocks with partial edge
blocks, `torch_dtype: bfloat16` and `quantization_config` (and `expert_dtype`) exactly as in the release. Weights are
random (tests/reference/make_case.py's scheme), quantized with the release's rule (FP8: amax / 448 per block, ue8m0:
the power of two above it; FP4/MXFP4: per 32 inputs, e2m1 nearest). expected.safetensors is computed by the numpy
reference over the values the checkpoint represents (decoded from its own format), for inputs with clear greedy
margins, in the hf-golden layout.
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
import quant_formats as qf  # noqa: E402

FP8_CONFIG = {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8", "weight_block_size": [128, 128]}
FORMATS = {
    "deepseek_v3-fp8": dict(
        family="deepseek_v3",
        dims=dict(hidden_size=160, intermediate_size=288, moe_intermediate_size=144, q_lora_rank=136,
                  n_routed_experts=4, first_k_dense_replace=1),
        quantization_config=FP8_CONFIG),
    "qwen3-fp8": dict(
        family="qwen3",
        dims=dict(hidden_size=160, intermediate_size=288, num_attention_heads=10, head_dim=16),
        quantization_config=FP8_CONFIG),
    "deepseek_v4": dict(
        family="deepseek_v4",
        dims=dict(hidden_size=160, q_lora_rank=136, o_lora_rank=144, moe_intermediate_size=96, n_routed_experts=4),
        quantization_config=dict(FP8_CONFIG, scale_fmt="ue8m0"), expert_dtype="fp4"),
    "gpt_oss-mxfp4": dict(
        family="gpt_oss",
        dims=dict(hidden_size=96, intermediate_size=64),
        quantization_config={"modules_to_not_convert": ["model.layers.*.self_attn", "model.layers.*.mlp.router",
                                                        "model.embed_tokens", "lm_head"],
                             "quant_method": "mxfp4"}),
}


def storage(fmt, name, shape):
    """How the release stores a tensor: 'fp8', 'fp8-ue8m0', 'fp4', 'mxfp4', 'bf16' or 'f32'."""
    if fmt == "deepseek_v3-fp8":
        if name.endswith("e_score_correction_bias"):
            return "f32"
        if len(shape) == 2 and name.endswith("_proj.weight") or name.endswith("_mqa.weight"):
            return "fp8"
        return "bf16"
    if fmt == "qwen3-fp8":
        return "fp8" if len(shape) == 2 and name.endswith("_proj.weight") else "bf16"
    if fmt == "deepseek_v4":
        if re.search(r"ffn\.experts\.\d+\.w[123]\.weight$", name):
            return "fp4"
        if re.search(r"attn\.(wq_a|wq_b|wkv|wo_a|wo_b|indexer\.wq_b)\.weight$|shared_experts\.w[123]\.weight$",
                     name):
            return "fp8-ue8m0"
        if re.search(r"hc_|attn_sink$|\.ape$|gate\.bias$", name):
            return "f32"
        return "bf16"
    if fmt == "gpt_oss-mxfp4":
        return "mxfp4" if name.endswith(("experts.gate_up_proj", "experts.down_proj")) else "bf16"
    raise ValueError(fmt)


def build(fmt, fixture, out, seed):
    spec = FORMATS[fmt]
    family = spec["family"]
    with open(os.path.join(fixture, "config.json")) as f:
        cfg = json.load(f)
    cfg.update(spec["dims"])
    ref_cfg = dict(cfg)
    cfg["torch_dtype"] = "bfloat16"
    cfg["quantization_config"] = spec["quantization_config"]
    if "expert_dtype" in spec:
        cfg["expert_dtype"] = spec["expert_dtype"]
    shapes = ref.expected_weight_shapes(ref_cfg, family)
    weights = make_case.make_weights(shapes, seed, family)
    stored, values = {}, {}
    for name, w in sorted(weights.items()):
        kind = storage(fmt, name, w.shape) if w.dtype != np.int64 else "int"
        if kind == "int":
            stored[name] = ("I64", w)
            values[name] = w
        elif kind == "f32":
            stored[name] = ("F32", w)
            values[name] = w.astype(np.float64)
        elif kind == "bf16":
            bits = qf.bf16_round(w)
            stored[name] = ("BF16", bits)
            values[name] = qf.bf16_value(bits)
        elif kind in ("fp8", "fp8-ue8m0"):
            ue8m0 = kind == "fp8-ue8m0"
            codes, scales = qf.fp8_block_encode(w, (128, 128), ue8m0)
            stored[name] = ("F8_E4M3", codes)
            if ue8m0:
                stored[name[:-7] + ".scale"] = ("F8_E8M0", scales)
            elif fmt == "qwen3-fp8":   # Qwen3 dense FP8 releases keep weight_scale_inv in BF16
                scales = qf.bf16_value(qf.bf16_round(scales)).astype(np.float32)
                stored[name + "_scale_inv"] = ("BF16", qf.bf16_round(scales))
            else:
                stored[name + "_scale_inv"] = ("F32", scales)
            values[name] = qf.fp8_block_decode(codes, scales, (128, 128))
        elif kind == "fp4":
            packed, scales = qf.fp4_encode(w)
            stored[name] = ("I8", packed)
            stored[name[:-7] + ".scale"] = ("F8_E8M0", scales)
            values[name] = qf.fp4_decode(packed, scales, w.shape[1])
        elif kind == "mxfp4":
            # Hugging Face's dequantised gpt-oss experts are [E, in, out]; the blocks are [E, out, in/32, 16].
            blocks, scales = qf.mxfp4_encode(w.transpose(0, 2, 1))
            stored[name + "_blocks"] = ("U8", blocks)
            stored[name + "_scales"] = ("U8", scales)
            values[name] = qf.mxfp4_decode(blocks, scales).transpose(0, 2, 1)
    model = ref.Model(ref_cfg, values, family)
    chosen = None
    for attempt in range(make_case.ATTEMPTS):
        r = make_case.try_inputs(model, ref_cfg, np.random.default_rng([seed, attempt]))
        if r is not None:
            chosen = (attempt, r)
            break
    if chosen is None:
        sys.exit(f"{fmt}: no input with clear greedy margins")
    attempt, (rows, logits, toks, step_logits, margins, gap) = chosen
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    qf.write_safetensors(os.path.join(out, "model.safetensors"), stored)
    ref.write_safetensors(os.path.join(out, "expected.safetensors"), {
        "input_ids": rows.astype(np.int64), "logits": logits.astype(np.float32),
        "greedy_ids": np.asarray([rows[0, :make_case.S0].tolist() + toks], np.int64),
        "greedy_logits": step_logits[None].astype(np.float32)},
        {"generator": "tests/quant/make_quantized_checkpoint.py (numpy reference over the dequantized weights)",
         "format": fmt, "weight_seed": seed, "input_seed": f"[{seed}, {attempt}]"})
    kinds = {}
    for name, w in weights.items():
        k = storage(fmt, name, w.shape) if w.dtype != np.int64 else "int"
        kinds[k] = kinds.get(k, 0) + 1
    print(f"make_quantized_checkpoint {fmt}: {len(stored)} tensors ({', '.join(f'{v} {k}' for k, v in sorted(kinds.items()))}), "
          f"greedy {toks}, min margin {min(margins):.4f}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("format", choices=sorted(FORMATS))
    ap.add_argument("fixture")
    ap.add_argument("out")
    ap.add_argument("--seed", type=int, default=1234)
    a = ap.parse_args()
    if not os.path.exists(os.path.join(a.fixture, "config.json")):
        print(f"SKIP: fixture {a.fixture} not found")
        return 77
    build(a.format, a.fixture, a.out, a.seed)
    return 0


if __name__ == "__main__":
    sys.exit(main())
