#!/usr/bin/env python3
"""One-run ONNX Runtime benchmark of archc's models (CPU), as ratios.

Measures in one run, round by round (bench/ort_bench.js), so that every
ratio compares figures taken under the same machine load:
  - memory-read bandwidth: a small C probe (bench/bandwidth_probe.c,
    compiled here with cc) and ONNX Runtime's own large GEMV;
  - ONNX Runtime's sgemm rate;
  - a dense decoder (Qwen2.5-0.5B, random f32 weights) per --target:
    decode per token at past 128 and 1024 against the memory-bound limit
    (bytes read per token / bandwidth), decode at 1024 against 128 (steps
    at the two lengths interleaved: the median ratio of adjacent steps),
    each with every output returned to JavaScript and with only the logits
    fetched (the graph's own work), and a prefill against the sgemm rate;
  - bench/moe_bench.py (MoE against a dense model of the same activated
    parameters, node counts and emission times), when present.
Ratios are computed within each round, then the median over rounds is
reported. Usage:
  /usr/bin/python3 bench/run_ort_benchmarks.py [--rounds 5] [--threads 2]
      [--prefill 512] [--targets portable,ort] [--json out.json]
"""
import argparse
import json
import os
import statistics
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCH = os.path.join(ROOT, "bench")
NODE = os.environ.get("ARCHC_NODE", "node")
ELEM_BYTES = {TensorProto.FLOAT: 4, TensorProto.FLOAT16: 2,
              TensorProto.BFLOAT16: 2, TensorProto.INT64: 8,
              TensorProto.INT32: 4, TensorProto.INT8: 1, TensorProto.UINT8: 1,
              TensorProto.BOOL: 1, TensorProto.DOUBLE: 8}


