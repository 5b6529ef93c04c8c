#!/usr/bin/python3
"""What a half-precision model of a fixture must compute: the numpy reference over the fixture's checkpoint with
the tensors the model stores in half precision rounded to it.

  rounded_expected.py --archc BIN [--arch FILE.arch] --case DIR --out FILE [--dtype f16|bf16] [--family F]

A float16 model cannot be closer to Hugging Face's float32 logits than its own weights allow: on fixtures with random
weights a 2^-11 relative change of every weight moves the logits by up to a third of their range (Gated DeltaNet
heads whose output sits at the norm's epsilon, routers on near-ties; tests/ort/f16_bounds.json lists the measured
floors). The half-precision checks therefore compare with this file: the same inputs as the fixture's
expected.safetensors, logits and greedy run (input_ids, logits, greedy_ids, greedy_logits) computed by
tests/reference in float64 over the rounded weights, the rounding done here (numpy, round to nearest even). Which
tensors the model stores in the dtype is archc's -emit=weights listing; a tensor it keeps wider is left as is.
Exit 0, 1 on failure.
"""
import argparse
import json
import os
import subprocess
import sys

import numpy as np

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hf_reference as ref  # noqa: E402

ROUND = {"f16": lambda a: a.astype(np.float16).astype(np.float64),
         "bf16": lambda a: _round_bf16(a)}


def _round_bf16(a):
    u = np.asarray(a, np.float32).view(np.uint32).astype(np.uint64)
    u = ((u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000).astype(np.uint32)
    return u.view(np.float32).astype(np.float64)


def narrow_tensors(a):
    """Checkpoint tensors the --dtype model stores in that dtype (archc -emit=weights)."""
    cmd = [a.archc] + ([a.arch] if a.arch else []) + ["--config", os.path.join(a.case, "config.json"),
                                                     "-emit=weights", f"--dtype={a.dtype}"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"rounded_expected: {' '.join(cmd)} exited with {r.returncode}:\n{r.stderr}")
    out = set()
    for line in r.stdout.splitlines():
        parts = line.split()
        if len(parts) >= 3 and parts[-1] == a.dtype and not line.startswith("//"):
            out.add(parts[0])
    if not out:
        sys.exit(f"rounded_expected: archc lists no {a.dtype} tensor for {a.case}")
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--archc", required=True)
    ap.add_argument("--arch")
    ap.add_argument("--case", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--dtype", default="f16", choices=sorted(ROUND))
    ap.add_argument("--family", default="auto")
    a = ap.parse_args()
    if not os.path.exists(os.path.join(a.case, "expected.safetensors")):
        print(f"FAIL: fixture {a.case} not found")
        return 1
    family = ref.case_family(a.case, a.family)
    with open(os.path.join(a.case, "config.json")) as f:
        cfg = json.load(f)
    weights, _ = ref.read_safetensors(os.path.join(a.case, "model.safetensors"))
    narrow = narrow_tensors(a)
    unknown = sorted(narrow - set(weights))
    if unknown:
        sys.exit(f"rounded_expected: archc lists tensors the checkpoint does not hold: {unknown[:5]}")
    rounded = {}
    for name, w in weights.items():
        w = np.asarray(w)
        if name in narrow and np.issubdtype(w.dtype, np.floating):
            rounded[name] = ROUND[a.dtype](w)
        elif np.issubdtype(w.dtype, np.floating):
            rounded[name] = w.astype(np.float64)
        else:
            rounded[name] = w
    model = ref.Model(cfg, rounded, family)
    exp, _ = ref.read_safetensors(os.path.join(a.case, "expected.safetensors"))
    logits = model.forward(exp["input_ids"])
    steps = exp["greedy_logits"].shape[1]
    prompt = exp["greedy_ids"][0, :exp["greedy_ids"].shape[1] - steps].tolist()
    toks, step_logits, margins = model.greedy(prompt, steps)
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    ref.write_safetensors(a.out, {
        "input_ids": np.asarray(exp["input_ids"], np.int64),
        "logits": logits.astype(np.float32),
        "greedy_ids": np.asarray([prompt + toks], np.int64),
        "greedy_logits": step_logits[None].astype(np.float32)},
        {"generator": f"tests/reference/rounded_expected.py ({a.dtype} weights, {len(narrow)} tensors rounded)"})
    hf_toks = exp["greedy_ids"][0, len(prompt):].tolist()
    print(f"     {os.path.basename(os.path.normpath(a.case))} reference over {a.dtype}-rounded weights "
          f"({len(narrow)} tensors): greedy {toks}{'' if toks == hf_toks else f' (HF, float32: {hf_toks})'}, "
          f"min margin {min(margins):.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
