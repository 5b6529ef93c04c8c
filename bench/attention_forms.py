#!/usr/bin/env python3
"""One attention layer's decode step in ONNX Runtime, in four forms.

Builds single-layer models (Qwen2.5-0.5B heads by default: 14 query heads,
2 KV heads, head_dim 64, f32, batch 1) and times one decode step at each past
length with onnxruntime-node (CPU, 2 threads), rounds interleaved:
  five  queries [B, Hkv, G, S, D] against keys [B, Hkv, 1, D, T]: the
        broadcast batched matmul archc emitted before issue 8;
  four  queries [B, Hkv, G*S, D] against keys [B, Hkv, D, T] (archc now);
  gqa   com.microsoft GroupQueryAttention (separate past/present buffers);
  att23 the standard Attention of opset 23 (q/kv_num_heads, past inputs).
All four append the new key/value to the past (present outputs) and are
checked to agree; each call returns every output to JavaScript. Two more
timings split what a longer past costs: the 4-D form with only its output
fetched (the presents computed, not copied out by the binding), and a model
of the two cache Concats alone, both ways. The figures behind
docs/decisions.md ("Decode at the memory bound"). Exits 1 when the forms'
outputs (o and the presents) disagree beyond --tolerance; ctest
bench.attention_forms runs it so, with a few calls. Usage:
attention_forms.py [--pasts 128,1024] [--threads 2] [--calls 100]
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
const ort = require(process.argv[1]);
const [dir, H, KV, D, threads] = [process.argv[2], ...process.argv.slice(3, 7).map(Number)];
const pasts = process.argv[7].split(',').map(Number), calls = Number(process.argv[8]);
const med = (x) => { x = [...x].sort((a, b) => a - b); return x[x.length >> 1]; };
const t = (shape) => { const n = shape.reduce((a, b) => a * b, 1); const a = new Float32Array(n);
  for (let i = 0; i < n; i++) a[i] = Math.sin(i) * 0.1; return new ort.Tensor('float32', a, shape); };
(async () => {
  const forms = ['five', 'four', 'gqa', 'att23'], ss = {};
  // [label, model, fetches]: the four forms, then the split of the 4-D one.
  const runs = forms.map((n) => [n, n, undefined]).concat([['four_o', 'four', ['o']],
    ['concat', 'concat', undefined], ['concat_o', 'concat', ['o']]]);
  for (const n of forms.concat(['concat'])) ss[n] = await ort.InferenceSession.create(dir + '/' + n + '.onnx',
    { intraOpNumThreads: threads, graphOptimizationLevel: 'all' });
  const out = {};
  for (const P of pasts) {
    const f4 = { q: t([1, 1, H, D]), k: t([1, 1, KV, D]), v: t([1, 1, KV, D]), pk: t([1, KV, P, D]), pv: t([1, KV, P, D]) };
    const f3 = { q: t([1, 1, H * D]), k: t([1, 1, KV * D]), v: t([1, 1, KV * D]), pk: f4.pk, pv: f4.pv };
    const fg = { q: t([1, 1, H * D]), k: t([1, 1, KV * D]), v: t([1, 1, KV * D]), pk: f4.pk, pv: f4.pv,
      seqlens: new ort.Tensor('int32', Int32Array.from([P]), [1]), total: new ort.Tensor('int32', Int32Array.from([P + 1]), [1]) };
    const res = {}, last = {};
    for (let r = 0; r < 5; r++) for (const [n, model, fetches] of runs) {
      const ts = [];
      const feeds = n === 'gqa' ? fg : n === 'att23' ? f3 : f4;
      for (let i = 0; i < calls; i++) { const s = process.hrtime.bigint(); last[n] = await ss[model].run(feeds, fetches); ts.push(Number(process.hrtime.bigint() - s) / 1e3); }
      (res[n] = res[n] || []).push(med(ts));
    }
    // Every form's outputs against the 4-D form's (the Concats-alone model
    // only in its presents: its `o` is the query passed through).
    let diff = 0;
    for (const n of ['five', 'gqa', 'att23', 'four_o', 'concat'])
      for (const o of ['o', 'present.k', 'present.v']) {
        if (!last[n][o] || (n === 'concat' && o === 'o')) continue;
        const a = last.four[o].data, b = last[n][o].data;
        if (a.length !== b.length) diff = Infinity;
        for (let i = 0; i < a.length; i++) diff = Math.max(diff, Math.abs(a[i] - b[i]));
      }
    out[P] = { us: Object.fromEntries(runs.map(([n]) => [n, med(res[n])])), max_diff: diff };
  }
  console.log(JSON.stringify(out));
})();
"""


