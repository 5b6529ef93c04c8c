#!/usr/bin/python3
"""Check the numpy reference against a Hugging Face golden fixture.

  selfcheck.py <hf-golden-case-dir> <family>

Runs hf_reference on the fixture's config.json + model.safetensors and compares with what HF transformers
computed (expected.safetensors): prefill logits within tol = 1e-4 * max(1, max|expected logits|), the 8
greedy ids exactly, the greedy step logits within tol. FAMILY "auto": the reference family registered for the
fixture's architectures[0] (hf_reference.family_for_class). Exit 0 pass, 1 fail (a missing fixture too).
"""
import os
import sys

import numpy as np

sys.dont_write_bytecode = True  # keep the source tree clean when run from ctest
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hf_reference as ref  # noqa: E402


def main(case_dir, family):
    name = os.path.basename(os.path.normpath(case_dir))
    if not os.path.exists(os.path.join(case_dir, "expected.safetensors")):
        print(f"FAIL: fixture {case_dir} not found")
        return 1
    exp, meta = ref.read_safetensors(os.path.join(case_dir, "expected.safetensors"))
    model = ref.load_case(case_dir, family)
    tol = 1e-4 * max(1.0, float(np.abs(exp["logits"]).max()))
    ok = True

    logits = model.forward(exp["input_ids"])
    d = float(np.abs(logits - exp["logits"]).max())
    ok &= d <= tol
    print(f"{'ok  ' if d <= tol else 'FAIL'} {name} prefill logits: max|diff| = {d:.3e} (tol {tol:.3e})")

    g = exp["greedy_ids"]
    steps = exp["greedy_logits"].shape[1]
    s0 = g.shape[1] - steps
    if "prompt_len" in meta and int(meta["prompt_len"]) != s0:
        print(f"FAIL {name}: metadata prompt_len {meta['prompt_len']} != {s0}")
        ok = False
    toks, step_logits, margins = model.greedy(g[0, :s0].tolist(), steps)
    want = g[0, s0:].tolist()
    same = toks == want
    ok &= same
    print(f"{'ok  ' if same else 'FAIL'} {name} greedy ids: got {toks} want {want}")
    d = float(np.abs(step_logits - exp["greedy_logits"][0]).max())
    ok &= d <= tol
    print(f"{'ok  ' if d <= tol else 'FAIL'} {name} greedy step logits: max|diff| = {d:.3e} (tol {tol:.3e})"
          f"; min margin {min(margins):.3f}")
    print(f"{name}: {'PASS' if ok else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1], sys.argv[2]))
