#!/usr/bin/env python3
"""MoE in ONNX Runtime: graph size, emission time, and MoE vs dense speed.

Usage: moe_bench.py [--archc BIN] [--rounds N] [--threads T] [--prefill P]
                    [--decodes D] [--target T,...] [--quant Q] [sizes] [speed]

  sizes   node counts (every node, Loop bodies included) and emission times
          (median of --rounds runs) of the real MoE configs with --init=none
          (Qwen3-30B-A3B, DeepSeek-V4-Flash, Qwen3-235B-A22B), per --target,
          with --quant=Q when given (int4 | int8)
  speed   a 4-layer, 64-expert, top-8 Qwen3-MoE (hidden 1024) against the
          dense Qwen3 with the same activated parameters (intermediate =
          top_k * moe_intermediate), both f32 with random weights, timed in
          the same rounds (bench/quant_bench.js, onnxruntime-node, CPU):
          session creation, prefill of P tokens and decode at past P, as
          MoE / dense ratios of the round medians

bench/run_ort_benchmarks.py imports this module (node_counts, moe_vs_dense)
so that one run reports every figure; results go to docs/performance.md
("MoE in ONNX Runtime").
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable

# (arch, config, node target of issue 8)
SIZE_CASES = [
    ("qwen3_moe", "Qwen3-30B-A3B", 5000),
    ("deepseek_v4", "DeepSeek-V4-Flash", 10000),
    ("qwen3_moe", "Qwen3-235B-A22B", 8000),
]

COUNT_NODES = r"""
import sys, onnx
m = onnx.load(sys.argv[1], load_external_data=False)
def count(g):
    n = 0
    for node in g.node:
        n += 1
        for a in node.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                n += count(a.g)
            for sub in a.graphs:
                n += count(sub)
    return n
