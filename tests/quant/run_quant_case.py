#!/usr/bin/python3
"""Checks archc's quantized ONNX (--quant) for one case, independently of archc's quantization code.

  run_quant_case.py --archc BIN --arch FILE.arch --family F --node NODE --case DIR --work DIR
                    --opts="--quant=int4 ..." [--l2 LO,HI] [--min-corr C | --hf] [--rel-tol T]
                    [--expect-op OP] [--folder FILE [--tjs DTYPE]]

DIR holds config.json and model.safetensors (a shared fixture, or a checkpoint in a released quantized format built
by make_quantized_checkpoint.py) and expected.safetensors (its inputs; Hugging Face's logits for a shared fixture).
Steps:
  1. archc emits the quantized model;
  2. every MatMulNBits (a Scan's stacked codes expert by expert) / GatherBlockQuantized / QMoE weight is read back from the ONNX file and dequantized per ONNX
     Runtime's operator specification (quant_formats.py); its relative L2 error against the weight the checkpoint
     holds (dequantized from its own format if quantized) must lie in [LO, HI] (round-to-nearest at 4 bits, block
     32: about 0.1; a sign or scale bug gives ~1.4);
  3. the numpy reference (tests/reference) runs over the checkpoint's weights with the quantized ones replaced by
     their dequantized values and writes an expected.safetensors for the case's inputs;
  4. tests/ort/check_quant.js checks the model in ONNX Runtime against it (prefill, greedy, cache, padding,
     single pass) and, with --min-corr, the prefill logits' correlation with Hugging Face's.
With --folder FILE the case directory is compiled as a model folder into a model folder, the way a user of the clients
does (`archc DIR -emit=onnx -o OUT/`, its safetensors bound by default, external data in small chunks), after a float
model emitted into the same folder; the folder must hold OUT/onnx/FILE (transformers.js's name for the dtype, e.g.
model_q4.onnx) beside the float model, config.json the chunk count of each model file (and no quantization_config),
genai_config.json the onnxruntime-genai graph of FILE; steps 2-4 then run on the folder's files (ONNX Runtime on the
onnxruntime-genai graph, without the single-pass check), and with --tjs DTYPE transformers.js loads the folder with
that dtype and its generate() must give the reference's greedy ids (../transformersjs/check_quant_folder.mjs).
--arch auto / --family auto: the bundled family matching the case's architectures[0], and the reference family
registered for it. Exit 0 pass, 1 fail (an absent case directory too).
"""
import argparse
import json
import math
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import onnx
from onnx import numpy_helper

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "reference"))
import hf_reference as ref  # noqa: E402
import quant_formats as qf  # noqa: E402

# How far archc's quantization error may exceed plain round-to-nearest's at the same scheme (docs/testing.md,
# "Quantized models"): over all the model's quantized weights together (the root of the summed squared errors)
# RTN_SLACK_TOTAL, per matrix RTN_SLACK_MATRIX. archc picks ONNX Runtime's symmetric scale (the signed absmax maps to
# -2^(b-1)): at 4 bits it is the better textbook choice, at 8 bits absmax / 127 beats it by up to 0.3% over a model
# and 3.4% on one small expert matrix of the fixtures (the full-range code clips the opposite extreme). A zeroed
# block of a 64 x 64 matrix costs 40%, a coarser grid or a wrong scale far more.
RTN_SLACK_TOTAL = 1.03
RTN_SLACK_MATRIX = 1.10

# Checkpoint tensors Hugging Face stores [in, out] (x @ W): GPT-2's Conv1D, gpt-oss's dequantised experts and
# Llama 4's stacked experts (Qwen3.5-MoE's fused experts of the same names are [out, in]).
IN_OUT = {"gpt2": re.compile(r"\.(c_attn|c_proj|c_fc)\.weight$"),
          "dbrx": re.compile(r"\.experts\.mlp\.w2$"),
          "gpt_oss": re.compile(r"\.mlp\.experts\.(gate_up_proj|down_proj)$"),
          "llama4_text": re.compile(r"\.feed_forward\.experts\.(gate_up_proj|down_proj)$")}


def in_out(family, tensor):
    return family in IN_OUT and IN_OUT[family].search(tensor) is not None
QUANT_KEYS = ("quantization_config", "expert_dtype")


