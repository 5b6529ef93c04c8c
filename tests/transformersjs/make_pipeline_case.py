#!/usr/bin/python3
"""Builds model folders for transformers.js' text pipelines from two
../shared/hf-golden-encdec fixtures, and what the pipelines must return.

  make_pipeline_case.py SHARED_ENCDEC OUT_DIR

The fixtures have no tokenizer: each input folder gets a BERT WordPiece
tokenizer (tokenizer.json, tokenizer_config.json) over the words w5 ... w255
(ids 5 ... 255; [PAD] 0, [UNK] 1, [CLS] 2, [SEP] 3, [MASK] 4), so the ids of a
text are known. OUT_DIR/expected.json holds, from the numpy reference
(tests/reference/encdec), for `feature-extraction` (bert-sentence_embedding,
BertModel) the mean-pooled, L2-normalised embeddings of two texts of
different lengths (padded as the pipeline pads them), and for `fill-mask`
(bert-base, BertForMaskedLM) the top-5 token ids and softmax scores at the
mask, and for `text2text-generation` (t5-base), `translation` (marian-base)
and `summarization` (bart-base) the fixture's Hugging Face greedy ids as
text, through a word-level tokenizer of the same kind (seq2seq_case).
check_pipelines.mjs runs the pipelines on archc's folders.
"""
import json
import os
import shutil
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(HERE, "..", "reference", "encdec"))
import encdec_reference as er  # noqa: E402
from hf_reference import read_safetensors  # noqa: E402

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
FEATURE_TEXTS = ["w10 w20 w30 w40", "w7 w8"]
MASK_TEXT = "w11 w12 [MASK] w14 w15"


def tokenizer_files(folder, vocab_size):
    vocab = {t: i for i, t in enumerate(SPECIALS)}
    vocab.update({f"w{i}": i for i in range(len(SPECIALS), vocab_size)})
    special = lambda t: {"id": vocab[t], "content": t, "single_word": False, "lstrip": False,  # noqa: E731
                         "rstrip": False, "normalized": False, "special": True}
    tok = {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [special(t) for t in SPECIALS],
        "normalizer": {"type": "BertNormalizer", "clean_text": True, "handle_chinese_chars": True,
                       "strip_accents": None, "lowercase": True},
        "pre_tokenizer": {"type": "BertPreTokenizer"},
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                       {"SpecialToken": {"id": "[SEP]", "type_id": 0}}],
            "pair": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                     {"SpecialToken": {"id": "[SEP]", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}},
                     {"SpecialToken": {"id": "[SEP]", "type_id": 1}}],
            "special_tokens": {t: {"id": t, "ids": [vocab[t]], "tokens": [t]} for t in ("[CLS]", "[SEP]")}},
        "decoder": {"type": "WordPiece", "prefix": "##", "cleanup": True},
        "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
                  "max_input_chars_per_word": 100, "vocab": vocab},
    }
    with open(os.path.join(folder, "tokenizer.json"), "w") as f:
        json.dump(tok, f)
    cfg = {"tokenizer_class": "BertTokenizer", "do_lower_case": True, "model_max_length": 64,
           "pad_token": "[PAD]", "unk_token": "[UNK]", "cls_token": "[CLS]", "sep_token": "[SEP]",
           "mask_token": "[MASK]"}
    with open(os.path.join(folder, "tokenizer_config.json"), "w") as f:
        json.dump(cfg, f)
    return vocab