print(len(m.graph.node), count(m.graph))
"""


def default_archc():
    return os.path.join(ROOT, "build", "bin", "archc")


def count_nodes(model):
    """(top-level nodes, all nodes including subgraphs) of an ONNX file."""
    out = subprocess.run([PYTHON, "-c", COUNT_NODES, model], check=True,
                         capture_output=True, text=True).stdout.split()
    return int(out[0]), int(out[1])


def emit(archc, arch, config, out, extra=()):
    """Runs archc -emit=onnx; returns its wall time in seconds."""
    cmd = [archc, os.path.join(ROOT, "archs", arch + ".arch"), "--config",
           config, "-emit=onnx", "-o", out, "--no-genai-config"] + list(extra)
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit("command failed: %s\n%s" % (" ".join(cmd), proc.stderr))
    return elapsed


def node_counts(archc=None, rounds=3, targets=("portable",), quant=None):
    """Node counts and median emission time (--init=none) of SIZE_CASES,
    per --target (with --quant=QUANT when given)."""
    archc = archc or default_archc()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for arch, cfg, target in SIZE_CASES:
            config = os.path.join(ROOT, "archs", "configs", cfg + ".json")
            for emit_target in targets:
                out = os.path.join(tmp, cfg + "." + emit_target + ".onnx")
                extra = ["--init=none", "--target=" + emit_target]
                if quant:
                    extra.append("--quant=" + quant)
                times = [emit(archc, arch, config, out, extra)
                         for _ in range(rounds)]
                top, total = count_nodes(out)
                label = emit_target + ("+" + quant if quant else "")
                rows.append({"config": cfg, "emit_target": label,
                             "nodes": total, "top_level_nodes": top,
                             "target": target,
                             "emit_s": statistics.median(times),
                             "graph_mib": os.path.getsize(out) / 2**20})
    return rows


def bench_configs(experts=64, top_k=8, hidden=1024, moe_intermediate=384,
                  layers=4, vocab=32000):
    """The MoE config and its dense equivalent (same activated params)."""
    common = {
        "attention_bias": False, "bos_token_id": 0, "eos_token_id": 1,
        "head_dim": 128, "hidden_act": "silu", "hidden_size": hidden,
        "max_position_embeddings": 4096, "num_attention_heads": hidden // 128,
        "num_hidden_layers": layers, "num_key_value_heads": 2,
        "rms_norm_eps": 1e-6, "rope_theta": 1000000.0,
        "sliding_window": None, "tie_word_embeddings": False,
        "torch_dtype": "float32", "use_sliding_window": False,
        "vocab_size": vocab}
    moe = dict(common, architectures=["Qwen3MoeForCausalLM"],
               model_type="qwen3_moe", decoder_sparse_step=1,
               mlp_only_layers=[], intermediate_size=top_k * moe_intermediate,
               moe_intermediate_size=moe_intermediate, norm_topk_prob=True,
               num_experts=experts, num_experts_per_tok=top_k)
    dense = dict(common, architectures=["Qwen3ForCausalLM"],
                 model_type="qwen3", intermediate_size=top_k * moe_intermediate)
    return moe, dense


def moe_vs_dense(archc=None, rounds=5, threads=2, prefill=128, decodes=5,
                 target="portable", **shape):
    """Times the bench MoE and its dense equivalent in the same rounds."""
    archc = archc or default_archc()
    moe, dense = bench_configs(**shape)
    with tempfile.TemporaryDirectory() as tmp:
        models = []
        for name, cfg, arch in (("moe", moe, "qwen3_moe"),
                                ("dense", dense, "qwen3")):
            cpath = os.path.join(tmp, name + ".json")
            with open(cpath, "w") as f:
                json.dump(cfg, f)
            out = os.path.join(tmp, name, "model.onnx")
            os.makedirs(os.path.dirname(out))
            emit(archc, arch, cpath, out,
                 ["--init=random", "--dtype=f32", "--target=" + target])
            models.append(out)
        proc = subprocess.run(
            ["node", os.path.join(ROOT, "bench", "quant_bench.js")] + models +
            ["--prefill", str(prefill), "--rounds", str(rounds), "--decodes",
             str(decodes), "--threads", str(threads)],
            check=True, capture_output=True, text=True)
        res = [json.loads(l) for l in proc.stdout.splitlines() if l.strip()]
        nodes = [count_nodes(m)[1] for m in models]
    m, d = res
    return {
        "target": target, "prefill_tokens": prefill, "threads": threads,
        "moe": m, "dense": d, "moe_nodes": nodes[0], "dense_nodes": nodes[1],
        "decode_ratio": m["decode_median_ms"] / d["decode_median_ms"],
        "prefill_ratio": m["prefill_median_ms"] / d["prefill_median_ms"],
        "prefill_repeat_ratio": (m["prefill_repeat_median_ms"] /
                                 d["prefill_repeat_median_ms"]),
        "session_ratio": m["load_s"] / d["load_s"]}


def print_sizes(rows):
    print("== MoE graph size, --init=none (nodes include Loop bodies)")
    for r in rows:
        print("%-20s %-8s %7d nodes (target <= %d, %s)  %d top-level  %.1f MiB  "
              "emitted in %.2f s" % (r["config"], r.get("emit_target", "portable"),
                                     r["nodes"], r["target"],
                                     "ok" if r["nodes"] <= r["target"]
                                     else "MISSED", r["top_level_nodes"],
                                     r["graph_mib"], r["emit_s"]), flush=True)


def print_speed(r):
    print("== MoE (4 layers, 64 experts, top-8, hidden 1024) vs dense, "
          "--target=%s, %d threads" % (r["target"], r["threads"]))
    for k in ("moe", "dense"):
        x = r[k]
        print("%-6s %6d nodes  session %.2f s  prefill %d: %.1f ms "
              "(repeated at once: %.1f ms)  decode: %.2f ms (medians)" % (
                  k, r[k + "_nodes"], x["load_s"], r["prefill_tokens"],
                  x["prefill_median_ms"], x["prefill_repeat_median_ms"],
                  x["decode_median_ms"]))
    print("ratios MoE/dense: decode %.2fx (target <= 1.2)  prefill %.2fx "
          "(<= 1.3; repeated at once %.2fx)  session creation %.2fx (<= 2)" % (
              r["decode_ratio"], r["prefill_ratio"],
              r["prefill_repeat_ratio"], r["session_ratio"]),
          flush=True)


def main(argv):
    archc, rounds, threads, prefill, decodes = default_archc(), 5, 2, 128, 5
    targets, what, quant = ["portable"], [], None
    i = 0
    while i < len(argv):
        a = argv[i]
        if a in ("--archc", "--rounds", "--threads", "--prefill", "--decodes",
                 "--target", "--quant"):
            v = argv[i + 1]
            i += 2
            if a == "--archc":
                archc = v
            elif a == "--target":
                targets = v.split(",")
            elif a == "--quant":
                quant = v
            else:
                n = int(v)
                rounds, threads, prefill, decodes = (
                    n if a == "--rounds" else rounds,
                    n if a == "--threads" else threads,
                    n if a == "--prefill" else prefill,
                    n if a == "--decodes" else decodes)
            continue
        what.append(a)
        i += 1
    what = what or ["sizes", "speed"]
    if "sizes" in what:
        print_sizes(node_counts(archc, rounds=min(rounds, 3), targets=targets,
                                quant=quant))
    if "speed" in what:
        for t in targets:
            print_speed(moe_vs_dense(archc, rounds, threads, prefill, decodes,
                                     target=t))


if __name__ == "__main__":
    main(sys.argv[1:])
