#!/usr/bin/env python3
"""Checks what ONNX Runtime makes of archc's decoder graph (CPU, level all).

Usage: check_ort_graph.py ARCHC ARCH CONFIG WORKDIR [--target T]
Emits the model (--init=random), lets ONNX Runtime (onnxruntime-node)
optimize it and save the result, and checks, for the decode-time costs of
issue 8:
  - every RMSNorm became one SimplifiedLayerNormalization kernel (no Pow or
    ReduceMean left); --target=ort emits that kernel itself;
  - attention reads the cache through FusedMatMul (the keys' Transpose
    folded in), with no 5-D matmul operand (no broadcast over the query
    groups) and no Expand;
  - every present.* output is written by its Concat (no Identity copy), and
    so is logits by its producer;
  - shape arithmetic is shared: twice the layers, no more Shape nodes.
Exit 0 = pass, 1 = fail, 77 = onnxruntime-node absent.
"""
import collections
import json
import os
import subprocess
import sys

import onnx
from onnx import shape_inference

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
ORT = os.path.join(ROOT, "tests", "ort", "node_modules", "onnxruntime-node")
SAVE = """
const ort = require(process.argv[1]);
ort.InferenceSession.create(process.argv[2], {graphOptimizationLevel: 'all',
  intraOpNumThreads: 1, optimizedModelFilePath: process.argv[3],
  logSeverityLevel: 3}).catch((e) => { console.error(e); process.exit(1); });
"""


def emit(archc, arch, config, target, model):
    subprocess.run([archc, arch, "--config", config, "-emit=onnx",
                    "--init=random", "--target=" + target,
                    "--no-genai-config", "-q", "--embed-weights", "-o",
                    model], check=True)


def main(argv):
    archc, arch, config, work = argv[:4]
    target = argv[argv.index("--target") + 1] if "--target" in argv \
        else "portable"
    if not os.path.isdir(ORT):
        print("SKIP: onnxruntime-node not installed")
        return 77
    os.makedirs(work, exist_ok=True)
    model = os.path.join(work, "model.onnx")
    optimized = os.path.join(work, "optimized.onnx")
    emit(archc, arch, config, target, model)
    subprocess.run(["node", "-e", SAVE, ORT, model, optimized], check=True)
    src = shape_inference.infer_shapes(onnx.load(model))
    opt = onnx.load(optimized)
    failures = []

    def check(ok, what):
        print(("ok   " if ok else "FAIL ") + what)
        if not ok:
            failures.append(what)

    layers = sum(1 for x in src.graph.input if x.name.endswith(".key"))
    src_ops = collections.Counter(n.op_type for n in src.graph.node)
    opt_ops = collections.Counter(n.op_type for n in opt.graph.node)
    if target == "ort":
        # ONNX Runtime's own kernels, emitted directly: the norms of a
        # residual sum as SkipSimplifiedLayerNormalization (the first
        # layer's input norm has no residual).
        skips = src_ops["SkipSimplifiedLayerNormalization"]
        norms = src_ops["SimplifiedLayerNormalization"] + skips
        check(norms == 2 * layers + 1 and skips == 2 * layers and
              src_ops["Pow"] == 0,
              f"{norms} RMSNorms emitted as (Skip)SimplifiedLayer"
              f"Normalization, {skips} with the residual ({layers} layers)")
    else:
        norms = src_ops["Pow"]
        check(norms == 2 * layers + 1,
              f"{norms} RMSNorms emitted as Pow/ReduceMean/Add/Sqrt/Div "
              f"({layers} layers)")
    check(opt_ops["SimplifiedLayerNormalization"] +
          opt_ops["SkipSimplifiedLayerNormalization"] == norms and
          opt_ops["Pow"] == 0 and opt_ops["ReduceMean"] == 0,
          f"ONNX Runtime runs each as one kernel: {dict(opt_ops)}")
    check(opt_ops["FusedMatMul"] >= layers,
          f"{opt_ops['FusedMatMul']} FusedMatMul (keys' Transpose folded)")
    ranks = {}
    for vi in list(src.graph.value_info) + list(src.graph.input):
        ranks[vi.name] = len(vi.type.tensor_type.shape.dim)
    five = [n.name for n in src.graph.node if n.op_type == "MatMul" and
            any(ranks.get(x, 0) > 4 for x in n.input)]
    check(not five, f"no 5-D (broadcast) attention matmul: {five[:3]}")
    check(src_ops["Expand"] == 0, "no Expand of keys or values")
    producers = {o: n.op_type for n in src.graph.node for o in n.output}
    outs = {o.name: producers.get(o.name) for o in src.graph.output}
    copies = [o for o, p in outs.items() if p == "Identity"]
    check(not copies, f"outputs written in place, no Identity: {copies[:3]}")
    check(all(p == "Concat" for o, p in outs.items()
              if o.startswith("present.")), "present.* produced by Concat")
    # The same model with twice the layers has no more shape arithmetic.
    with open(config) as f:
        cfg = json.load(f)
    cfg["num_hidden_layers"] = 2 * cfg["num_hidden_layers"]
    deeper = os.path.join(work, "deeper.json")
    with open(deeper, "w") as f:
        json.dump(cfg, f)
    deep_model = os.path.join(work, "deeper.onnx")
    emit(archc, arch, deeper, target, deep_model)
    deep_ops = collections.Counter(n.op_type
                                   for n in onnx.load(deep_model).graph.node)
    check(deep_ops["Shape"] == src_ops["Shape"],
          f"{src_ops['Shape']} Shape nodes for {layers} layers, "
          f"{deep_ops['Shape']} for {2 * layers} (shared)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