def matmul_model(path, m, k, n, seed):
    """[m, k] x [k, n] f32 MatMul with random weights (external data)."""
    rng = np.random.default_rng(seed)
    w = rng.standard_normal((k, n), dtype=np.float32) * 0.01
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])], "mm",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [m, k])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [m, n])],
        [numpy_helper.from_array(w, "w")])
    model = helper.make_model(graph,
                              opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save_model(model, path, save_as_external_data=True,
                    location=os.path.basename(path) + ".data",
                    size_threshold=0)


def tensor_bytes(t):
    n = 1
    for d in t.dims:
        n *= d
    return n * ELEM_BYTES.get(t.data_type, 4)


def model_facts(path):
    """Bytes a decode step reads (weights; a table only Gather reads counts
    one row), matmul weight elements (prefill FLOPs), the cache layout, the
    node count."""
    model = onnx.load(path, load_external_data=False)
    g = model.graph
    inits = {t.name: t for t in g.initializer}
    readers = {}
    for node in g.node:
        for i, x in enumerate(node.input):
            if x in inits:
                readers.setdefault(x, set()).add((node.op_type, i))
    weight_bytes = 0
    matmul_elems = 0
    for name, t in inits.items():
        ops = {op for op, _ in readers.get(name, ())}
        size = tensor_bytes(t)
        if ops and ops <= {"Gather"}:
            weight_bytes += size // max(t.dims[0], 1)  # one row per token
        else:
            weight_bytes += size
        if ops & {"Gemm", "MatMul", "FusedMatMul"} and len(t.dims) == 2:
            matmul_elems += t.dims[0] * t.dims[1]
    cache_per_token = 0
    layers = 0
    for x in g.input:
        if x.name.startswith("past_key_values."):
            dims = x.type.tensor_type.shape.dim
            per = ELEM_BYTES.get(x.type.tensor_type.elem_type, 4)
            for i, d in enumerate(dims):
                if i >= 1 and d.HasField("dim_value"):
                    per *= d.dim_value
            cache_per_token += per
            layers += x.name.endswith(".key")
    return {"weight_bytes": weight_bytes, "matmul_elems": matmul_elems,
            "cache_bytes_per_token": cache_per_token, "nodes": len(g.node),
            "layers": layers}


def emit(archc, config, target, out, dtype="f32"):
    t0 = time.monotonic()
    subprocess.run([archc, "--config", config, "-emit=onnx", "--init=random",
                    "--target=" + target, "--dtype=" + dtype,
                    "--no-genai-config", "-q", "-o", out], check=True)
    return time.monotonic() - t0


def med(xs):
    return statistics.median(xs) if xs else float("nan")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--archc", default=os.path.join(ROOT, "build", "bin",
                                                    "archc"))
    ap.add_argument("--config", default=os.path.join(
        ROOT, "archs", "configs", "bench", "qwen2.5-0.5b.json"))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--decodes", type=int, default=5,
                    help="decode steps per past length and round")
    ap.add_argument("--pasts", default="128,1024")
    ap.add_argument("--prefill", type=int, default=512)
    ap.add_argument("--targets", default="portable,ort")
    ap.add_argument("--compare-archc", default=None,
                    help="also time the portable model another archc emits "
                    "(e.g. a build of main), labelled 'compare', in the same "
                    "rounds")
    ap.add_argument("--gemv-mib", type=int, default=1024,
                    help="GEMV weight size (square, f32)")
    ap.add_argument("--probe-mib", type=int, default=1024)
    ap.add_argument("--no-moe", action="store_true",
                    help="skip bench/moe_bench.py even when present")
    ap.add_argument("--work", default=None)
    ap.add_argument("--json", default=None, help="also write results here")
    args = ap.parse_args()
    if args.work:
        os.makedirs(args.work, exist_ok=True)
        run(args, args.work)
        return
    # The models (several GB) go with the run unless --work keeps them.
    work = tempfile.mkdtemp(prefix="archc-ortbench-")
    try:
        run(args, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def run(args, work):
    """Builds the probes and models under `work`, times them, prints."""
    probe = os.path.join(work, "bandwidth_probe")
    subprocess.run(["cc", "-O3", "-march=native", "-pthread",
                    os.path.join(BENCH, "bandwidth_probe.c"), "-o", probe],
                   check=True)
    side = int((args.gemv_mib * 1024 * 1024 / 4) ** 0.5)
    gemv = os.path.join(work, "gemv.onnx")
    matmul_model(gemv, 1, side, side, 1)
    sg_m, sg_k, sg_n = 512, 2048, 2048
    sgemm = os.path.join(work, "sgemm.onnx")
    matmul_model(sgemm, sg_m, sg_k, sg_n, 2)

    pasts = [int(p) for p in args.pasts.split(",")]
    with open(args.config) as f:
        cfg = json.load(f)
    heads = cfg["num_attention_heads"]
    q_width = heads * cfg.get("head_dim", cfg["hidden_size"] // heads)
    models, facts, emit_s = [], {}, {}
    # (label, archc, target): the --targets, then the comparison build.
    variants = [(t, args.archc, t) for t in args.targets.split(",")]
    if args.compare_archc:
        variants.append(("compare", args.compare_archc, "portable"))
    labels = [v[0] for v in variants]
    for label, archc, target in variants:
        path = os.path.join(work, "dense-" + label, "model.onnx")
        emit_s[label] = emit(archc, args.config, target, path)
        facts[label] = model_facts(path)
        models.append({"label": label, "path": path, "pasts": pasts,
                       "decodes": args.decodes, "prefill": args.prefill,
                       "vocab": cfg["vocab_size"]})
    plan = {"threads": args.threads, "rounds": args.rounds,
            "probe": {"bin": probe, "mib": args.probe_mib, "passes": 5},
            "gemv": {"model": gemv, "k": side, "runs": 5},
            "sgemm": {"model": sgemm, "m": sg_m, "k": sg_k, "runs": 3},
            "models": models}
    plan_path = os.path.join(work, "plan.json")
    with open(plan_path, "w") as f:
        json.dump(plan, f)
    run = subprocess.run([NODE, os.path.join(BENCH, "ort_bench.js"),
                          plan_path], capture_output=True, text=True)
    if run.returncode != 0:
        sys.exit("ort_bench.js failed:\n" + run.stderr[-4000:])
    raw = json.loads(run.stdout)

    gemv_bytes = side * side * 4
    sgemm_flops = 2 * sg_m * sg_k * sg_n
    per_round = []
    for r in raw["rounds"]:
        row = {"probe_gbs": r["probe_gbs"],
               "gemv_gbs": gemv_bytes / (r["gemv_ms"] * 1e6),
               "sgemm_gflops": sgemm_flops / (r["sgemm_ms"] * 1e6)}
        bw = {"probe": row["probe_gbs"], "gemv": row["gemv_gbs"]}
        for target, m in r["models"].items():
            f = facts[target]
            # "decode": every output returned to JavaScript; "decode_graph"
            # (suffix "_graph"): only the logits fetched, the graph's work.
            for mode, sfx, pair in (("decode", "", "last_vs_first"),
                                    ("decode_graph", "_graph",
                                     "graph_last_vs_first")):
                for past, ms in m[mode].items():
                    read = (f["weight_bytes"] +
                            f["cache_bytes_per_token"] * int(past))
                    row[f"{target}.decode{past}{sfx}_ms"] = ms
                    for src, gbs in bw.items():
                        row[f"{target}.decode{past}{sfx}_vs_{src}"] = (
                            ms * 1e6 / (read / gbs))
                if len(pasts) > 1:
                    # Median over step pairs (a step at each length, back
                    # to back), not a ratio of medians: both share the load.
                    row[f"{target}.decode{pasts[-1]}{sfx}_vs_{pasts[0]}"] = (
                        m[pair])
            if "prefill_ms" in m:
                p = args.prefill
                h = f["layers"]
                # Matmul FLOPs (every token's logits), plus attention's two
                # products over the full [S, S] grid per head.
                flops = 2 * f["matmul_elems"] * p
                flops += 4 * q_width * p * p * h
                row[f"{target}.prefill_ms"] = m["prefill_ms"]
                row[f"{target}.prefill_vs_sgemm"] = (
                    m["prefill_ms"] * 1e6 / (flops / row["sgemm_gflops"]))
        if "compare" in r["models"]:
            # Each model against the comparison build, step for step.
            base = r["models"]["compare"]
            for target, m in r["models"].items():
                if target == "compare":
                    continue
                for past, ms in m["decode"].items():
                    row[f"{target}.decode{past}_vs_compare"] = (
                        ms / base["decode"][past])
                if "prefill_ms" in m:
                    row[f"{target}.prefill_vs_compare"] = (
                        m["prefill_ms"] / base["prefill_ms"])
        per_round.append(row)
    summary = {k: med([r[k] for r in per_round if k in r])
               for k in per_round[0]}

    result = {"machine": os.uname().nodename, "threads": args.threads,
              "rounds": args.rounds, "prefill": args.prefill,
              "facts": facts, "emit_s": emit_s, "load_s": raw["load_s"],
              "median": summary, "per_round": per_round}

    moe_bench = None
    if not args.no_moe:
        sys.path.insert(0, BENCH)
        try:
            import moe_bench  # written by the MoE work; optional
        except ImportError:
            moe_bench = None
        if moe_bench is not None:
            # bench/moe_bench.py's entry points: graph sizes and emission
            # times of the real MoE configs, MoE vs dense per target.
            result["moe"] = {}
            if hasattr(moe_bench, "node_counts"):
                result["moe"]["sizes"] = moe_bench.node_counts(
                    archc=args.archc, rounds=args.rounds,
                    targets=args.targets.split(","))
            if hasattr(moe_bench, "moe_vs_dense"):
                result["moe"]["speed"] = [
                    moe_bench.moe_vs_dense(archc=args.archc,
                                           rounds=args.rounds,
                                           threads=args.threads, target=t)
                    for t in args.targets.split(",")]

    print(f"threads {args.threads}, rounds {args.rounds} (medians; ratios "
          f"taken within a round)")
    print(f"  C probe read bandwidth      {summary['probe_gbs']:8.2f} GB/s")
    print(f"  ORT GEMV read bandwidth     {summary['gemv_gbs']:8.2f} GB/s "
          f"({gemv_bytes / 1e9:.2f} GB of weights)")
    print(f"  ORT sgemm                   {summary['sgemm_gflops']:8.2f} "
          f"GFLOP/s ({sg_m}x{sg_k}x{sg_n})")
    for target in labels:
        f = facts[target]
        print(f"  {target}: {f['nodes']} nodes, {f['weight_bytes'] / 1e9:.3f}"
              f" GB weights read per token, cache "
              f"{f['cache_bytes_per_token']} B/token, session "
              f"{raw['load_s'][target]:.2f} s, emitted in "
              f"{emit_s[target]:.2f} s")
        for sfx, how in (("", "every output returned to JavaScript"),
                         ("_graph", "logits only fetched (the graph's work)")):
            print(f"    decode, {how}:")
            for past in pasts:
                print(f"      at past {past:5d}: "
                      f"{summary[f'{target}.decode{past}{sfx}_ms']:8.1f} "
                      f"ms/token = "
                      f"{summary[f'{target}.decode{past}{sfx}_vs_gemv']:.2f}x"
                      f" the limit at the GEMV bandwidth, "
                      f"{summary[f'{target}.decode{past}{sfx}_vs_probe']:.2f}"
                      f"x at the probe's")
            if len(pasts) > 1:
                k = f"{target}.decode{pasts[-1]}{sfx}_vs_{pasts[0]}"
                print(f"      past {pasts[-1]} / past {pasts[0]} (median of "
                      f"adjacent steps): {summary[k]:.3f}")
        vs = [f"decode@{p} {summary[f'{target}.decode{p}_vs_compare']:.3f}"
              for p in pasts if f"{target}.decode{p}_vs_compare" in summary]
        if f"{target}.prefill_vs_compare" in summary:
            vs.append(f"prefill {summary[f'{target}.prefill_vs_compare']:.3f}")
        if vs:
            print("    vs compare (per-round ratio, median): " + ", ".join(vs))
        if f"{target}.prefill_ms" in summary:
            print(f"    prefill {args.prefill}: "
                  f"{summary[f'{target}.prefill_ms']:8.1f} ms = "
                  f"{summary[f'{target}.prefill_vs_sgemm']:.2f}x the sgemm "
                  f"bound")
    moe = result.get("moe", {})
    if "sizes" in moe and hasattr(moe_bench, "print_sizes"):
        moe_bench.print_sizes(moe["sizes"])
    for r in moe.get("speed", []):
        if hasattr(moe_bench, "print_speed"):
            moe_bench.print_speed(r)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
