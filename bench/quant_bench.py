#!/usr/bin/env python3
"""Quantized models in ONNX Runtime (CPU): int4 and int8 vs f32, decode and prefill, file sizes.

Usage: quant_bench.py [--archc BIN] [--models qwen2.5-0.5b,llama-3.2-1b] [--prefill 128] [--rounds 5]
                      [--decodes 5] [--threads 2] [--variants int8,int8_acc4,int4,int4_acc4] [--work DIR]

For each model (Hugging Face configs of Qwen2.5-0.5B and Llama-3.2-1B written below; random weights from
--init=random: speed does not depend on the values) archc emits f32, int8 and int4 (MatMulNBits accuracy_level 0,
weight-only) and both with accuracy_level 4 (activations quantized to int8 at run time); bench/quant_bench.js times
each quantized variant interleaved with the f32 model in one process (rounds of one prefill of --prefill tokens and
--decodes decode steps at that past, per model in turn; the minimum over rounds is reported, being the least
disturbed by other load). Reported: external-data file sizes; the bytes of the quantized tensors (codes + scales)
against the f32 bytes of the same tensors. Results go to docs/performance.md.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

CONFIGS = {
    "qwen2.5-0.5b": ("qwen2", {
        "architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_act": "silu", "hidden_size": 896,
        "intermediate_size": 4864, "num_attention_heads": 14, "num_hidden_layers": 24, "num_key_value_heads": 2,
        "vocab_size": 151936, "max_position_embeddings": 32768, "rms_norm_eps": 1e-6, "rope_theta": 1000000.0,
        "tie_word_embeddings": True, "use_sliding_window": False, "sliding_window": 32768, "max_window_layers": 21,
        "bos_token_id": 151643, "eos_token_id": 151643, "torch_dtype": "bfloat16"}),
    "llama-3.2-1b": ("llama", {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_act": "silu", "hidden_size": 2048,
        "intermediate_size": 8192, "num_attention_heads": 32, "num_hidden_layers": 16, "num_key_value_heads": 8,
        "head_dim": 64, "vocab_size": 128256, "max_position_embeddings": 131072, "rms_norm_eps": 1e-5,
        "rope_theta": 500000.0, "rope_scaling": {"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                                                 "original_max_position_embeddings": 8192, "rope_type": "llama3"},
        "tie_word_embeddings": True, "bos_token_id": 128000, "eos_token_id": 128001, "torch_dtype": "bfloat16"}),
}

VARIANTS = {"int8": ["--quant=int8"], "int8_acc4": ["--quant=int8", "--quant-accuracy=4"],
            "int4": ["--quant=int4"], "int4_acc4": ["--quant=int4", "--quant-accuracy=4"]}


def quantized_ratio(model_path):
    """(bytes of the quantized tensors' codes + scales + zero points, f32 bytes of the same tensors)."""
    import onnx
    m = onnx.load(model_path, load_external_data=False)
    size = {}
    for t in m.graph.initializer:
        n = {e.key: e.value for e in t.external_data}
        size[t.name] = int(n["length"])
    q = f32 = 0
    for node in m.graph.node:
        if node.op_type != "MatMulNBits":
            continue
        at = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
        q += sum(size[i] for i in node.input[1:] if i)
        f32 += at["N"] * at["K"] * 4
    return q, f32


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--archc", default=os.path.join(ROOT, "build", "bin", "archc"))
    ap.add_argument("--models", default="qwen2.5-0.5b,llama-3.2-1b")
    ap.add_argument("--prefill", type=int, default=128)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--decodes", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--variants", default="int8,int8_acc4,int4,int4_acc4",
                    help="quantized variants, each timed interleaved with f32 (int8 at accuracy_level 0 is slow "
                         "in ONNX Runtime's CPU provider)")
    ap.add_argument("--work")
    a = ap.parse_args()
    work = a.work or tempfile.mkdtemp(prefix="archc-quant-bench-")
    rows = []

    def emit(arch, cfg_path, out, opts):
        os.makedirs(os.path.dirname(out), exist_ok=True)
        subprocess.run([a.archc, os.path.join(ROOT, "archs", arch + ".arch"), "--config", cfg_path, "-emit=onnx",
                        "--init=random", "-o", out, "--no-genai-config"] + opts, check=True)

    def bench(paths):
        r = subprocess.run(["node", os.path.join(ROOT, "bench", "quant_bench.js")] + paths +
                           ["--prefill", str(a.prefill), "--rounds", str(a.rounds), "--decodes", str(a.decodes),
                            "--threads", str(a.threads)], check=True, capture_output=True, text=True)
        return [json.loads(line) for line in r.stdout.strip().splitlines()]

    for name in a.models.split(","):
        arch, cfg = CONFIGS[name]
        d = os.path.join(work, name)
        os.makedirs(d, exist_ok=True)
        cfg_path = os.path.join(d, "config.json")
        with open(cfg_path, "w") as f:
            json.dump(cfg, f)
        base = os.path.join(d, "f32", "model.onnx")
        emit(arch, cfg_path, base, [])
        f32_bytes = os.path.getsize(base + ".data")
        for label in a.variants.split(","):
            out = os.path.join(d, label, "model.onnx")
            emit(arch, cfg_path, out, VARIANTS[label])
            data = os.path.getsize(out + ".data")
            q, f32 = quantized_ratio(out)
            t_f32, t = bench([base, out])
            rows.append((name, label, data, f32_bytes, q / f32, t, t_f32))
            print(f"{name:14s} {label:10s} data {data / 2**20:8.1f} MiB (f32 {f32_bytes / 2**20:.1f})  quantized "
                  f"tensors {q / f32:.4f} x f32  prefill {t['prefill_ms']:.0f} ms vs f32 {t_f32['prefill_ms']:.0f} "
                  f"({t_f32['prefill_ms'] / t['prefill_ms']:.2f}x)  decode {t['decode_ms']:.1f} ms vs f32 "
                  f"{t_f32['decode_ms']:.1f} ({t_f32['decode_ms'] / t['decode_ms']:.2f}x)", flush=True)
            shutil.rmtree(os.path.dirname(out))
        shutil.rmtree(d)
    print()
    print("| model | weights | data file (f32) | quantized tensors vs f32 | prefill %d: ms (f32 ms) | speed-up "
          "| decode at past %d: ms (f32 ms) | speed-up |" % (a.prefill, a.prefill))
    print("|---|---|---|---|---|---|---|---|")
    for name, label, data, f32_bytes, ratio, t, b in rows:
        print(f"| {name} | {label} | {data / 2**20:,.0f} MiB ({f32_bytes / 2**20:,.0f}) | {ratio:.4f} | "
              f"{t['prefill_ms']:,.0f} ({b['prefill_ms']:,.0f}) | {b['prefill_ms'] / t['prefill_ms']:.2f}x | "
              f"{t['decode_ms']:.1f} ({b['decode_ms']:.1f}) | {b['decode_ms'] / t['decode_ms']:.2f}x |")
    if not a.work:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
