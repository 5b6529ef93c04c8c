#!/usr/bin/python3
"""Checks archc's quantized model folder (--quant) of one encoder, encoder-decoder or Whisper fixture
(../shared/hf-golden-encdec), independently of archc's quantization code.

  run_quant_encdec_case.py --archc BIN --node NODE --case DIR --work DIR --opts="--quant=int4" --tag q4
                           --scheme int4 --l2 LO,HI [--bounds FILE] [--min-corr C] [--tjs] [--record FILE]

Steps:
  1. the fixture directory is compiled into a model folder as a user does (`archc CASE/ -emit=onnx -o OUT/`), a
     float model, then the quantized one into the same folder: the folder must hold the quantized graphs under
     transformers.js' names for the dtype TAG (onnx/model_TAG.onnx of an encoder, onnx/encoder_model_TAG.onnx and
     decoder_model_merged_TAG.onnx of an encoder-decoder) beside the float ones;
  2. in each quantized graph every projection is a MatMulNBits or named in float by archc's `--quant leaves N
     projection weights in float` note; every MatMulNBits weight is read back and dequantized per ONNX Runtime's
     operator specification (run_quant_case.read_back, quant_formats.py); its relative L2 error against the
     checkpoint's weight must lie in [LO, HI] and may exceed plain round-to-nearest's by run_quant_case's slacks;
  3. the numpy reference (tests/reference/encdec) runs over the checkpoint's weights with the quantized ones
     replaced by their dequantized values; tests/ort/check_encdec.js runs the folder's quantized graphs in ONNX
     Runtime against it at the fixtures' tolerance (encoder outputs; teacher-forced logits in one call and through
     the cache; greedy ids exactly and their step logits);
  4. the agreement of that reference's outputs (which ONNX Runtime reproduces in step 3) with Hugging Face's float
     ones: the median per-position Pearson correlation of the logits (last_hidden_state where the model has no
     logits) over the real positions (teacher-forced positions of an encoder-decoder) and the fraction of those
     positions whose top-1 token is HF's must reach the class's bound in --bounds (quant_bounds.json "encdec":
     1 - 2 x (1 - measured), the measured count less one position) and --min-corr; --record FILE measures and
     writes that bound instead;
  5. with --tjs, transformers.js loads the folder with dtype TAG, and with none (config.json's
     transformers.js_config.dtype must name the quantized graphs) (../transformersjs/check_encdec.mjs): encoder
     outputs within the fixtures' tolerance of the reference, or generate()'s ids equal to the reference's greedy
     ids.
Exit 0 pass, 1 fail (an absent fixture too).
"""
import argparse
import json
import math
import os
import subprocess
import sys

import numpy as np

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "reference", "encdec"))
import quant_formats as qf  # noqa: E402
import run_quant_case as rq  # noqa: E402
import selfcheck_encdec as sc  # noqa: E402

HEADROOM = 2.0


def emit_folder(a, out, notes):
    """Float model, then the quantized one, into `out`; returns ([quantized graphs], problems)."""
    for extra in ([], a.opts.split()):
        rq.run_archc([a.archc, a.case, "-emit=onnx", "-o", out + "/"] + extra, notes if extra else [])
    onnx_dir = os.path.join(out, "onnx")
    held = sorted(os.listdir(onnx_dir))
    stems = ["encoder_model", "decoder_model_merged"] if "encoder_model.onnx" in held else ["model"]
    problems, models = [], []
    for stem in stems:
        f = f"{stem}_{a.tag}.onnx"
        if f not in held:
            problems.append(f"no onnx/{f} in the folder ({held})")
        else:
            models.append(os.path.join(onnx_dir, f))
        if f"{stem}.onnx" not in held:
            problems.append(f"the float model onnx/{stem}.onnx is gone")
    return models, problems


def _untie_bart(cfg, W, head, w):
    if cfg["model_type"] == "marian":
        # Its untied head comes with per-stack embedding tables: both the shared float one.
        cfg["share_encoder_decoder_embeddings"] = False
        for stack in ("encoder", "decoder"):
            W.setdefault(f"model.{stack}.embed_tokens.weight", W["model.shared.weight"])
    else:
        cfg["tie_word_embeddings"] = False
    W[head] = w