def build(d, heads, kv, dim):
    g = heads // kv

    def vi(n, shape, t=T.FLOAT):
        return h.make_tensor_value_info(n, t, shape)

    def c(name, vals):
        return h.make_node("Constant", [], [name],
                           value=nh.from_array(np.array(vals, np.int64), name))

    def save(name, nodes, inputs, outputs, inits, domains=()):
        graph = h.make_graph(nodes, name, inputs, outputs, inits)
        m = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)] +
                         list(domains))
        m.ir_version = 8
        onnx.save(m, os.path.join(d, name + ".onnx"))

    ins = [vi("q", ["b", "s", heads, dim]), vi("k", ["b", "s", kv, dim]),
           vi("v", ["b", "s", kv, dim]), vi("pk", ["b", kv, "p", dim]),
           vi("pv", ["b", kv, "p", dim])]
    outs = [vi("o", ["b", "s", heads, dim]), vi("present.k", ["b", kv, "t", dim]),
            vi("present.v", ["b", kv, "t", dim])]
    scale = nh.from_array(np.array(dim ** -0.5, np.float32), "sc")
    common = [
        h.make_node("Transpose", ["k"], ["kt"], perm=[0, 2, 1, 3]),
        h.make_node("Concat", ["pk", "kt"], ["present.k"], axis=2),
        h.make_node("Transpose", ["v"], ["vt"], perm=[0, 2, 1, 3]),
        h.make_node("Concat", ["pv", "vt"], ["present.v"], axis=2),
        h.make_node("Transpose", ["q"], ["qt"], perm=[0, 2, 1, 3]),
        c("so", [0, heads, -1, dim])]
    tail = [h.make_node("Reshape", ["og", "so"], ["o4"]),
            h.make_node("Transpose", ["o4"], ["o"], perm=[0, 2, 1, 3])]
    five = common + [
        c("s5", [0, kv, g, -1, dim]),
        h.make_node("Reshape", ["qt", "s5"], ["q5"]), c("ax2", [2]),
        h.make_node("Unsqueeze", ["present.k", "ax2"], ["k5"]),
        h.make_node("Transpose", ["k5"], ["k5t"], perm=[0, 1, 2, 4, 3]),
        h.make_node("Unsqueeze", ["present.v", "ax2"], ["v5"]),
        h.make_node("MatMul", ["q5", "k5t"], ["s"]),
        h.make_node("Mul", ["s", "sc"], ["ss"]),
        h.make_node("Softmax", ["ss"], ["p"], axis=-1),
        h.make_node("MatMul", ["p", "v5"], ["og"])] + tail
    save("five", five, ins, outs, [scale])
    four = common + [
        c("s4", [0, kv, -1, dim]),
        h.make_node("Reshape", ["qt", "s4"], ["q4"]),
        h.make_node("Transpose", ["present.k"], ["kT"], perm=[0, 1, 3, 2]),
        h.make_node("MatMul", ["q4", "kT"], ["s"]),
        h.make_node("Mul", ["s", "sc"], ["ss"]),
        h.make_node("Softmax", ["ss"], ["p"], axis=-1),
        h.make_node("MatMul", ["p", "present.v"], ["og"])] + tail
    save("four", four, ins, outs, [scale])
    # The cache appends alone: the query passed through as the output.
    concat = common + [h.make_node("Reshape", ["qt", "so"], ["o4"]),
                       h.make_node("Transpose", ["o4"], ["o"],
                                   perm=[0, 2, 1, 3])]
    save("concat", concat, ins, outs, [])
    gins = [vi("q", ["b", "s", heads * dim]), vi("k", ["b", "s", kv * dim]),
            vi("v", ["b", "s", kv * dim]), vi("pk", ["b", kv, "p", dim]),
            vi("pv", ["b", kv, "p", dim]), vi("seqlens", ["b"], T.INT32),
            vi("total", [1], T.INT32)]
    gouts = [vi("o", ["b", "s", heads * dim]),
             vi("present.k", ["b", kv, "t", dim]),
             vi("present.v", ["b", kv, "t", dim])]
    gqa = [h.make_node("GroupQueryAttention",
                       ["q", "k", "v", "pk", "pv", "seqlens", "total"],
                       ["o", "present.k", "present.v"], domain="com.microsoft",
                       num_heads=heads, kv_num_heads=kv, scale=dim ** -0.5)]
    save("gqa", gqa, gins, gouts, [], [h.make_opsetid("com.microsoft", 1)])
    att = [h.make_node("Attention", ["q", "k", "v", "", "pk", "pv"],
                       ["o", "present.k", "present.v"], q_num_heads=heads,
                       kv_num_heads=kv, scale=dim ** -0.5)]
    graph = h.make_graph(att, "att23", gins[:5], gouts)
    m = h.make_model(graph, opset_imports=[h.make_opsetid("", 23)])
    m.ir_version = 10
    onnx.save(m, os.path.join(d, "att23.onnx"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--heads", type=int, default=14)
    ap.add_argument("--kv-heads", type=int, default=2)
    ap.add_argument("--head-dim", type=int, default=64)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--pasts", default="128,1024")
    ap.add_argument("--calls", type=int, default=100,
                    help="calls per form, round and past (median)")
    ap.add_argument("--tolerance", type=float, default=1e-6,
                    help="exit 1 when the forms' outputs differ by more")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        build(d, args.heads, args.kv_heads, args.head_dim)
        ort = os.path.join(ROOT, "tests", "ort", "node_modules",
                           "onnxruntime-node")
        r = subprocess.run(["node", "-e", RUN, ort, d, str(args.heads),
                            str(args.kv_heads), str(args.head_dim),
                            str(args.threads), args.pasts, str(args.calls)],
                           check=True, capture_output=True, text=True)
    res = json.loads(r.stdout)
    print("one layer's decode step (median us): 5-D broadcast / 4-D grouped"
          " / GroupQueryAttention / Attention-23; then the 4-D form with only"
          " its output fetched, the cache Concats alone (every output / only"
          " o)")
    for past, x in res.items():
        u = x["us"]
        print(f"  past {past:>5}: {u['five']:8.1f} / {u['four']:8.1f} / "
              f"{u['gqa']:8.1f} / {u['att23']:8.1f}   (outputs agree within "
              f"{x['max_diff']:.1e});  {u['four_o']:8.1f};  "
              f"{u['concat']:8.1f} / {u['concat_o']:8.1f}")
    worst = max(x["max_diff"] for x in res.values())
    if not worst <= args.tolerance:
        sys.exit(f"the forms disagree: {worst:.2e} > {args.tolerance:.0e}")


if __name__ == "__main__":
    main()