def seq2seq_case(case, folder):
    """An encoder-decoder fixture with a word-level tokenizer whose tokens
    are the config's special tokens (by id) and w<id> for every other id: the
    text of row 0's input ids tokenizes back to them (the specials are added
    tokens), and the greedy ids Hugging Face generated decode to a known
    text (specials skipped)."""
    os.makedirs(folder)
    for name in ("config.json", "model.safetensors", "generation_config.json"):
        shutil.copy(os.path.join(case, name), folder)
    with open(os.path.join(case, "config.json")) as f:
        cfg = json.load(f)
    specials = {}
    for key, text in (("pad_token_id", "<pad>"), ("eos_token_id", "</s>"), ("bos_token_id", "<s>")):
        if isinstance(cfg.get(key), int) and cfg[key] not in specials:
            specials[cfg[key]] = text
    vocab = {specials.get(i, f"w{i}"): i for i in range(cfg["vocab_size"])}
    added = [{"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": True} for i, t in sorted(specials.items())]
    tok = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
           "normalizer": None, "pre_tokenizer": {"type": "WhitespaceSplit"},
           "post_processor": None, "decoder": None,
           "model": {"type": "WordLevel", "vocab": vocab, "unk_token": "<pad>"}}
    with open(os.path.join(folder, "tokenizer.json"), "w") as f:
        json.dump(tok, f)
    names = {"pad_token_id": "pad_token", "eos_token_id": "eos_token", "bos_token_id": "bos_token"}
    tcfg = {"tokenizer_class": "PreTrainedTokenizerFast", "model_max_length": 64}
    for key, name in names.items():
        if isinstance(cfg.get(key), int):
            tcfg[name] = specials[cfg[key]]
    with open(os.path.join(folder, "tokenizer_config.json"), "w") as f:
        json.dump(tcfg, f)
    E, _ = read_safetensors(os.path.join(case, "expected.safetensors"))
    row = [int(i) for i in E["input_ids"][0]]
    greedy = [int(i) for i in E["greedy_ids"][0]]
    inv = {i: t for t, i in vocab.items()}
    text = " ".join(inv[i] for i in row)
    generated = " ".join(inv[i] for i in greedy[1:] if i not in specials)
    return {"case": os.path.basename(case), "text": text, "input_ids": row,
            "max_new_tokens": len(greedy) - 1, "generated_text": generated}


def ids_of(text, vocab):
    return [vocab["[CLS]"]] + [vocab[w] for w in text.split()] + [vocab["[SEP]"]]


def load(folder):
    with open(os.path.join(folder, "config.json")) as f:
        cfg = json.load(f)
    W, _ = read_safetensors(os.path.join(folder, "model.safetensors"))
    return cfg, {k: v.astype(np.float64) for k, v in W.items()}


def main():
    shared, out = sys.argv[1], sys.argv[2]
    shutil.rmtree(out, ignore_errors=True)
    expected = {}
    # feature-extraction: mean pooling and normalisation of BertModel.
    fe = os.path.join(out, "feature-extraction")
    os.makedirs(fe)
    for name in ("config.json", "model.safetensors"):
        shutil.copy(os.path.join(shared, "bert-sentence_embedding", name), fe)
    cfg, W = load(fe)
    vocab = tokenizer_files(fe, cfg["vocab_size"])
    rows = [ids_of(t, vocab) for t in FEATURE_TEXTS]
    S = max(map(len, rows))
    ids = np.array([r + [0] * (S - len(r)) for r in rows])
    mask = np.array([[1] * len(r) + [0] * (S - len(r)) for r in rows])
    h = er.encoder_outputs(cfg, W, ids, mask, np.zeros_like(ids))["last_hidden_state"]
    pooled = (h * mask[:, :, None]).sum(1) / mask.sum(1, keepdims=True)
    pooled /= np.linalg.norm(pooled, axis=1, keepdims=True)
    expected["feature-extraction"] = {"texts": FEATURE_TEXTS, "input_ids": ids.tolist(),
                                      "embeddings": pooled.tolist()}
    # fill-mask: the top 5 at the mask of BertForMaskedLM.
    fm = os.path.join(out, "fill-mask")
    os.makedirs(fm)
    for name in ("config.json", "model.safetensors"):
        shutil.copy(os.path.join(shared, "bert-base", name), fm)
    cfg, W = load(fm)
    vocab = tokenizer_files(fm, cfg["vocab_size"])
    row = ids_of(MASK_TEXT, vocab)
    ids = np.array([row])
    logits = er.encoder_outputs(cfg, W, ids, np.ones_like(ids), np.zeros_like(ids))["logits"][0]
    at = row.index(vocab["[MASK]"])
    p = np.exp(logits[at] - logits[at].max())
    p /= p.sum()
    top = np.argsort(-p)[:6]
    expected["fill-mask"] = {"text": MASK_TEXT, "input_ids": row, "top_ids": top[:5].tolist(),
                             "top_scores": p[top[:5]].tolist(),
                             "min_gap": float(min(p[top[i]] - p[top[i + 1]] for i in range(5)))}
    # text2text-generation (T5, BART) and translation (Marian): Hugging
    # Face's own greedy ids of the fixture, as text.
    for task, case in (("text2text-generation", "t5-base"), ("translation", "marian-base"),
                       ("summarization", "bart-base")):
        expected[task] = seq2seq_case(os.path.join(shared, case), os.path.join(out, task))
    with open(os.path.join(out, "expected.json"), "w") as f:
        json.dump(expected, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
