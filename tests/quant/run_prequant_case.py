#!/usr/bin/python3
"""Checks archc on one GPTQ / AWQ / compressed-tensors checkpoint (ctest `prequant.*`; tests/quant/README.md).

  run_prequant_case.py --archc BIN --node NODE (--case DIR | --make CASE --configs DIR) --work DIR [--opts "..."]
                       [--tjs DTYPE|auto] [--file NAME] [--expect-op OP] [--requant-l2 LO,HI] [--rel-tol T]

DIR holds config.json (with the release's quantization_config), model.safetensors and expected.safetensors
(input_ids, logits, greedy_ids = prompt + 8 greedy tokens: ../shared/prequant's layout). Only config.json and
model.safetensors are given to archc (a folder C/ of links). Steps, each able to fail:
  1. the checkpoint decoded in numpy (prequant_formats.py, written from ../shared/docs/prequant-formats.md, not from
     archc) and run through the numpy reference (tests/reference) reproduces expected.logits and the greedy ids;
  2. `archc --config C/config.json --weights C/ -emit=onnx -o OUT/model.onnx` and `archc C/ -emit=onnx -o OUT/`;
  3. every Linear the checkpoint stores as integer codes is a com.microsoft MatMulNBits (or one expert's matrix of a
     Scan's stacked codes or of a QMoE) of the ONNX file whose dequantized weight (code - zero point) * scale,
     decoded per ONNX Runtime's operator specification (quant_formats.matmulnbits_decode), EQUALS the checkpoint's
     dequantized weight (with its inputs gathered when the node's input is a Gather by constant indices:
     act-order); FP8 weights are float initializers equal to their dequantized values; no other float
     initializer holds a packed module's weight;
  4. ONNX Runtime (tests/ort/check_quant.js) on both models: prefill logits within 1e-4 x max|logit| of
     expected.logits, the 8 greedy ids equal (and the step logits, prefill + decode, left padding; the single-pass
     model for the first);
  5. with --tjs DTYPE: transformers.js loads the model folder with that dtype (onnx/--file) and generate() gives the
     greedy ids (tests/transformersjs/check_quant_folder.mjs); the folder carries genai_config.json naming its
     onnxruntime-genai graph and config.json without quantization_config.
--make CASE builds the case first (make_prequant_checkpoint.py CASE --configs DIR) into WORK/case. --tjs auto takes
the dtype from the folder's model file name (model.onnx fp32, model_q4.onnx q4, model_int8.onnx int8). With --quant in
--opts (--requant-l2 LO,HI) the checkpoint's float Linears must be MatMulNBits too, their relative L2 error against
the float weight in [LO, HI]; the packed ones still equal the checkpoint's exactly. --rel-tol replaces the 1e-4
logit rule (half precision).
Exit 0 pass, 1 fail.
"""
import argparse
import json
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
import prequant_formats as pf  # noqa: E402
import quant_formats as qf  # noqa: E402
import run_quant_case as rq  # noqa: E402


def graphs(g):
    yield g
    for n in g.node:
        for a in n.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                yield from graphs(a.g)


def constant_of(g, name):
    for n in g.node:
        if n.op_type == "Constant" and n.output[0] == name:
            return numpy_helper.to_array(n.attribute[0].t)
    return None


def read_back(model_path):
    """{codes initializer: (dequantized [N, K] float64 in the checkpoint's input order, kind)} of every plain
    MatMulNBits (an act-order Gather undone), plus run_quant_case's Scan / QMoE stacks."""
    m = onnx.load(model_path)
    inits = {i.name: i for i in m.graph.initializer}
    arr = lambda n: numpy_helper.to_array(inits[n]) if n else None  # noqa: E731
    out = {}
    for g in graphs(m.graph):
        producers = {o: n for n in g.node for o in n.output}
        for node in g.node:
            if node.op_type != "MatMulNBits" or node.input[1] not in inits:
                continue
            at = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
            ins = list(node.input) + [""] * 4
            w = qf.matmulnbits_decode(arr(ins[1]), arr(ins[2]), arr(ins[3]), at["N"], at["K"], at["bits"],
                                      at["block_size"])
            src = producers.get(ins[0])
            perm = None
            if src is not None and src.op_type == "Gather":
                perm = constant_of(g, src.input[1])
                if perm is None and src.input[1] in inits:
                    perm = arr(src.input[1])
            if perm is not None:
                undone = np.empty_like(w)
                undone[:, np.asarray(perm, np.int64)] = w       # column j of w is input perm[j]
                w = undone
            out[ins[1]] = (w, "act-order" if perm is not None else "matmul")
    quantized, floats, ops, _ = rq.read_back(model_path)
    return out, quantized, ops