# A tied head quantized apart from the float embedding table (archc's MatMulNBits named after the table, the
# table a float Gather): the reference computes with an untied head holding the dequantized values, by model type.
def _untie_mlm(head, bias_from=None):
    def untie(cfg, W, table, w):
        cfg["tie_word_embeddings"] = False
        W[head + ".weight"] = w
        if bias_from:
            W[head + ".bias"] = W[bias_from]
    return untie


UNTIE = {"bert": _untie_mlm("cls.predictions.decoder", "cls.predictions.bias"),
         "roberta": _untie_mlm("lm_head.decoder", "lm_head.bias"),
         "xlm-roberta": _untie_mlm("lm_head.decoder", "lm_head.bias"),
         "mpnet": _untie_mlm("lm_head.decoder", "lm_head.bias"),
         "distilbert": _untie_mlm("vocab_projector"),
         "modernbert": _untie_mlm("decoder"),
         "bart": lambda cfg, W, table, w: _untie_bart(cfg, W, "lm_head.weight", w),
         "mbart": lambda cfg, W, table, w: _untie_bart(cfg, W, "lm_head.weight", w),
         "marian": lambda cfg, W, table, w: _untie_bart(cfg, W, "lm_head.weight", w),
         "whisper": lambda cfg, W, table, w: _untie_bart(cfg, W, "proj_out.weight", w),
         # T5 reads lm_head.weight when present; its d_model^-0.5 output scale follows tie_word_embeddings, kept.
         "t5": lambda cfg, W, table, w: W.__setitem__("lm_head.weight", w)}


def read_back_all(name, models, notes, weights, lo, hi, cfg):
    """Step 2: returns (the reference's weights, problems, figures); a tied head quantized apart from its float
    table is untied in `cfg` and the weights (UNTIE)."""
    named = rq.named_float_projections(notes)
    problems, errors, ratios, sq = [], [], [], [0.0, 0.0]
    ref_weights = dict(weights)
    seen = {}
    for model in models:
        base = os.path.basename(model)
        silent = [n for n in rq.float_projections(model) if not any(p.match(n) for p in named)]
        print(f"{'ok  ' if not silent else 'FAIL'} {name} {base}: every projection quantized or named in float "
              f"by archc ({len(named)} named)" + (f": {silent[:6]} left float without a word" if silent else ""))
        if silent:
            problems.append(f"{base}: projections left float without a word")
        quantized, floats, _, schemes = rq.read_back(model)
        if not quantized:
            problems.append(f"{base} has no quantized weight")
        for codes, (kind, w) in sorted(quantized.items()):
            if kind != "matmul":
                problems.append(f"{base}: {kind} codes {codes} (this check reads MatMulNBits)")
                continue
            tensor, _ = rq.hf_name(codes, weights)
            orig = weights[tensor]
            if orig.shape != w.shape:
                problems.append(f"{codes} dequantizes to {w.shape}, checkpoint {tensor} is {orig.shape}")
                continue
            if tensor in seen and not np.array_equal(seen[tensor], w):
                problems.append(f"{tensor} quantized to different values in two graphs")
            seen[tensor] = w
            err = float(np.linalg.norm(w - orig) / max(np.linalg.norm(orig), 1e-30))
            rtn = qf.round_to_nearest_error(orig, *schemes[codes])
            ratios.append((err / rtn if rtn > 0 else (1.0 if err == 0 else np.inf), codes))
            n2 = float(np.linalg.norm(orig)) ** 2
            sq[0] += err * err * n2
            sq[1] += rtn * rtn * n2
            errors.append((err, f"{base}:{codes}"))
            if tensor in floats:
                if cfg["model_type"] not in UNTIE:
                    problems.append(f"{base}: {tensor} quantized beside its float table; no untied head known "
                                    f"for {cfg['model_type']}")
                    continue
                UNTIE[cfg["model_type"]](cfg, ref_weights, tensor, w)
                print(f"     {name} {base}: the tied head {tensor} quantized apart from the float table (the "
                      f"reference unties it)")
            else:
                ref_weights[tensor] = w
    if not errors:
        return ref_weights, problems + ["no quantized matrix read back"], {}
    errs = np.array([e for e, _ in errors])
    bad = [(e, c) for e, c in errors if not lo <= e <= hi]
    print(f"{'ok  ' if not bad else 'FAIL'} {name} {len(errors)} quantized matrices read back from the ONNX files: "
          f"relative L2 error min {errs.min():.4f} median {np.median(errs):.4f} max {errs.max():.4f} "
          f"(need [{lo}, {hi}])")
    for e, c in bad[:10]:
        print(f"       {c}: {e:.4f}")
    if bad:
        problems.append("L2 error outside the window")
    worst = max(ratios)
    total = math.sqrt(sq[0] / sq[1]) if sq[1] > 0 else 1.0
    over = [r for r in ratios if r[0] > rq.RTN_SLACK_MATRIX]
    ok = not over and total <= rq.RTN_SLACK_TOTAL
    print(f"{'ok  ' if ok else 'FAIL'} {name} error / round-to-nearest's error at the same bits, block and symmetry: "
          f"all weights {total:.4f} (need <= {rq.RTN_SLACK_TOTAL}), worst matrix {worst[0]:.4f} ({worst[1]}) "
          f"(need <= {rq.RTN_SLACK_MATRIX})")
    if not ok:
        problems.append("error beyond round-to-nearest's")
    stats = {"matrices": len(errors), "l2_min": round(float(errs.min()), 4),
             "l2_median": round(float(np.median(errs)), 4), "l2_max": round(float(errs.max()), 4),
             "rtn_total": round(total, 4), "rtn_worst_matrix": round(float(worst[0]), 4)}
    return ref_weights, problems, stats


