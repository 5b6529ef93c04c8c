#!/usr/bin/python3
"""What a float16 model of an encoder / encoder-decoder case must compute:
the numpy reference (encdec_reference.py) over the case's weights rounded to
float16 (as archc's --dtype=f16 package stores them), on the case's inputs.

  rounded_expected_encdec.py CASE_DIR OUT.safetensors

Writes the case's inputs and the reference's outputs under the names of
expected.safetensors (greedy_ids / greedy_logits from the rounded model's own
greedy run), for tests/ort/check_encdec.js --dtype f16 --expected OUT.
"""
import os
import sys

import numpy as np

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import selfcheck_encdec as sc  # noqa: E402


def main():
    case, out = sys.argv[1], sys.argv[2]
    cfg, W, E, meta = sc.load(case)
    W = {k: v.astype(np.float16).astype(np.float64) for k, v in W.items()}
    sc.write_expected(out, E, sc.compute(cfg, W, E), meta)
    return 0


if __name__ == "__main__":
    sys.exit(main())
