#!/usr/bin/env python3
"""A GPTQ int4 checkpoint in ONNX Runtime (CPU): its codes as MatMulNBits against the same model re-quantized by
--quant=int4 and against f32, decode and prefill in one interleaved run; and the conversion time against `cp`.

Usage: prequant_bench.py [--archc BIN] [--model qwen2.5-0.5b|llama-3.2-1b] [--prefill 128] [--rounds 5]
                         [--decodes 5] [--threads 2] [--convert-runs 3] [--conversion-only] [--work DIR]

1. Writes a GPTQ checkpoint of the model's Hugging Face config as GPTQModel releases it (4-bit, group_size 128,
   sym, desc_act false, v1 zero offset: qweight I32 [in/8, out], qzeros I32 [G, out/8], scales F16 [G, out], g_idx;
   embeddings and norms F16, tied head) with random codes and scales (speed does not depend on the values), and a
   float16 checkpoint of the same dequantized weights (what a user re-quantizing the float release starts from).
2. Conversion: `archc GPTQ/ -emit=onnx -o OUT/` (a model folder: onnx/model_q4.onnx + external data, fsynced; the
   F16 embedding table written f32) and with --dtype=f16 (model_q4f16.onnx: about the checkpoint's bytes) against
   `cp -r GPTQ/ X/` and `cp -r GPTQ/ X/ && sync` of the checkpoint folder, interleaved, each after a `sync`; the
   minimum of --convert-runs (archc fsyncs its output: `cp && sync` is the comparison).
3. Emits f32 and --quant=int4 (block 32, the default, and block 128, the checkpoint's group size) from the float16
   checkpoint, the GPTQ checkpoint's own codes (its tied head float, as GPTQ releases keep it), and those codes with
   --quant=int4 (the float head quantized, the codes kept); bench/quant_bench.js times all five interleaved in one process
   (one prefill of --prefill tokens and --decodes decode steps at that past per model per round; the minimum over
   rounds). Results go to docs/performance.md ("A GPTQ checkpoint in ONNX Runtime").
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "quant"))
sys.path.insert(0, os.path.join(ROOT, "tests", "reference"))
sys.path.insert(0, os.path.join(ROOT, "bench"))
import hf_reference as ref  # noqa: E402
import quant_bench  # noqa: E402
import quant_formats as qf  # noqa: E402

GROUP = 128


def gptq_tensors(out_, in_, rng):
    """Random 4-bit GPTQ tensors of one Linear and its dequantized float16 weight."""
    q = rng.integers(0, 16, size=(out_, in_), dtype=np.uint32)
    g = in_ // GROUP
    scales = rng.uniform(0.002, 0.02, size=(g, out_)).astype(np.float16)
    qt = q.T.reshape(in_ // 8, 8, out_)
    qweight = np.zeros((in_ // 8, out_), np.uint32)
    for j in range(8):
        qweight |= qt[:, j, :] << np.uint32(4 * j)
    qzeros = np.full((g, out_ // 8), 0x77777777, np.uint32)  # zero 8 stored as 7 (v1)
    w = ((q.astype(np.float32) - 8.0) * np.repeat(scales.astype(np.float32), GROUP, 0).T).astype(np.float16)
    return {"qweight": ("I32", qweight.view(np.int32)), "qzeros": ("I32", qzeros.view(np.int32)),
            "scales": ("F16", scales), "g_idx": ("I32", (np.arange(in_) // GROUP).astype(np.int32))}, w


def write_checkpoints(cfg, family, gptq_dir, float_dir, seed=0):
    rng = np.random.default_rng(seed)
    shapes = ref.expected_weight_shapes(cfg, family)
    packed, floats = {}, {}
    for name, shape in sorted(shapes.items()):
        if name.endswith("_proj.weight") and len(shape) == 2:
            t, w = gptq_tensors(shape[0], shape[1], rng)
            module = name[:-len(".weight")]
            for k, v in t.items():
                packed[f"{module}.{k}"] = v
            floats[name] = ("F16", w)
        else:
            v = (rng.standard_normal(shape) * (0.02 if len(shape) == 2 else 0.1)).astype(np.float16)
            if name.endswith("norm.weight"):
                v = np.ones(shape, np.float16)
            packed[name] = floats[name] = ("F16", v)
    for d, tensors, qc in ((gptq_dir, packed, True), (float_dir, floats, False)):
        os.makedirs(d, exist_ok=True)
        c = dict(cfg, torch_dtype="float16")
        if qc:
            c["quantization_config"] = {
                "bits": 4, "group_size": GROUP, "desc_act": False, "sym": True, "lm_head": False,
                "damp_percent": 0.01, "true_sequential": True, "static_groups": False, "quant_method": "gptq",
                "checkpoint_format": "gptq", "pack_dtype": "int32", "meta": {"quantizer": ["gptqmodel:bench"]}}
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump(c, f, indent=2)
        qf.write_safetensors(os.path.join(d, "model.safetensors"), tensors)


def best_of(runs, cmd):
    times = []
    for _ in range(runs):
        subprocess.run(["sync"], check=True)  # no earlier writes left for this command to wait for
        t = time.perf_counter()
        subprocess.run(cmd, shell=isinstance(cmd, str), check=True, stdout=subprocess.DEVNULL)
        times.append(time.perf_counter() - t)
    return min(times)


def peak_rss_mib(argv):
    """Peak resident memory of one run of argv (GNU time's %M, KiB; not wait4 from this process, whose fork
    would count the benchmark's own pages)."""
    r = subprocess.run(["/usr/bin/time", "-f", "%M"] + argv, check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE, text=True)
    return int(r.stderr.strip().splitlines()[-1]) / 1024


def folder_bytes(d):
    return sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(d) for f in fs)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--archc", default=os.path.join(ROOT, "build", "bin", "archc"))
    ap.add_argument("--model", default="qwen2.5-0.5b", choices=sorted(quant_bench.CONFIGS))
    ap.add_argument("--prefill", type=int, default=128)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--decodes", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--convert-runs", type=int, default=3)
    ap.add_argument("--conversion-only", action="store_true", help="skip the ONNX Runtime timings")
    ap.add_argument("--work")
    a = ap.parse_args()
    work = a.work or tempfile.mkdtemp(prefix="archc-prequant-bench-")
    family, cfg = quant_bench.CONFIGS[a.model]
    gptq, fp16 = os.path.join(work, "gptq"), os.path.join(work, "fp16")
    t0 = time.perf_counter()
    write_checkpoints(cfg, family, gptq, fp16)
    print(f"checkpoints written in {time.perf_counter() - t0:.1f} s: GPTQ {folder_bytes(gptq) / 2**20:,.0f} MiB, "
          f"float16 {folder_bytes(fp16) / 2**20:,.0f} MiB", flush=True)

    # 2. Conversion against cp, interleaved run by run (the minimum of each).
    out, out16, copy = (os.path.join(work, d) for d in ("out", "out16", "copy"))
    cmds = {"archc": f"rm -rf {out} && {a.archc} {gptq}/ -emit=onnx -o {out}/ --quiet",
            "archc --dtype=f16": f"rm -rf {out16} && {a.archc} {gptq}/ -emit=onnx --dtype=f16 -o {out16}/ --quiet",
            "cp": f"rm -rf {copy} && cp -r {gptq} {copy}",
            "cp && sync": f"rm -rf {copy} && cp -r {gptq} {copy} && sync"}
    runs = {k: [] for k in cmds}
    for _ in range(a.convert_runs):
        for k, c in cmds.items():
            runs[k].append(best_of(1, c))
    t = {k: min(v) for k, v in runs.items()}
    size = folder_bytes(gptq)
    print(f"conversion of {size / 2**20:,.0f} MiB (min of {a.convert_runs}): " + ", ".join(
        f"{k} {v:.2f} s" for k, v in t.items()), flush=True)
    for k, d, extra in (("archc", out, []), ("archc --dtype=f16", out16, ["--dtype=f16"])):
        shutil.rmtree(d, ignore_errors=True)
        rss = peak_rss_mib([a.archc, f"{gptq}/", "-emit=onnx", "-o", f"{d}/", "--quiet"] + extra)
        # As docs/performance.md states binding: the copy's time over archc's (above 1: archc is faster).
        print(f"  {k}: {folder_bytes(d) / 2**20:,.0f} MiB out; cp / archc {t['cp'] / t[k]:.2f}x, "
              f"cp && sync / archc {t['cp && sync'] / t[k]:.2f}x; peak RSS {rss:,.0f} MiB", flush=True)
    shutil.rmtree(copy, ignore_errors=True)
    shutil.rmtree(out16, ignore_errors=True)

    if a.conversion_only:
        if not a.work:
            shutil.rmtree(work, ignore_errors=True)
        return 0
    # 3. The five models, timed interleaved.
    models = {}
    for label, src, opts in (("f32", fp16, []), ("int4", fp16, ["--quant=int4"]),
                             ("int4_b128", fp16, ["--quant=int4", "--quant-block=128"]), ("gptq", gptq, []),
                             ("gptq_q4head", gptq, ["--quant=int4"])):
        path = os.path.join(work, label, "model.onnx")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        subprocess.run([a.archc, "--config", os.path.join(src, "config.json"), "--weights", src, "-emit=onnx",
                        "-o", path, "--no-genai-config", "--quiet"] + opts, check=True)
        models[label] = path
    r = subprocess.run(["node", os.path.join(ROOT, "bench", "quant_bench.js")] + list(models.values()) +
                       ["--prefill", str(a.prefill), "--rounds", str(a.rounds), "--decodes", str(a.decodes),
                        "--threads", str(a.threads)], check=True, capture_output=True, text=True)
    times = dict(zip(models, [json.loads(line) for line in r.stdout.strip().splitlines()]))
    print()
    print(f"| {a.model} | data | prefill {a.prefill}: ms | its time / GPTQ's | decode at past {a.prefill}: ms "
          f"| its time / GPTQ's |")
    print("|---|---|---|---|---|---|")
    g = times["gptq"]
    for label, t in times.items():
        data = sum(os.path.getsize(os.path.join(os.path.dirname(models[label]), f))
                   for f in os.listdir(os.path.dirname(models[label])) if "onnx_data" in f)
        print(f"| {label} | {data / 2**20:,.0f} MiB | {t['prefill_ms']:,.0f} | {t['prefill_ms'] / g['prefill_ms']:.2f}x "
              f"| {t['decode_ms']:.1f} | {t['decode_ms'] / g['decode_ms']:.2f}x |")
    if not a.work:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