def agreement(E, got):
    """Median per-position Pearson correlation with HF's outputs and top-1 agreement (None without logits):
    logits where the model has them, else last_hidden_state; real positions of an encoder, every teacher-forced
    position of an encoder-decoder."""
    key = "logits" if "logits" in E and E["logits"].ndim == 3 else "last_hidden_state"
    want, have = E[key].astype(np.float64), np.asarray(got[key], np.float64)
    keep = np.ones(want.shape[:2], bool)
    if "decoder_input_ids" not in E and "attention_mask" in E:
        keep = E["attention_mask"] == 1
    w, h = want[keep], have[keep]
    wc, hc = w - w.mean(-1, keepdims=True), h - h.mean(-1, keepdims=True)
    corr = (wc * hc).sum(-1) / np.sqrt((wc * wc).sum(-1) * (hc * hc).sum(-1))
    top1 = float(np.mean(w.argmax(-1) == h.argmax(-1))) if key == "logits" else None
    return key, float(np.median(corr)), top1, int(keep.sum())


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    for k in ("archc", "node", "case", "work", "opts", "tag", "scheme", "l2"):
        ap.add_argument("--" + k, required=True)
    ap.add_argument("--bounds")
    ap.add_argument("--min-corr", type=float)
    ap.add_argument("--tjs", action="store_true")
    ap.add_argument("--bound", help="ONNX Runtime's tolerance relative to max(1, max|expected|) (default the "
                    "fixtures' 1e-4); half-precision activations (q4f16) round where the reference does not")
    ap.add_argument("--record", help="quant_bounds.json: measure, and write the case's class bound there")
    a = ap.parse_args()
    name = os.path.basename(os.path.normpath(a.case))
    if not os.path.exists(os.path.join(a.case, "expected.safetensors")):
        print(f"FAIL: fixture {a.case} not found (../shared/hf-golden-encdec absent)")
        return 1
    os.makedirs(a.work, exist_ok=True)
    out = os.path.join(a.work, "folder")
    notes = []
    models, problems = emit_folder(a, out, notes)
    print(f"{'ok  ' if not problems else 'FAIL'} {name} model folder: "
          f"{', '.join('onnx/' + os.path.basename(m) for m in models)} beside the float model")
    for p in problems:
        print(f"       {p}")
    if problems:
        return 1
    cfg, W, E, meta = sc.load(a.case)
    lo, hi = (float(x) for x in a.l2.split(","))
    ref_weights, problems, stats = read_back_all(name, models, notes, W, lo, hi, cfg)

    # Step 3: the reference over the dequantized weights, ONNX Runtime against it.
    got = sc.compute(cfg, ref_weights, E)
    expected = os.path.join(a.work, "expected_dequantized.safetensors")
    sc.write_expected(expected, E, got, meta)
    if "greedy_ids" in got:
        same = np.array_equal(np.asarray(got["greedy_ids"]), E["greedy_ids"])
        print(f"     {name} reference over the dequantized weights: greedy {got['greedy_ids'][0].tolist()} "
              f"({'HF' + chr(39) + 's ids' if same else 'HF: ' + str(E['greedy_ids'][0].tolist())})")
    rc = subprocess.run([a.node, os.path.join(HERE, "..", "ort", "check_encdec.js"), "--archc", a.archc,
                         "--case", a.case, "--work", os.path.join(a.work, "ort"), "--folder", out,
                         "--dtype", a.tag, "--expected", expected] +
                        (["--bound", a.bound] if a.bound else [])).returncode
    if rc:
        problems.append("ONNX Runtime against the reference over the dequantized weights")

    # Step 4: agreement with Hugging Face's float outputs.
    key, corr, top1, counted = agreement(E, got)
    cls = (cfg.get("architectures") or [""])[0]
    if a.record:
        with open(a.record) as f:
            doc = json.load(f)
        sec = doc.setdefault("encdec", {})
        sec["about"] = ("Agreement with Hugging Face's float outputs of the quantized encoder, encoder-decoder "
                        "and Whisper folders of tests/quant (run_quant_encdec_case.py --bounds), per "
                        "architectures[0] class and scheme: the median per-position Pearson correlation of the "
                        "logits (last_hidden_state where the model has none) of the numpy reference over the "
                        "dequantized weights (which ONNX Runtime reproduces within the fixtures' tolerance) with "
                        "HF's, over the real positions of an encoder and the teacher-forced positions of an "
                        "encoder-decoder, at least 1 - %g x (1 - measured); the fraction of those positions whose "
                        "top-1 token is HF's at least the measured count less one position; measured with "
                        "run_quant_encdec_case.py --record." % HEADROOM)
        # Rounded down: a run at the bound (the measured count less one position) passes.
        bound = {"min_corr": math.floor(max(0.0, 1 - HEADROOM * (1 - corr)) * 1e5) / 1e5}
        if top1 is not None:
            bound["min_top1"] = math.floor(max(0.0, (round(top1 * counted) - 1) / counted) * 1e4) / 1e4
        sec.setdefault("bounds", {}).setdefault(cls, {})[a.scheme] = bound
        sec["bounds"] = dict(sorted(sec["bounds"].items()))
        row = {"scheme": a.scheme, "case": name, "cls": cls, "opts": a.opts, **stats, "compared": key,
               "corr": corr, "top1": top1, "counted": counted}
        sec["measured"] = sorted([r for r in sec.get("measured", []) if (r["scheme"], r["case"]) !=
                                  (a.scheme, name)] + [row], key=lambda r: (r["scheme"], r["case"]))
        with open(a.record, "w") as f:
            json.dump(doc, f, indent=1)
            f.write("\n")
    need_corr, need_top1 = a.min_corr or -1.0, 0.0
    if a.bounds:
        with open(a.bounds) as f:
            b = (json.load(f).get("encdec") or {}).get("bounds", {}).get(cls, {}).get(a.scheme)
        if b is None:
            print(f"FAIL {name}: {a.bounds} has no encdec {a.scheme} bound for {cls} (--record)")
            return 1
        need_corr = max(need_corr, b["min_corr"])
        need_top1 = b.get("min_top1", 0.0)
    ok = corr >= need_corr and (top1 is None or top1 >= need_top1)
    print(f"{'ok  ' if ok else 'FAIL'} {name} agreement with HF's float {key} over {counted} positions: median "
          f"correlation {corr:.6f} (need >= {need_corr:.5f})" +
          ("" if top1 is None else f", top-1 {top1:.4f} (need >= {need_top1:.4f})"))
    if not ok:
        problems.append("agreement with HF")

    # With the dtype, and with none (the folder's config.json names this run's graphs).
    for dtype in ([a.tag, "default"] if a.tjs else []):
        rc = subprocess.run([a.node, os.path.join(HERE, "..", "transformersjs", "check_encdec.mjs"),
                             "--archc", a.archc, "--case", a.case, "--work", os.path.join(a.work, "tjs"),
                             "--folder", out, "--dtype", dtype, "--expected", expected]).returncode
        if rc:
            problems.append(f"transformers.js (dtype {dtype})")
    print(f"{name}: {'all checks passed' if not problems else 'FAILED: ' + '; '.join(problems)}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
