#!/usr/bin/env python3
"""archc benchmarks: whole-process time and peak memory of the CLI.

Usage: run_benchmarks.py [--archc BIN] [--runs N] [profile] [onnx] [weights]

  profile   -emit=profile (prefill 2048 + decode at past 2048, one device)
            for the largest bundled configs, N runs each
  onnx      -emit=onnx without weight data (sparse external-data layout)
  weights   -emit=onnx --weights against cp && sync (bench/bind_weights.py)
  qweights  a synthetic 3.85 GB bf16 Llama checkpoint (bench/make_checkpoint.py)
            to int4 / int8 (--quant), and its FP8 form
            (F8_E4M3 + weight_scale_inv) to bf16 and int4

Each measurement is one child process; wall time from fork to exit, peak RSS
from wait4's rusage (ru_maxrss) of that child alone. Prints the median and
min/max. Run on an otherwise idle machine; results go to docs/performance.md.
"""
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run(cmd, stdout=subprocess.DEVNULL):
    """Runs cmd; returns (seconds, peak RSS in MiB)."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=stdout, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - start
    err = proc.stderr.read().decode()
    proc.stderr.close()
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit("command failed: %s\n%s" % (" ".join(cmd), err))
    return elapsed, usage.ru_maxrss / 1024.0


def report(label, samples):
    times = sorted(t for t, _ in samples)
    rss = max(m for _, m in samples)
    print("%-44s median %9.2f ms  (min %.2f, max %.2f, n=%d)  peak RSS %.1f MiB"
          % (label, 1000 * statistics.median(times), 1000 * times[0],
             1000 * times[-1], len(times), rss), flush=True)


PROFILE_CASES = [
    ("llama", "Llama-3.1-8B"),
    ("llama", "Llama-3.1-70B"),
    ("mixtral", "Mixtral-8x7B-v0.1"),
    ("qwen3_moe", "Qwen3-30B-A3B"),
    ("deepseek_v3", "DeepSeek-V3"),
    ("deepseek_v4", "DeepSeek-V4-Flash"),
    ("qwen3_5", "Qwen3.5-397B-A17B"),
    ("qwen3_next", "Qwen3-Next-80B-A3B-Thinking"),
    ("gpt2", "GPT-2"),
]

ONNX_CASES = [
    ("llama", "Llama-3.1-8B"),
    ("llama", "Llama-3.1-70B"),
    ("qwen3_5", "Qwen3.5-27B"),
    ("qwen3_moe", "Qwen3-30B-A3B"),
]


def bench_profile(archc, runs):
    print("== -emit=profile --device=h200 --seq=2048 (prefill 2048 + decode at 2048)")
    for arch, cfg in PROFILE_CASES:
        cmd = [archc, os.path.join(ROOT, "archs", arch + ".arch"), "--config",
               os.path.join(ROOT, "archs", "configs", cfg + ".json"),
               "-emit=profile", "--device=h200", "--seq=2048"]
        run(cmd)  # warm the page cache
        report(cfg, [run(cmd) for _ in range(runs)])


def bench_onnx(archc, runs):
    print("== -emit=onnx, no weight data (--init=none)")
    for arch, cfg in ONNX_CASES:
        with tempfile.TemporaryDirectory(dir=ROOT) as d:
            out = os.path.join(d, "model.onnx")
            cmd = [archc, os.path.join(ROOT, "archs", arch + ".arch"), "--config",
                   os.path.join(ROOT, "archs", "configs", cfg + ".json"),
                   "-emit=onnx", "-o", out]
            samples = []
            for _ in range(runs):
                samples.append(run(cmd))
                shutil.rmtree(d)
                os.makedirs(d)
            report(cfg, samples)


def bench_weights(archc, runs):
    """Binding against `cp && sync` of the same bytes: bench/bind_weights.py."""
    subprocess.run([sys.executable, os.path.join(ROOT, "bench", "bind_weights.py"),
                    "--archc", archc, "--runs", str(runs)], check=True)


def bench_quant_weights(archc, runs):
    print("== -emit=onnx --weights with quantization: synthetic Llama (4 layers, Llama-3.1-8B widths)")
    cfg = os.path.join(ROOT, "archs", "configs", "bench", "llama-bench-4l.json")
    arch = os.path.join(ROOT, "archs", "llama.arch")
    with tempfile.TemporaryDirectory(dir=ROOT) as d:
        weights = subprocess.run([archc, arch, "--config", cfg, "-emit=weights"],
                                 check=True, capture_output=True).stdout
        bf16 = os.path.join(d, "bf16.safetensors")
        subprocess.run([sys.executable, os.path.join(ROOT, "bench", "make_checkpoint.py"), bf16],
                       input=weights, check=True)
        fp8_dir = os.path.join(d, "fp8")
        os.makedirs(fp8_dir)
        subprocess.run([sys.executable, os.path.join(ROOT, "bench", "make_checkpoint.py"),
                        os.path.join(fp8_dir, "model.safetensors"), "--fp8"], input=weights, check=True)
        with open(cfg) as f:
            c = json.load(f)
        c["quantization_config"] = {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8",
                                    "weight_block_size": [128, 128]}
        fp8_cfg = os.path.join(fp8_dir, "config.json")
        with open(fp8_cfg, "w") as f:
            json.dump(c, f)
        print("checkpoints: bf16 %.2f GB, fp8 %.2f GB" % (
            os.path.getsize(bf16) / 1e9, os.path.getsize(os.path.join(fp8_dir, "model.safetensors")) / 1e9))
        out_dir = os.path.join(d, "out")
        for label, conf, ckpt, extra in (
                ("bf16 -> int4", cfg, bf16, ["--quant=int4"]),
                ("bf16 -> int8", cfg, bf16, ["--quant=int8"]),
                ("fp8 -> bf16", fp8_cfg, fp8_dir, ["--dtype=bf16"]),
                ("fp8 -> int4", fp8_cfg, fp8_dir, ["--quant=int4"])):
            samples = []
            for _ in range(runs):
                os.makedirs(out_dir)
                samples.append(run([archc, arch, "--config", conf, "-emit=onnx", "--weights", ckpt, "-o",
                                    os.path.join(out_dir, "model.onnx")] + extra))
                # model.onnx_data, then model.onnx_data_1, ... past the chunk limit.
                size = sum(os.path.getsize(os.path.join(out_dir, f)) for f in os.listdir(out_dir)
                           if f.startswith("model.onnx_data"))
                shutil.rmtree(out_dir)
            report("archc %s (%.2f GB out)" % (label, size / 1e9), samples)


def main():
    args = sys.argv[1:]
    archc = os.path.join(ROOT, "build", "bin", "archc")
    runs = 25
    while args and args[0].startswith("--"):
        flag = args.pop(0)
        if flag == "--archc":
            archc = args.pop(0)
        elif flag == "--runs":
            runs = int(args.pop(0))
        else:
            sys.exit(__doc__)
    which = args or ["profile", "onnx", "weights", "qweights"]
    for w in which:
        {"profile": bench_profile, "onnx": bench_onnx, "weights": bench_weights,
         "qweights": bench_quant_weights}[w](archc, runs if w == "profile" else max(1, min(runs, 5)))


if __name__ == "__main__":
    main()
