#!/usr/bin/env python3
"""Binding weights against `cp && sync` of the same bytes, and its peak memory.

Usage: bind_weights.py [--archc BIN] [--runs N] [--layers L] [--vocab V]
                       [--dir DIR] [--dtype D,...] [--keep]

A synthetic untied Llama with Llama-3.1-8B's widths (hidden 4096, intermediate
14336, 32 / 8 heads), L layers (default 2) and a vocabulary of V (default
131072): its embedding and its `lm_head` are 1 GiB each in bf16, and `lm_head`,
like every dense Linear weight, is stored transposed ([in, out]), so binding
transposes a 1 GiB tensor. The bf16 checkpoint (2.9 GB at the defaults,
bench/make_checkpoint.py) is written into a temporary folder under DIR
(default: the build folder, i.e. the disk archc writes to), then for each
output dtype (default bf16 and f32), N rounds (default 3) of

  archc --config CONFIG -emit=onnx --weights CKPT -o OUT/model.onnx --dtype=D
  cp -r OUT COPY && sync          (the very bytes archc wrote, same disk)

each after a `sync` and a pause, so that neither inherits the other's
writeback. archc fsyncs its files before it publishes them, so `cp && sync`
is the comparison (cp itself copies inside the kernel, copy_file_range).
Wall time from fork to exit; peak RSS from wait4's rusage of the child alone
(ru_maxrss: resident pages, the checkpoint's mapped pages included).
Prints per round the seconds and the ratio of throughputs in bytes written
(archc bytes/s over cp's bytes/s: cp time / archc time for the same bytes),
then the median ratio and the largest peak RSS. The folder is removed unless
--keep. Needs numpy and ~3x the checkpoint's size free on DIR
(checkpoint + f32 output + its copy: 14.5 GB at the defaults).

Figures (2-vCPU AMD EPYC, 24 GiB, ext4 on a virtual disk, other builds
sharing the machine; load average noted with each run) are in
docs/performance.md ("Binding weights"); reproduce with

  /usr/bin/python3 bench/bind_weights.py --runs 3
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
sys.path.insert(0, os.path.join(ROOT, "bench"))
from run_benchmarks import run  # noqa: E402


def config(layers, vocab):
    return {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": 4096,
        "intermediate_size": 14336,
        "num_hidden_layers": layers,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "vocab_size": vocab,
        "rms_norm_eps": 1e-05,
        "rope_theta": 500000.0,
        "max_position_embeddings": 8192,
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
    }


def timed(cmd):
    """Runs cmd after a sync and a pause; returns (seconds, peak RSS MiB)."""
    subprocess.run(["sync"], check=True)
    time.sleep(1.0)
    return run(cmd)


def folder_bytes(path):
    return sum(os.path.getsize(os.path.join(path, f)) for f in os.listdir(path))


def main():
    args = sys.argv[1:]
    archc = os.path.join(ROOT, "build", "bin", "archc")
    runs, layers, vocab, keep = 3, 2, 131072, False
    base = os.path.join(ROOT, "build")
    dtypes = ["bf16", "f32"]
    while args:
        flag = args.pop(0)
        if flag == "--archc":
            archc = os.path.abspath(args.pop(0))
        elif flag == "--runs":
            runs = int(args.pop(0))
        elif flag == "--layers":
            layers = int(args.pop(0))
        elif flag == "--vocab":
            vocab = int(args.pop(0))
        elif flag == "--dir":
            base = args.pop(0)
        elif flag == "--dtype":
            dtypes = args.pop(0).split(",")
        elif flag == "--keep":
            keep = True
        else:
            sys.exit(__doc__)
    os.makedirs(base, exist_ok=True)
    work = tempfile.mkdtemp(prefix="bind-weights-", dir=base)
    try:
        cfg = os.path.join(work, "config.json")
        with open(cfg, "w") as f:
            json.dump(config(layers, vocab), f, indent=1)
        ckpt = os.path.join(work, "model.safetensors")
        listing = subprocess.run([archc, "--config", cfg, "-emit=weights"],
                                 check=True, capture_output=True).stdout
        subprocess.run([sys.executable,
                        os.path.join(ROOT, "bench", "make_checkpoint.py"), ckpt],
                       input=listing, check=True)
        shapes = []
        for line in listing.decode().splitlines():
            line = line.strip()
            if line and not line.startswith("//"):
                dims = json.loads(line.split(" ", 1)[1].split("]")[0] + "]")
                n = 1
                for d in dims:
                    n *= d
                shapes.append(n * 2)
        largest = max(shapes)
        print("checkpoint: %.2f GB bf16, largest tensor %.2f GiB; load average %s"
              % (os.path.getsize(ckpt) / 1e9, largest / 2**30,
                 " ".join("%.2f" % x for x in os.getloadavg())), flush=True)
        out = os.path.join(work, "out")
        copy = os.path.join(work, "copy")
        for dtype in dtypes:
            ratios, rss = [], []
            for r in range(runs):
                shutil.rmtree(out, ignore_errors=True)
                shutil.rmtree(copy, ignore_errors=True)
                os.makedirs(out)
                t_archc, m_archc = timed(
                    [archc, "--config", cfg, "-emit=onnx", "--weights", ckpt,
                     "-o", os.path.join(out, "model.onnx"), "-q",
                     "--dtype=" + dtype])
                written = folder_bytes(out)
                t_cp, m_cp = timed(["sh", "-c", "cp -r '%s' '%s' && sync"
                                    % (out, copy)])
                ratio = t_cp / t_archc
                ratios.append(ratio)
                rss.append(m_archc)
                print("bf16 -> %-4s round %d: %.2f GB written; archc %.2f s "
                      "(%.2f GB/s, peak RSS %.1f MiB), cp && sync %.2f s "
                      "(%.2f GB/s); ratio %.2fx; load %.2f"
                      % (dtype, r + 1, written / 1e9, t_archc,
                         written / t_archc / 1e9, m_archc, t_cp,
                         written / t_cp / 1e9, ratio, os.getloadavg()[0]),
                      flush=True)
            print("bf16 -> %-4s median ratio %.2fx (min %.2f, max %.2f), "
                  "peak RSS %.1f MiB" % (dtype, statistics.median(ratios),
                                         min(ratios), max(ratios), max(rss)),
                  flush=True)
    finally:
        if keep:
            print("kept", work)
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