def logical_weights(path, cfg, family):
    """The checkpoint's weights as the model computes with them: quantized formats decoded, sidecars dropped."""
    t = qf.read_safetensors(path)
    qc = cfg.get("quantization_config") or {}
    block = tuple(qc.get("weight_block_size") or (128, 128))
    out = {}
    for name, (dt, arr) in t.items():
        if name.endswith(("_scale_inv", "_scales")) or (name.endswith(".scale") and
                                                        name[:-6] + ".weight" in t):
            continue
        if name.endswith("_blocks"):
            base = name[:-7]
            w = qf.mxfp4_decode(arr, t[base + "_scales"][1])      # [E, out, in]
            out[base] = w.transpose(0, 2, 1) if in_out(family, base) else w
        elif dt == "F8_E4M3":
            sdt, scale = t.get(name + "_scale_inv") or t.get(name[:-7] + ".scale")
            if sdt != "F8_E8M0":
                scale = qf.to_float(sdt, scale)
            out[name] = qf.fp8_block_decode(arr, scale, block)
        elif dt == "I8" and name[:-7] + ".scale" in t:
            out[name] = qf.fp4_decode(arr, t[name[:-7] + ".scale"][1], arr.shape[1] * 2)
        else:
            out[name] = qf.to_float(dt, arr)
    return out


def nodes(graph):
    """The graph's nodes and its subgraphs' (QMoE is an If's branch)."""
    for node in graph.node:
        yield node
        for a in node.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                yield from nodes(a.g)


