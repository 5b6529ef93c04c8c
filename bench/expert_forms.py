#!/usr/bin/env python3
"""One MoE layer's experts in ONNX Runtime, in three forms, against dense.

Builds models of E experts' SwiGLU MLPs (the bench MoE's layer by default:
64 experts, hidden 1024, expert intermediate 384, f32) applied to n tokens
each, and times them with onnxruntime-node (CPU, 2 threads), rounds
interleaved:
  row       a Scan over the stacked experts, x [n, D] times w [D, 2I]: the
            weight is the sgemm's B operand, packed on every call;
  columnar  the same Scan with the weights stored transposed, w [2I, D]
            times x^T [D, n]: the weight is the A operand, read in place
            (the form archc's MoE body uses);
  unrolled  one MatMul pair per expert on constant weights, which ONNX
            Runtime pre-packs at session creation (archc before issue 8);
  dense     the dense equivalent: n*E/k tokens through one MLP of
            intermediate k*I (the same FLOPs), its weights pre-packed.
Reports per form the median ms, GFLOP/s and the rate the expert weights
stream at (n = 1 is a GEMV: the weight-read bandwidth ONNX Runtime reaches),
and the lower bound that streaming every expert's weights once at that rate
puts on a prefill that touches all of them. The figures behind
docs/performance.md ("MoE prefill: what bounds it"). Exits 1 when the forms'
outputs disagree beyond --tolerance; ctest bench.expert_forms runs it so on
a small layer. Usage: expert_forms.py [--tokens 1,16,32,128] [--calls 10]
[--experts 64] [--top-k 8] [--hidden 1024] [--intermediate 384]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto as T, helper as h, numpy_helper as nh

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

RUN = r"""
const [ortPath, dir, tokens, threads, calls] = process.argv.slice(1);
const ort = require(ortPath);
const med = (x) => { x = [...x].sort((a, b) => a - b); return x[x.length >> 1]; };
(async () => {
  const out = {};
  for (const n of tokens.split(',').map(Number)) {
    const forms = ['row', 'columnar', 'unrolled', 'dense'], ss = {}, ms = {}, ys = {};
    for (const f of forms)
      ss[f] = await ort.InferenceSession.create(`${dir}/${f}_${n}.onnx`, {
        intraOpNumThreads: Number(threads), interOpNumThreads: 1, graphOptimizationLevel: 'all' });
    const feed = (s) => { const m = s.inputMetadata[0], size = m.shape.reduce((a, b) => a * b, 1);
      const a = new Float32Array(size); for (let i = 0; i < size; i++) a[i] = Math.sin(i);
      return { X: new ort.Tensor('float32', a, m.shape) }; };
    for (let r = 0; r < 5; r++) for (const f of forms) { const x = feed(ss[f]), ts = [];
      for (let i = 0; i < Number(calls); i++) { const t = process.hrtime.bigint();
        ys[f] = (await ss[f].run(x)).Y.data; ts.push(Number(process.hrtime.bigint() - t) / 1e6); }
      if (r > 0) (ms[f] = ms[f] || []).push(med(ts)); }
    let diff = 0;
    for (const f of ['columnar', 'unrolled'])
      for (let i = 0; i < ys.row.length; i++) diff = Math.max(diff, Math.abs(ys.row[i] - ys[f][i]));
    // Every expert's first token, for the caller's own reference.
    const d = ys.row.length / (ss.row.outputMetadata[0].shape[0] * n), first = [];
    for (let e = 0; e < ys.row.length / (n * d); e++) first.push(Array.from(ys.row.subarray(e * n * d, e * n * d + d)));
    out[n] = { ms: Object.fromEntries(forms.map((f) => [f, med(ms[f])])), max_diff: diff, first };
  }
  console.log(JSON.stringify(out));
})();
"""


def scan_model(form, w1, w2, n):
    """A Scan over the stacked experts; every expert gets the same n tokens."""
    e, d, two_i = w1.shape
    i = two_i // 2
    split = [nh.from_array(np.array([i, i], np.int64), "sp")]
    if form == "row":
        body_nodes = [h.make_node("MatMul", ["X", "w1"], ["g"]),
                      h.make_node("Split", ["g", "sp"], ["a", "b"], axis=1)]
        tail = [h.make_node("MatMul", ["hh", "w2"], ["y"])]
        inits = [nh.from_array(w1, "W1"), nh.from_array(w2, "W2")]
        top = []
    else:
        body_nodes = [h.make_node("MatMul", ["w1", "XT"], ["g"]),
                      h.make_node("Split", ["g", "sp"], ["a", "b"], axis=0)]
        tail = [h.make_node("MatMul", ["w2", "hh"], ["yt"]),
                h.make_node("Transpose", ["yt"], ["y"], perm=[1, 0])]
        inits = [nh.from_array(np.ascontiguousarray(w1.transpose(0, 2, 1)),
                               "W1"),
                 nh.from_array(np.ascontiguousarray(w2.transpose(0, 2, 1)),
                               "W2")]
        top = [h.make_node("Transpose", ["X"], ["XT"], perm=[1, 0])]
    swiglu = [h.make_node("Sigmoid", ["a"], ["sa"]),
              h.make_node("Mul", ["a", "sa"], ["ga"]),
              h.make_node("Mul", ["ga", "b"], ["hh"])]
    vi = lambda name: h.make_tensor_value_info(name, T.FLOAT, None)
    body = h.make_graph(body_nodes + swiglu + tail, "expert",
                        [vi("w1"), vi("w2")], [vi("y")], initializer=split)
    top.append(h.make_node("Scan", ["W1", "W2"], ["Y"], body=body,
                           num_scan_inputs=2))
    return graph(form, top, inits, [n, d], [e, n, d])


def unrolled_model(w1, w2, n):
    e, d, two_i = w1.shape
    i = two_i // 2
    nodes, inits = [], [nh.from_array(np.array([i, i], np.int64), "sp"),
                        nh.from_array(np.array([0], np.int64), "z")]
    for x in range(e):
        nodes += [h.make_node("MatMul", ["X", f"w1_{x}"], [f"g{x}"]),
                  h.make_node("Split", [f"g{x}", "sp"], [f"a{x}", f"b{x}"],
                              axis=1),
                  h.make_node("Sigmoid", [f"a{x}"], [f"sa{x}"]),
                  h.make_node("Mul", [f"a{x}", f"sa{x}"], [f"ga{x}"]),
                  h.make_node("Mul", [f"ga{x}", f"b{x}"], [f"hh{x}"]),
                  h.make_node("MatMul", [f"hh{x}", f"w2_{x}"], [f"y{x}"]),
                  h.make_node("Unsqueeze", [f"y{x}", "z"], [f"u{x}"])]
        inits += [nh.from_array(w1[x], f"w1_{x}"),
                  nh.from_array(w2[x], f"w2_{x}")]
    nodes.append(h.make_node("Concat", [f"u{x}" for x in range(e)], ["Y"],
                             axis=0))
    return graph("unrolled", nodes, inits, [n, d], [e, n, d])


def dense_model(w1, w2, tokens):
    d, two_ki = w1.shape
    ki = two_ki // 2
    nodes = [h.make_node("MatMul", ["X", "W1"], ["g"]),
             h.make_node("Split", ["g", "sp"], ["a", "b"], axis=1),
             h.make_node("Sigmoid", ["a"], ["sa"]),
             h.make_node("Mul", ["a", "sa"], ["ga"]),
             h.make_node("Mul", ["ga", "b"], ["hh"]),
             h.make_node("MatMul", ["hh", "W2"], ["Y"])]
    inits = [nh.from_array(w1, "W1"), nh.from_array(w2, "W2"),
             nh.from_array(np.array([ki, ki], np.int64), "sp")]
    return graph("dense", nodes, inits, [tokens, d], [tokens, d])


def graph(name, nodes, inits, x_shape, y_shape):
    g = h.make_graph(nodes, name,
                     [h.make_tensor_value_info("X", T.FLOAT, x_shape)],
                     [h.make_tensor_value_info("Y", T.FLOAT, y_shape)],
                     initializer=inits)
    return h.make_model(g, opset_imports=[h.make_opsetid("", 17)])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--experts", type=int, default=64)
    ap.add_argument("--top-k", type=int, default=8)
    ap.add_argument("--hidden", type=int, default=1024)
    ap.add_argument("--intermediate", type=int, default=384)
    ap.add_argument("--tokens", default="1,16,32,128",
                    help="tokens per expert (the dense model gets "
                    "tokens * experts / top-k)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--calls", type=int, default=10,
                    help="calls per form, round and token count (median)")
    ap.add_argument("--tolerance", type=float, default=1e-4,
                    help="exit 1 when the forms' outputs differ by more")
    args = ap.parse_args()
    e, k, d, i = args.experts, args.top_k, args.hidden, args.intermediate
    rng = np.random.default_rng(0)
    w1 = (rng.standard_normal((e, d, 2 * i)) * 0.02).astype(np.float32)
    w2 = (rng.standard_normal((e, i, d)) * 0.02).astype(np.float32)
    # The dense equivalent's weights: k experts' worth, side by side.
    w1d = (rng.standard_normal((d, 2 * k * i)) * 0.02).astype(np.float32)
    w2d = (rng.standard_normal((k * i, d)) * 0.02).astype(np.float32)
    tokens = [int(t) for t in args.tokens.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        for n in tokens:
            for form in ("row", "columnar"):
                onnx.save(scan_model(form, w1, w2, n), f"{tmp}/{form}_{n}.onnx")
            onnx.save(unrolled_model(w1, w2, n), f"{tmp}/unrolled_{n}.onnx")
            onnx.save(dense_model(w1d, w2d, max(1, n * e // k)),
                      f"{tmp}/dense_{n}.onnx")
        ort = os.path.join(ROOT, "tests", "ort", "node_modules",
                           "onnxruntime-node")
        r = subprocess.run(["node", "-e", RUN, ort, tmp, args.tokens,
                            str(args.threads), str(args.calls)],
                           check=True, capture_output=True, text=True)
    res = json.loads(r.stdout)
    # numpy's reference for every expert's first token (the same input).
    x0 = np.sin(np.arange(d, dtype=np.float64))
    g = np.einsum("d,edj->ej", x0, w1.astype(np.float64))
    ref = np.einsum("ei,eid->ed", g[:, :i] / (1 + np.exp(-g[:, :i])) * g[:, i:],
                    w2.astype(np.float64))
    for x in res.values():
        x["max_diff"] = max(x["max_diff"],
                            float(np.abs(np.array(x.pop("first")) - ref).max()))
    weight_bytes = (w1.size + w2.size) * 4
    flops = lambda n: 2 * n * e * 3 * d * i
    print(f"{e} experts, hidden {d}, intermediate {i}, f32 "
          f"({weight_bytes / 1e6:.0f} MB of expert weights), "
          f"{args.threads} threads; median ms (GFLOP/s, GB/s of expert weights)")
    gemv_gbs = None
    for n in tokens:
        x = res[str(n)]
        cells = []
        for form in ("row", "columnar", "unrolled"):
            ms = x["ms"][form]
            cells.append(f"{form} {ms:7.2f} ({flops(n) / ms / 1e6:5.1f}, "
                         f"{weight_bytes / ms / 1e6:5.1f})")
        dn = max(1, n * e // k)
        cells.append(f"dense x{dn} {x['ms']['dense']:7.2f} "
                     f"({flops(n) / x['ms']['dense'] / 1e6:5.1f})")
        print(f"  {n:4d} tokens/expert: " + "  ".join(cells) +
              f"  (agree within {x['max_diff']:.1e})")
        if n == 1:
            gemv_gbs = weight_bytes / min(x["ms"]["columnar"],
                                          x["ms"]["unrolled"]) / 1e6
    if gemv_gbs:
        print(f"  streaming the experts once at the n = 1 rate "
              f"({gemv_gbs:.1f} GB/s) takes {weight_bytes / gemv_gbs / 1e6:.1f}"
              f" ms: the least any prefill that touches every expert spends")
    sys.stdout.flush()
    worst = max(x["max_diff"] for x in res.values())
    if not worst <= args.tolerance:
        sys.exit(f"the forms disagree: {worst:.2e} > {args.tolerance:.0e}")


if __name__ == "__main__":
    main()