def check_model(name, model_path, weights, packed, fp8, problems, requant=None):
    """Step 3 for one ONNX file; `requant` (lo, hi): --quant's MatMulNBits of the float Linears."""
    plain, quantized, ops = read_back(model_path)
    found, exact, mismatched = {}, 0, []
    for codes, (w, kind) in plain.items():
        base = re.sub(r"\.qweight$", "", codes)
        if base in weights:
            found[base] = (w, kind)
    for codes, tensor, _, w in rq.scan_matrices(
            {c: v for c, v in quantized.items() if v[0] == "scan_matmul"}, weights):
        found[tensor] = (w, "scan")
    for codes, tensor, _, w in rq.qmoe_matrices(
            {c: v for c, v in quantized.items() if v[0].startswith("qmoe")}, weights, "none"):
        found[tensor] = (w, "qmoe")
    missing = sorted(packed - set(found))
    for t in sorted(packed & set(found)):
        w, kind = found[t]
        if w.shape != weights[t].shape or not np.array_equal(w, weights[t]):
            diff = np.abs(w - weights[t]).max() if w.shape == weights[t].shape else float("nan")
            mismatched.append(f"{t} ({kind}): max |diff| {diff:.3e}")
        else:
            exact += 1
    if requant:
        others = sorted(set(found) - packed)
        errs = [float(np.linalg.norm(found[t][0] - weights[t]) / np.linalg.norm(weights[t])) for t in others]
        bad = [f"{t}: {e:.4f}" for t, e in zip(others, errs) if not requant[0] <= e <= requant[1]]
        ok = others and not bad
        print(f"{'ok  ' if ok else 'FAIL'} {name}: --quant quantized {len(others)} float Linears of the checkpoint "
              f"(relative L2 error {min(errs, default=0):.4f}..{max(errs, default=0):.4f}, need "
              f"[{requant[0]}, {requant[1]}])")
        for b in bad[:6]:
            print(f"       {b}")
        if not ok:
            problems.append(f"{name}: --quant of the float Linears")
    kinds = sorted({found[t][1] for t in packed & set(found)})
    ok = not missing and not mismatched
    print(f"{'ok  ' if ok else 'FAIL'} {name}: {exact} of {len(packed)} packed Linears are MatMulNBits equal to the "
          f"checkpoint's dequantized weights exactly ({', '.join(kinds) or 'none'})")
    for t in missing[:8]:
        print(f"       {t}: no MatMulNBits reads its codes")
    for t in mismatched[:8]:
        print(f"       {t}")
    if not ok:
        problems.append(f"{name}: exact weights")
    # FP8 (and any other float-stored quantized weight): float initializers equal to the dequantized values.
    if fp8:
        m = onnx.load(model_path)
        inits = {i.name: numpy_helper.to_array(i) for i in m.graph.initializer}
        bad, same = [], 0
        for t in sorted(fp8):
            v = inits.get(t)
            if v is None:
                bad.append(f"{t}: no float initializer")
                continue
            v = v.astype(np.float64)
            ok = (v.shape == weights[t].shape and np.array_equal(v, weights[t])) or \
                 (v.shape == weights[t].T.shape and np.array_equal(v, weights[t].T))
            same += ok
            if not ok:
                bad.append(f"{t}: differs from its dequantized FP8 values")
        print(f"{'ok  ' if not bad else 'FAIL'} {name}: {same} of {len(fp8)} FP8 weights are float initializers "
              f"equal to their dequantized values")
        for b in bad[:8]:
            print(f"       {b}")
        if bad:
            problems.append(f"{name}: FP8 weights")
    return ops, {t: w for t, (w, _) in found.items() if t not in packed}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    for k in ("archc", "node", "work"):
        ap.add_argument("--" + k, required=True)
    ap.add_argument("--case")
    ap.add_argument("--make", help="a make_prequant_checkpoint.py case, built into WORK/case first")
    ap.add_argument("--configs", help="with --make: archs/configs/tiny")
    ap.add_argument("--requant-l2")
    ap.add_argument("--rel-tol")
    ap.add_argument("--opts", default="")
    ap.add_argument("--tjs", help="transformers.js dtype of the model folder (q4, int8, fp32)")
    ap.add_argument("--file", help="the model file transformers.js's dtype loads, in OUT/onnx/")
    ap.add_argument("--expect-op", help="an op type the model must contain (QMoE, Scan)")
    a = ap.parse_args()
    name = os.path.basename(os.path.normpath(a.work))
    shutil.rmtree(a.work, ignore_errors=True)
    if a.make:
        a.case = os.path.join(a.work, "case")
        if subprocess.run([sys.executable, os.path.join(HERE, "make_prequant_checkpoint.py"), a.make, a.configs,
                           a.case]).returncode:
            print(f"FAIL {name}: cannot build {a.make}")
            return 1
    if not a.case or not os.path.exists(os.path.join(a.case, "expected.safetensors")):
        print(f"FAIL: case {a.case} not found")
        return 1
    ckpt = os.path.join(a.work, "C")
    os.makedirs(ckpt)
    for f in ("config.json", "model.safetensors"):
        os.symlink(os.path.abspath(os.path.join(a.case, f)), os.path.join(ckpt, f))
    with open(os.path.join(a.case, "config.json")) as f:
        cfg = json.load(f)
    problems = []

    # 1. numpy: the checkpoint decoded, the reference over it.
    tensors = qf.read_safetensors(os.path.join(a.case, "model.safetensors"))
    weights, packed = pf.logical_weights(tensors, cfg)
    fp8 = {n for n, (dt, _) in tensors.items() if dt == "F8_E4M3"}
    family = ref.case_family(a.case, "auto")
    ref_cfg = {k: v for k, v in cfg.items() if k not in rq.QUANT_KEYS}
    model = ref.Model(ref_cfg, {k: np.asarray(v, np.float64) if np.issubdtype(np.asarray(v).dtype, np.floating)
                                else v for k, v in weights.items()}, family)
    exp, _ = ref.read_safetensors(os.path.join(a.case, "expected.safetensors"))
    logits = model.forward(exp["input_ids"])
    scale = float(np.abs(exp["logits"]).max())
    diff = float(np.abs(logits - exp["logits"]).max())
    steps = exp["greedy_ids"].shape[1] - 5 if "greedy_logits" not in exp else exp["greedy_logits"].shape[1]
    prompt = exp["greedy_ids"][0, :exp["greedy_ids"].shape[1] - steps].tolist()
    toks, step_logits, _ = model.greedy(prompt, steps)
    want = exp["greedy_ids"][0, len(prompt):].tolist()
    ok = diff <= 1e-5 * scale and toks == want
    print(f"{'ok  ' if ok else 'FAIL'} {name} numpy decoders + reference reproduce expected.safetensors: logits max "
          f"|diff| {diff:.3e} (max|logit| {scale:.3f}), greedy {toks}")
    if not ok:
        problems.append("numpy reference")
    expected = os.path.join(a.work, "expected.safetensors")
    ref.write_safetensors(expected, {
        "input_ids": exp["input_ids"].astype(np.int64), "logits": exp["logits"].astype(np.float32),
        "greedy_ids": exp["greedy_ids"].astype(np.int64), "greedy_logits": step_logits[None].astype(np.float32)})
    print(f"     {name}: {len(packed)} Linears stored as integer codes, {len(fp8)} as FP8")

    # 2-4. The two ways in; the 1e-4 x max|logit| rule (check_quant.js scales its tolerance by max(1, max|logit|)).
    rel = float(a.rel_tol) if a.rel_tol else 1e-4 * scale / max(1.0, scale)
    requant = tuple(float(x) for x in a.requant_l2.split(",")) if a.requant_l2 else None
    opts = a.opts.split()
    one = os.path.join(a.work, "one", "model.onnx")
    os.makedirs(os.path.dirname(one))
    r = subprocess.run([a.archc, "--config", os.path.join(ckpt, "config.json"), "--weights", ckpt + "/",
                        "-emit=onnx", "-o", one] + opts)
    if r.returncode != 0:
        print(f"FAIL {name}: archc --config --weights exited with {r.returncode}")
        return 1
    ops, requantized = check_model(f"{name} (--config --weights)", one, weights, packed, fp8, problems, requant)
    if requant and requantized:
        # --quant changed the float Linears: the expected run is the reference over the weights as the model
        # stores them (the packed ones exact, the others read back).
        stored = dict(weights)
        stored.update(requantized)
        rm = ref.Model(ref_cfg, {k: np.asarray(v, np.float64) if np.issubdtype(np.asarray(v).dtype, np.floating)
                                 else v for k, v in stored.items()}, family)
        toks, step_logits, _ = rm.greedy(prompt, steps)
        ref.write_safetensors(expected, {
            "input_ids": exp["input_ids"].astype(np.int64),
            "logits": rm.forward(exp["input_ids"]).astype(np.float32),
            "greedy_ids": np.asarray([prompt + toks], np.int64),
            "greedy_logits": step_logits[None].astype(np.float32)})
        print(f"     {name}: expected run re-computed over the {len(requantized)} weights --quant quantized: "
              f"greedy {toks}")
    if a.expect_op and a.expect_op not in ops:
        print(f"FAIL {name}: the model has no {a.expect_op} node ({sorted(ops)})")
        problems.append("expected op")
    rc = subprocess.run([a.node, os.path.join(HERE, "..", "ort", "check_quant.js"), "--archc", a.archc,
                         "--arch", "auto", "--config", os.path.join(ckpt, "config.json"), "--weights", ckpt + "/",
                         "--work", os.path.join(a.work, "ort"), "--expected", expected, "--opts", a.opts,
                         "--name", f"{name} (--config --weights)", "--rel-tol", repr(rel)]).returncode
    if rc:
        problems.append("ONNX Runtime (--config --weights)")

    folder = os.path.join(a.work, "folder")
    r = subprocess.run([a.archc, ckpt + "/", "-emit=onnx", "-o", folder + "/", "--data-chunk-size=65536"] + opts)
    if r.returncode != 0:
        print(f"FAIL {name}: archc C/ -o OUT/ exited with {r.returncode}")
        return 1
    onnx_dir = os.path.join(folder, "onnx")
    files = sorted(f for f in os.listdir(onnx_dir) if f.endswith(".onnx") and not f.endswith(".genai.onnx"))
    main_model = os.path.join(onnx_dir, a.file) if a.file else os.path.join(onnx_dir, files[0])
    if not os.path.exists(main_model):
        print(f"FAIL {name}: the folder holds {files}, not {a.file}")
        return 1
    check_model(f"{name} (model folder, onnx/{os.path.basename(main_model)})", main_model, weights, packed, fp8,
                problems, requant)
    with open(os.path.join(folder, "config.json")) as f:
        out_cfg = json.load(f)
    if "quantization_config" in out_cfg:
        problems.append("the folder's config.json keeps quantization_config")
    genai_model = main_model
    two = main_model[:-len(".onnx")] + ".genai.onnx"
    if os.path.exists(two):
        genai_model = two
    genai = os.path.join(folder, "genai_config.json")
    if not os.path.exists(genai):
        problems.append("the folder has no genai_config.json")
    else:
        with open(genai) as f:
            decoder = json.load(f)["model"]["decoder"]["filename"]
        if decoder != os.path.relpath(genai_model, folder):
            problems.append(f"genai_config.json runs {decoder}, not {os.path.relpath(genai_model, folder)}")
    print(f"{'ok  ' if not problems else '    '} {name} model folder: onnx/{os.path.basename(main_model)}, "
          f"genai_config.json runs {os.path.relpath(genai_model, folder)}")
    rc = subprocess.run([a.node, os.path.join(HERE, "..", "ort", "check_quant.js"), "--archc", a.archc,
                         "--arch", "auto", "--config", os.path.join(ckpt, "config.json"), "--weights", ckpt + "/",
                         "--work", os.path.join(a.work, "ort-folder"), "--expected", expected, "--model",
                         genai_model, "--name", f"{name} (model folder)", "--rel-tol", repr(rel)]).returncode
    if rc:
        problems.append("ONNX Runtime (model folder)")
    if a.tjs == "auto":
        base = os.path.basename(main_model)
        a.tjs = {"model.onnx": "fp32", "model_fp16.onnx": "fp16"}.get(base, base[len("model_"):-len(".onnx")])
    no_class = False
    with open(os.path.join(HERE, "..", "skips.txt")) as f:
        for line in f:
            parts = line.split(None, 3)
            if len(parts) >= 3 and parts[:3] == ["tjs", out_cfg.get("model_type", ""), "no-class"]:
                no_class = True
                print(f"     {name}: transformers.js is not run: {parts[3].strip()} (tests/skips.txt, confirmed by "
                      f"the tjs.* test of that family)")
    if a.tjs and not no_class:
        rc = subprocess.run([a.node, os.path.join(HERE, "..", "transformersjs", "check_quant_folder.mjs"),
                             "--folder", folder, "--dtype", a.tjs, "--expected", expected,
                             "--name", name]).returncode
        if rc:
            problems.append("transformers.js")
    for p in problems:
        print(f"FAIL {name}: {p}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