def read_back(model_path):
    """{codes initializer: (kind, dequantized [N, K] float64)} for every quantized weight of the ONNX model."""
    m = onnx.load(model_path)
    inits = {i.name: i for i in m.graph.initializer}
    arr = lambda n: numpy_helper.to_array(inits[n]) if n else None  # noqa: E731
    out, schemes = {}, {}
    # A Scan over the experts hands its body each expert's slice of stacked codes: body input -> outer stack.
    scanned = {}
    for node in nodes(m.graph):
        if node.op_type == "Scan":
            at = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
            body, m_in = at["body"], at["num_scan_inputs"]
            states = len(node.input) - m_in
            for inner, outer in zip(list(body.input)[states:], list(node.input)[states:]):
                if outer in inits:
                    scanned[inner.name] = outer
    for node in nodes(m.graph):
        if node.domain != "com.microsoft":
            continue
        at = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
        ins = list(node.input) + [""] * 4
        if node.op_type == "MatMulNBits" and ins[1] in scanned:
            # [E, N, blocks, blob] codes (and [E, ...] scales, zero points): every expert's matrix.
            codes, scales = arr(scanned[ins[1]]), arr(scanned[ins[2]])
            zps = arr(scanned[ins[3]]) if ins[3] else None
            schemes[scanned[ins[1]]] = (at["bits"], at["block_size"], zps is not None, scales.dtype)
            out[scanned[ins[1]]] = ("scan_matmul", np.stack([
                qf.matmulnbits_decode(codes[x], scales[x], None if zps is None else zps[x], at["N"], at["K"],
                                      at["bits"], at["block_size"]) for x in range(codes.shape[0])]))
        elif node.op_type == "MatMulNBits":
            w = qf.matmulnbits_decode(arr(ins[1]), arr(ins[2]), arr(ins[3]), at["N"], at["K"], at["bits"],
                                      at["block_size"])
            out[ins[1]] = ("matmul", w)
            schemes[ins[1]] = (at["bits"], at["block_size"], bool(ins[3]), arr(ins[2]).dtype)
        elif node.op_type == "GatherBlockQuantized":
            data, scales = arr(ins[0]), arr(ins[2])
            w = qf.gather_block_quantized_decode(data, scales, arr(ins[3]), at["bits"], at["block_size"],
                                                 data.shape[1] * (8 // at["bits"]))
            out[ins[0]] = ("gather", w)
            schemes[ins[0]] = (at["bits"], at["block_size"], bool(ins[3]), scales.dtype)
        elif node.op_type == "QMoE":
            # fc1 [P * E, 2 I / P, D] and fc2 [P * E, D, I / P] stacks: each entry's rows as MatMulNBits holds them.
            bits, block = at["expert_weight_bits"], at["block_size"]
            ins = list(node.input) + [""] * 14
            for kind, c, sc, zp in (("qmoe_fc1", 2, 3, 11), ("qmoe_fc2", 5, 6, 12)):
                codes, scales, zps = arr(ins[c]), arr(ins[sc]), arr(ins[zp])
                n, k = codes.shape[1], codes.shape[2] * 8 // bits
                schemes[ins[c]] = (bits, block, zps is not None, scales.dtype)
                out[ins[c]] = (kind, np.stack([
                    qf.matmulnbits_decode(codes[x], scales[x], None if zps is None else zps[x], n, k, bits, block)
                    for x in range(codes.shape[0])]))
    floats = {i.name for i in m.graph.initializer if i.data_type in (1, 10, 16)}
    return out, floats, {n.op_type for n in nodes(m.graph)}, schemes


def hf_name(codes, weights):
    """Codes initializer name -> (checkpoint tensor, expert index or None); archc names them
    <tensor>.qweight, <tensor>.<e>.qweight (one expert of a stacked tensor), <tensor>.qweight.gather."""
    base = re.sub(r"\.qweight(\.gather)?$", "", codes)
    m = re.match(r"^(.*)\.(\d+)$", base)
    # A stack [E, ...], or DBRX's 2-D [E * R, C] experts read as [E, R, C].
    if m and m.group(1) in weights and weights[m.group(1)].ndim in (2, 3) and \
            (weights[m.group(1)].ndim == 3 or base not in weights):
        return m.group(1), int(m.group(2))
    if base not in weights:
        raise SystemExit(f"quantized initializer {codes}: no checkpoint tensor {base}")
    return base, None


MLA_VIEW = "#mla:"


def scan_matrices(quantized, weights):
    """Stacks a Scan over the experts reads -> [(codes, checkpoint tensor, expert, matrix)]: a checkpoint stack
    S's S.qweight (expert e of S), or per-expert tensors X.<e>.L stacked as X.stacked.L.qweight."""
    found = []
    for codes, (kind, w) in sorted(quantized.items()):
        if kind != "scan_matmul":
            continue
        base = re.sub(r"\.qweight$", "", codes)
        if base in weights and weights[base].ndim in (2, 3):
            found += [(codes, base, e, w[e]) for e in range(w.shape[0])]
            continue
        mla = re.match(r"^(.*)\.(uk_t|uv)$", base)
        if mla and mla.group(1) in weights:
            # MLA's kv weight [H * (dn + dv), c] as per-head U_K^T [H, c, dn] and U_V [H, dv, c] stacks (a Scan over
            # the heads): compared with those views of the checkpoint tensor, held as MLA_VIEW keys.
            src, part = mla.groups()
            heads = w.shape[0]
            c = w.shape[1] if part == "uk_t" else w.shape[2]
            w3 = np.asarray(weights[src], np.float64).reshape(heads, -1, c)
            width = w.shape[2] if part == "uk_t" else w.shape[1]
            view = w3[:, :width, :].transpose(0, 2, 1) if part == "uk_t" else w3[:, w3.shape[1] - width:, :]
            weights[f"{src}{MLA_VIEW}{part}"] = view
            found += [(codes, f"{src}{MLA_VIEW}{part}", e, w[e]) for e in range(heads)]
            continue
        m = re.match(r"^(.*)\.stacked\.(.*)$", base)
        if not m:
            raise SystemExit(f"scanned codes {codes}: no checkpoint tensor")
        found += [(codes, f"{m.group(1)}.{e}.{m.group(2)}", None, w[e]) for e in range(w.shape[0])]
    return found


# Checkpoint stacks whose gate and up rows alternate (else [gate | up] halves).
ALTERNATING = {"gpt_oss"}


def qmoe_matrices(quantized, weights, family):
    """QMoE stacks -> [(codes, checkpoint tensor, expert, matrix)] (docs/onnx.md names them): per-expert tensors'
    X.stacked.G+up[@P] (gate G, up the other [I, D] tensor of X.<e>) and X.stacked.D[@P], or a checkpoint stack S's
    S.moe[@P]; entry p * E + e holds part p of expert e, fc1's rows gate and up alternating."""
    stacks = {c: v for c, v in quantized.items() if v[0].startswith("qmoe")}
    downs = {re.sub(r"(@\d+)?\.qweight$", "", c) for c, (k, _) in stacks.items() if k == "qmoe_fc2"}
    found = []
    for codes, (kind, w) in sorted(stacks.items()):
        base = re.sub(r"(@\d+)?\.qweight$", "", codes)
        if base.endswith(".moe") and weights[base[:-len(".moe")]].ndim == 2:
            # DBRX: 2-D stacks w1, v1 [E * I, D] (fc1 rows alternating gate and up) and w2 [E * I, D] (fc2 [D, I]).
            src = base[:-len(".moe")]
            m2 = re.match(r"^.*@(\d+)\.qweight$", codes)
            parts = int(m2.group(1)) if m2 else 1
            experts = w.shape[0] // parts
            for e in range(experts):
                if kind == "qmoe_fc2":
                    found.append((codes, src, e, np.concatenate([w[p * experts + e] for p in range(parts)], axis=1)))
                    continue
                gate = np.concatenate([w[p * experts + e][0::2] for p in range(parts)])
                up = np.concatenate([w[p * experts + e][1::2] for p in range(parts)])
                found.append((codes, src, e, gate))
                found.append((codes, re.sub(r"\.w1$", ".v1", src), e, up))
            continue
        if base.endswith(".moe"):                             # a checkpoint stack
            src = base[:-len(".moe")]
            orig = np.asarray(weights[src], np.float64)
            if in_out(family, src):
                orig = orig.transpose(0, 2, 1)
            experts = orig.shape[0]
            names = [(src, e) for e in range(experts)]
        else:
            m = re.match(r"^(.*)\.stacked\.(.*?)(\+up)?$", base)
            prefix, leaf = m.group(1), m.group(2)
            experts = sum(1 for t in weights if re.fullmatch(re.escape(prefix) + r"\.\d+\." + re.escape(leaf), t))
            names = [(f"{prefix}.{e}.{leaf}", None) for e in range(experts)]
            if m.group(3):
                taken = {leaf} | {re.match(r"^.*\.stacked\.(.*)$", d).group(1) for d in downs if d.startswith(prefix)}
                ups = [t[len(prefix) + 3:] for t in weights if t.startswith(prefix + ".0.") and
                       t[len(prefix) + 3:] not in taken and weights[t].shape == weights[names[0][0]].shape]
                if len(ups) != 1:
                    raise SystemExit(f"{codes}: cannot tell the up projection of {prefix} ({ups})")
        parts = w.shape[0] // experts
        for e, (tensor, x) in enumerate(names):
            if kind == "qmoe_fc2":
                mat = np.concatenate([w[p * experts + e] for p in range(parts)], axis=1)
                found.append((codes, tensor, x, mat))
                continue
            gate = np.concatenate([w[p * experts + e][0::2] for p in range(parts)])
            up = np.concatenate([w[p * experts + e][1::2] for p in range(parts)])
            if x is None:
                found.append((codes, tensor, None, gate))
                found.append((codes, f"{prefix}.{e}.{ups[0]}", None, up))
                continue
            mat = np.empty((2 * gate.shape[0], gate.shape[1]))
            if family in ALTERNATING:
                mat[0::2], mat[1::2] = gate, up
            else:
                mat = np.concatenate([gate, up])
            found.append((codes, tensor, x, mat))
    return found


def run_archc(cmd, notes):
    """Runs archc, passing its stderr through and keeping it in `notes`."""
    r = subprocess.run(cmd, stderr=subprocess.PIPE, text=True)
    sys.stderr.write(r.stderr)
    if r.returncode != 0:
        raise SystemExit(f"FAIL: {' '.join(cmd)} exited with {r.returncode}")
    notes.append(r.stderr)


def named_float_projections(notes):
    """The weight patterns archc's `--quant leaves N projection weights in
    float:` note names, as regular expressions over initializer names."""
    names = []
    for text in notes:
        lines = text.splitlines()
        for k, line in enumerate(lines):
            if "--quant leaves" not in line or "in float:" not in line:
                continue
            for item in lines[k + 1:]:
                if not item.startswith("  "):
                    break
                pattern = item.strip().split(" (")[0]
                names.append(re.compile(re.escape(pattern).replace(r"\{i\}", r"\d+")
                                        .replace(r"\{e\}", r"\d+") + r"$"))
    return names


def float_projections(model_path):
    """Float initializers of two or more dims (each over 1) that a MatMul or
    Gemm reads as an operand, directly, through views or through a Scan (its
    body's input in the same position), not a quantized op's scales."""
    m = onnx.load(model_path, load_external_data=False)
    views = {"Transpose", "Reshape", "Split", "Slice", "Squeeze", "Unsqueeze", "Cast"}

    def users_of(graph):
        users = {}
        for n in graph.node:
            for i in n.input:
                users.setdefault(i, []).append(n)
        return users

    def feeds_matmul(graph, users, name, depth=0):
        for u in users.get(name, []):
            if u.op_type in ("MatMul", "Gemm", "FusedMatMul", "Einsum"):
                return True
            if u.op_type in views and depth < 6 and any(feeds_matmul(graph, users, o, depth + 1)
                                                        for o in u.output):
                return True
            if u.op_type == "Scan" and depth < 6:
                body = next(onnx.helper.get_attribute_value(a) for a in u.attribute if a.name == "body")
                inner = users_of(body)
                for pos, i in enumerate(u.input):
                    if i == name and pos < len(body.input) and \
                            feeds_matmul(body, inner, body.input[pos].name, depth + 1):
                        return True
        return False
    users = users_of(m.graph)
    return sorted(i.name for i in m.graph.initializer
                  if i.data_type in (1, 10, 16) and len(i.dims) >= 2 and min(i.dims) > 1 and
                  feeds_matmul(m.graph, users, i.name))


def emit_folder(a, opts, name, notes):
    """Emits the case directory as a model folder (a float model, then the quantized one) and checks the folder's
    files. Returns (the quantized model, the graph onnxruntime-genai runs, problems)."""
    out = os.path.join(a.work, "folder")
    shutil.rmtree(out, ignore_errors=True)
    chunks = ["--data-chunk-size=32768"]
    for extra in ([], opts):
        run_archc([a.archc, a.case, "-emit=onnx", "-o", out + "/"] + chunks + extra, notes if extra else [])
    onnx_dir = os.path.join(out, "onnx")
    model = os.path.join(onnx_dir, a.folder)
    problems = []
    if not os.path.exists(model):
        return None, None, [f"no onnx/{a.folder} in the folder ({sorted(os.listdir(onnx_dir))})"]
    if not os.path.exists(os.path.join(onnx_dir, "model.onnx")):
        problems.append("the float model onnx/model.onnx is gone")
    with open(os.path.join(out, "config.json")) as f:
        cfg = json.load(f)
    counts = (cfg.get("transformers.js_config") or {}).get("use_external_data_format") or {}
    files = {}
    for f in (a.folder, "model.onnx"):
        files[f] = sorted(n for n in os.listdir(onnx_dir) if re.fullmatch(re.escape(f) + r"_data(_\d+)?", n))
        if counts.get(f, 0) != len(files[f]):
            problems.append(f"config.json counts {counts.get(f, 0)} external data file(s) of {f}, "
                            f"the folder holds {len(files[f])}")
    m = onnx.load(model, load_external_data=False)
    locations = {kv.value for i in m.graph.initializer for kv in i.external_data if kv.key == "location"}
    if not locations <= set(files[a.folder]):
        problems.append(f"{a.folder} refers to data files {sorted(locations - set(files[a.folder]))} it does not own")
    if "quantization_config" in cfg or "quantization_config" in (cfg.get("text_config") or {}):
        problems.append("config.json keeps the checkpoint's quantization_config")
    genai_model = model
    two = os.path.join(onnx_dir, a.folder[:-len(".onnx")] + ".genai.onnx")
    if os.path.exists(two):
        genai_model = two
    genai_path = os.path.join(out, "genai_config.json")
    if os.path.exists(genai_path):
        with open(genai_path) as f:
            decoder = json.load(f)["model"]["decoder"]["filename"]
        if decoder != os.path.relpath(genai_model, out):
            problems.append(f"genai_config.json runs {decoder}, not {os.path.relpath(genai_model, out)}")
    print(f"{'ok  ' if not problems else 'FAIL'} {name} model folder: onnx/{a.folder} with "
          f"{len(files[a.folder])} external data file(s) beside onnx/model.onnx ({len(files['model.onnx'])}); "
          f"onnxruntime-genai runs {os.path.relpath(genai_model, out)}"
          f"{'' if os.path.exists(genai_path) else ' (no genai_config.json)'}")
    for p in problems:
        print(f"       {p}")
    return model, genai_model, problems


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    for k in ("archc", "arch", "family", "node", "case", "work", "opts"):
        ap.add_argument("--" + k, required=True)
    ap.add_argument("--l2", default="0.02,0.2")
    ap.add_argument("--min-corr")
    ap.add_argument("--min-top1", help="the fraction of prefill positions (HF decides beyond the error) whose "
                    "top-1 must be HF's")
    ap.add_argument("--hf", action="store_true", help="report the correlation with Hugging Face's logits")
    ap.add_argument("--bounds", help="tests/quant/quant_bounds.json: with --scheme, the agreement with Hugging Face's "
                    "logits the case's class must reach at that scheme (measured, scripts/measure_quant_bounds.py)")
    ap.add_argument("--scheme", help="the scheme's name in --bounds (int4, int8)")
    ap.add_argument("--rel-tol", default="1e-4")
    ap.add_argument("--corr-opts", help="options of the model whose correlation with HF is checked (default: --opts)")
    ap.add_argument("--expect-op", help="an op type the model must contain (e.g. QMoE with --target=ort)")
    ap.add_argument("--expect-scanned", action="store_true",
                    help="the model must read quantized expert codes through a Scan (stacked codes)")
    ap.add_argument("--folder", metavar="FILE", help="compile as a model folder; FILE: the model expected in onnx/")
    ap.add_argument("--tjs", metavar="DTYPE", help="with --folder: transformers.js loads the folder with this dtype")
    a = ap.parse_args()
    if not os.path.exists(os.path.join(a.case, "expected.safetensors")):
        print(f"FAIL: case {a.case} not found")
        return 1
    # "auto": the bundled family archc picks for the case's class, the
    # reference family registered for it.
    a.family = ref.case_family(a.case, a.family)
    arch_args = [] if a.arch == "auto" else [a.arch]
    name = os.path.basename(os.path.normpath(a.work))
    os.makedirs(a.work, exist_ok=True)
    with open(os.path.join(a.case, "config.json")) as f:
        cfg = json.load(f)
    opts = a.opts.split()
    folder_problems, genai_model, notes = [], None, []
    if a.folder:
        model, genai_model, folder_problems = emit_folder(a, opts, name, notes)
        if model is None:
            print(f"FAIL {name}: {folder_problems[0]}")
            return 1
    else:
        model = os.path.join(a.work, "emit", "model.onnx")
        os.makedirs(os.path.dirname(model), exist_ok=True)
        run_archc([a.archc, *arch_args, "--config", os.path.join(a.case, "config.json"), "-emit=onnx", "--weights",
                   os.path.join(a.case, "model.safetensors"), "-o", model, "--no-genai-config"] + opts, notes)

    weights = logical_weights(os.path.join(a.case, "model.safetensors"), cfg, a.family)
    quantized, floats, ops, schemes = read_back(model)
    if not quantized:
        print(f"FAIL {name}: the model has no quantized weight")
        return 1
    # Every projection is quantized, or archc names it with the reason it
    # stays float (a router, MLA's latent expansion, a weight read through
    # a reshape): a Linear left in float silently fails.
    named = named_float_projections(notes)
    silent = [n for n in float_projections(model) if not any(p.match(n) for p in named)]
    print(f"{'ok  ' if not silent else 'FAIL'} {name} every projection quantized or named in float by archc "
          f"({len(named)} named)" + (f": {silent[:6]} left float without a word" if silent else ""))
    if silent:
        return 1
    if a.expect_op and a.expect_op not in ops:
        print(f"FAIL {name}: the model has no {a.expect_op} node")
        return 1
    if a.expect_scanned and not any(kind == "scan_matmul" for kind, _ in quantized.values()):
        print(f"FAIL {name}: no quantized expert codes are read through a Scan")
        return 1
    lo, hi = (float(x) for x in a.l2.split(","))
    errors, ratios, ref_weights, untie = [], [], dict(weights), None
    sq_errors = [0.0, 0.0]  # summed squared errors: archc's, round-to-nearest's
    matrices = [(codes, kind, *hf_name(codes, weights), w) for codes, (kind, w) in sorted(quantized.items())
                if not kind.startswith("qmoe") and kind != "scan_matmul"]
    matrices += [(codes, "matmul", tensor, x, w) for codes, tensor, x, w in scan_matrices(quantized, weights)]
    matrices += [(codes, "qmoe", tensor, x, w) for codes, tensor, x, w in qmoe_matrices(quantized, weights, a.family)]
    for codes, kind, tensor, expert, w in matrices:
        full = weights[tensor]
        rows = None
        if expert is not None and full.ndim == 2:
            # [E * R, C] read as [E, R, C]: expert e's R rows (w is [R, C], or [C, R] when read [in, out]).
            rows = w.shape[0] if w.shape[1] == full.shape[1] and not in_out(a.family, tensor) else w.shape[1]
            orig = full[expert * rows:(expert + 1) * rows]
        else:
            orig = full if expert is None else full[expert]
        as_stored = orig
        if orig.shape == w.T.shape and (orig.shape != w.shape or in_out(a.family, tensor)):
            w = w.T                                   # stored [in, out]
            as_stored = orig.T
        if orig.shape != w.shape:
            print(f"FAIL {name}: {codes} dequantizes to {w.shape}, checkpoint {tensor} is {orig.shape}")
            return 1
        err = float(np.linalg.norm(w - orig) / max(np.linalg.norm(orig), 1e-30))
        # The same matrix quantized by plain round-to-nearest at the node's
        # bits, block, symmetry and scale precision: archc's error may not
        # exceed it by more than the slacks (a worse scale or rounding
        # choice, a lost block).
        rtn = qf.round_to_nearest_error(as_stored, *schemes[codes])
        ratios.append((err / rtn if rtn > 0 else (1.0 if err == 0 else np.inf), codes, tensor, expert))
        norm2 = float(np.linalg.norm(orig)) ** 2
        sq_errors[0] += err * err * norm2
        sq_errors[1] += rtn * rtn * norm2
        errors.append((err, codes if kind == "matmul" and codes.startswith(tensor) and expert is None
                       else f"{codes} ({tensor}{'' if expert is None else f' {expert}'})"))
        if kind == "matmul" and tensor in floats and cfg.get("tie_word_embeddings", False):
            untie = (tensor, w)                       # a tied head quantized apart from the float table
        elif expert is None:
            ref_weights[tensor] = w
        else:
            ref_weights[tensor] = np.array(ref_weights.get(tensor, weights[tensor]), np.float64)
            if rows is not None:
                ref_weights[tensor][expert * rows:(expert + 1) * rows] = w
            else:
                ref_weights[tensor][expert] = w
    errs = np.array([e for e, _ in errors])
    bad = [(e, c) for e, c in errors if not lo <= e <= hi]
    print(f"{'ok  ' if not bad else 'FAIL'} {name} {len(errors)} quantized matrices read back from the ONNX file: "
          f"relative L2 error min {errs.min():.4f} median {np.median(errs):.4f} max {errs.max():.4f} "
          f"(need [{lo}, {hi}])")
    for e, c in bad[:10]:
        print(f"       {c}: {e:.4f}")
    worst = max(ratios)
    total = math.sqrt(sq_errors[0] / sq_errors[1]) if sq_errors[1] > 0 else 1.0
    over = [r for r in ratios if r[0] > RTN_SLACK_MATRIX]
    ok = not over and total <= RTN_SLACK_TOTAL
    print(f"{'ok  ' if ok else 'FAIL'} {name} error / round-to-nearest's error at the same bits, block and "
          f"symmetry: all weights {total:.4f} (need <= {RTN_SLACK_TOTAL}), worst matrix {worst[0]:.4f} ({worst[1]}) "
          f"(need <= {RTN_SLACK_MATRIX})")
    for r, c, t, x in over[:10]:
        print(f"       {c} ({t}{'' if x is None else f' {x}'}): {r:.4f}")
    if not ok:
        bad = bad + over + [(total, "all weights")]

    # MLA's kv weights: the dequantized U_K^T and U_V stacks put back together.
    for key in [k for k in ref_weights if MLA_VIEW + "uk_t" in k]:
        src = key.split(MLA_VIEW)[0]
        uk, uv = ref_weights.pop(key), ref_weights.pop(src + MLA_VIEW + "uv")
        ref_weights[src] = np.concatenate([uk.transpose(0, 2, 1), uv], axis=1).reshape(-1, uk.shape[1])
    # Reference over the weights as the model stores them.
    ref_cfg = {k: v for k, v in cfg.items() if k not in QUANT_KEYS}
    if untie:
        tied = set(ref.expected_weight_shapes(ref_cfg, a.family))
        ref_cfg["tie_word_embeddings"] = False
        head = sorted(set(ref.expected_weight_shapes(ref_cfg, a.family)) - tied)
        if len(head) != 1:
            print(f"FAIL {name}: cannot untie the head for the reference ({head})")
            return 1
        ref_weights[head[0]] = untie[1]
    exp, _ = ref.read_safetensors(os.path.join(a.case, "expected.safetensors"))
    rm = ref.Model(ref_cfg, {k: np.asarray(v, np.float64) if np.issubdtype(np.asarray(v).dtype, np.floating)
                             else v for k, v in ref_weights.items()}, a.family)
    logits = rm.forward(exp["input_ids"])
    steps = exp["greedy_logits"].shape[1]
    s0 = exp["greedy_ids"].shape[1] - steps
    prompt = exp["greedy_ids"][0, :s0].tolist()
    toks, step_logits, margins = rm.greedy(prompt, steps)
    out = os.path.join(a.work, "reference")
    os.makedirs(out, exist_ok=True)
    ref.write_safetensors(os.path.join(out, "expected.safetensors"), {
        "input_ids": exp["input_ids"].astype(np.int64), "logits": logits.astype(np.float32),
        "greedy_ids": np.asarray([prompt + toks], np.int64),
        "greedy_logits": step_logits[None].astype(np.float32)})
    print(f"     {name} reference over the dequantized weights: greedy {toks}, min margin {min(margins):.4f}")

    cmd = [a.node, os.path.join(HERE, "..", "ort", "check_quant.js"), "--archc", a.archc, "--arch", a.arch,
           "--config", os.path.join(a.case, "config.json"), "--weights", os.path.join(a.case, "model.safetensors"),
           "--work", os.path.join(a.work, "ort"), "--expected", os.path.join(out, "expected.safetensors"),
           "--opts", a.opts, "--name", name, "--rel-tol", a.rel_tol]
    if a.bounds:
        cls = (cfg.get("architectures") or [""])[0]
        with open(a.bounds) as f:
            b = json.load(f)["bounds"].get(cls, {}).get(a.scheme)
        if b is None:
            print(f"FAIL {name}: {a.bounds} has no {a.scheme} bound for {cls} (scripts/measure_quant_bounds.py)")
            return 1
        # The stricter of the scheme's floor (--min-corr) and the class's bound.
        a.min_corr = str(max(float(a.min_corr or -1), b["min_corr"]))
        a.min_top1 = str(max(float(a.min_top1 or 0), b["min_top1"]))
    if a.min_corr or a.min_top1 or a.hf:
        cmd += ["--hf", os.path.join(a.case, "expected.safetensors"),
                "--measure-out", os.path.join(a.work, "hf_agreement.json")]
    if a.min_corr:
        cmd += ["--min-corr", a.min_corr]
    if a.min_top1:
        cmd += ["--min-top1", a.min_top1]
    if a.corr_opts is not None:
        cmd += ["--corr-opts", a.corr_opts]
    if genai_model:
        cmd += ["--model", genai_model]
    rc = subprocess.run(cmd).returncode
    if a.tjs:
        tjs = subprocess.run([a.node, os.path.join(HERE, "..", "transformersjs", "check_quant_folder.mjs"),
                              "--folder", os.path.join(a.work, "folder"), "--dtype", a.tjs,
                              "--expected", os.path.join(out, "expected.safetensors"), "--name", name])
        rc = rc or tjs.returncode
    return 1 if bad or rc or folder_problems else 0


if __name__ == "__main__":
    sys.exit(main())
