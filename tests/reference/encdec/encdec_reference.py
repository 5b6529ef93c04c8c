#!/usr/bin/python3
"""A numpy float64 reference of the encoder, encoder-decoder and speech
families (BERT, RoBERTa / XLM-R, DistilBERT, ModernBERT, MPNet, DeBERTa-v2,
BART / mBART, Marian, T5 / mT5, Whisper), written from the Hugging Face
behaviours that ../shared/hf-golden-encdec/index.md lists (MPNet from
transformers' modeling_mpnet.py, DeBERTa-v2 from modeling_deberta_v2.py:
no fixtures), independently of archc (weights by their checkpoint names, no
archc code or output).

  encoder_outputs(cfg, W, input_ids, attention_mask, token_type_ids)
      -> {last_hidden_state, logits, pooler_output} of architectures[0]
  Seq2Seq(cfg, W): encode(inputs) -> encoder output, logits(enc, mask,
      decoder_input_ids) -> [B, T, V], greedy(enc, mask, start, steps)
"""
import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from hf_reference import ACTIVATIONS, _gelu_erf, _layer_norm, _softmax  # noqa: E402

NEG = float(np.finfo(np.float32).min)


def act(name):
    if name not in ACTIVATIONS:
        raise ValueError(f"activation {name!r} not in the reference")
    return ACTIVATIONS[name]


def lin(x, W, name, bias=True):
    y = x @ W[name + ".weight"].T
    if bias and (name + ".bias") in W:
        y = y + W[name + ".bias"]
    return y


def ln(x, W, name, eps, bias=True):
    b = W[name + ".bias"] if bias else 0.0
    return _layer_norm(x, W[name + ".weight"], b, eps)


def rms(x, w, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def heads_of(x, h):
    B, S, D = x.shape
    return x.reshape(B, S, h, D // h).transpose(0, 2, 1, 3)


def attention(q, k, v, heads, scale, add=None):
    """q [B, S, H*d], k/v [B, K, H*d]; add: additive [B or 1, H or 1, S, K]."""
    qh, kh, vh = heads_of(q, heads), heads_of(k, heads), heads_of(v, heads)
    s = (qh @ kh.transpose(0, 1, 3, 2)) * scale
    if add is not None:
        s = s + add
    o = _softmax(s) @ vh
    B, H, S, d = o.shape
    return o.transpose(0, 2, 1, 3).reshape(B, S, H * d)


def key_mask(mask):
    """[B, K] 1/0 -> additive [B, 1, 1, K]."""
    if mask is None:
        return None
    return np.where(np.asarray(mask)[:, None, None, :] == 1, 0.0, NEG)


def causal(S):
    return np.where(np.tril(np.ones((S, S))) == 1, 0.0, NEG)[None, None]


def task(cfg):
    cls = (cfg.get("architectures") or [""])[0]
    for key, t in (("ForMaskedLM", "mlm"), ("ForSequenceClassification", "seqcls"),
                   ("ForTokenClassification", "tokcls")):
        if key in cls:
            return t
    return "base"


def labels(cfg):
    if cfg.get("id2label"):
        return len(cfg["id2label"])
    return cfg.get("num_labels", 2)


# ---------------------------------------------------------------------------
# Encoders
# ---------------------------------------------------------------------------
def bert_like(cfg, W, ids, mask, types):
    mt = cfg["model_type"]
    t = task(cfg)
    roberta = mt in ("roberta", "xlm-roberta")
    p = "" if t == "base" else ("roberta." if roberta else "bert.")
    eps = cfg.get("layer_norm_eps", 1e-12)
    H = cfg["hidden_size"]
    nh = cfg["num_attention_heads"]
    a = act(cfg.get("hidden_act", "gelu"))
    B, S = ids.shape
    if roberta:
        pad = cfg.get("pad_token_id", 1)
        real = (ids != pad).astype(np.int64)
        pos = np.cumsum(real, axis=1) * real + pad
    else:
        pos = np.broadcast_to(np.arange(S), (B, S))
    if types is None:
        types = np.zeros_like(ids)
    e = p + "embeddings."
    x = W[e + "word_embeddings.weight"][ids] + W[e + "position_embeddings.weight"][pos] \
        + W[e + "token_type_embeddings.weight"][types]
    x = ln(x, W, e + "LayerNorm", eps)
    m = key_mask(mask)
    for i in range(cfg["num_hidden_layers"]):
        L = f"{p}encoder.layer.{i}."
        o = attention(lin(x, W, L + "attention.self.query"), lin(x, W, L + "attention.self.key"),
                      lin(x, W, L + "attention.self.value"), nh, (H // nh) ** -0.5, m)
        x = ln(x + lin(o, W, L + "attention.output.dense"), W, L + "attention.output.LayerNorm", eps)
        f = lin(a(lin(x, W, L + "intermediate.dense")), W, L + "output.dense")
        x = ln(x + f, W, L + "output.LayerNorm", eps)
    out = {}
    word = W[e + "word_embeddings.weight"]
    tied = cfg.get("tie_word_embeddings", True)
    if t == "base":
        out["last_hidden_state"] = x
        if f"{p}pooler.dense.weight" in W:
            out["pooler_output"] = np.tanh(lin(x[:, 0], W, p + "pooler.dense"))
    elif t == "mlm":
        out["last_hidden_state"] = x
        if roberta:
            h = ln(_gelu_erf(lin(x, W, "lm_head.dense")), W, "lm_head.layer_norm", eps)
            hp = "lm_head."
        else:
            h = ln(a(lin(x, W, "cls.predictions.transform.dense")), W,
                   "cls.predictions.transform.LayerNorm", eps)
            hp = "cls.predictions."
        # Untied (transformers 5: no tied keys at all), the decoder's own
        # weight and bias; the head's bias is then unused.
        if tied:
            out["logits"] = h @ word.T + W[hp + "bias"]
        else:
            out["logits"] = lin(h, W, hp + "decoder")
    elif t == "seqcls":
        if roberta:
            h = np.tanh(lin(x[:, 0], W, "classifier.dense"))
            out["logits"] = lin(h, W, "classifier.out_proj")
        else:
            out["logits"] = lin(np.tanh(lin(x[:, 0], W, "bert.pooler.dense")), W, "classifier")
    else:
        out["logits"] = lin(x, W, "classifier")
    return out


def distilbert(cfg, W, ids, mask, types):
    t = task(cfg)
    p = "" if t == "base" else "distilbert."
    D, nh = cfg["dim"], cfg["n_heads"]
    a = act(cfg.get("activation", "gelu"))
    B, S = ids.shape
    x = W[p + "embeddings.word_embeddings.weight"][ids] + W[p + "embeddings.position_embeddings.weight"][np.arange(S)]
    x = ln(x, W, p + "embeddings.LayerNorm", 1e-12)
    m = key_mask(mask)
    for i in range(cfg["n_layers"]):
        L = f"{p}transformer.layer.{i}."
        o = attention(lin(x, W, L + "attention.q_lin"), lin(x, W, L + "attention.k_lin"),
                      lin(x, W, L + "attention.v_lin"), nh, (D // nh) ** -0.5, m)
        x = ln(x + lin(o, W, L + "attention.out_lin"), W, L + "sa_layer_norm", 1e-12)
        x = ln(x + lin(a(lin(x, W, L + "ffn.lin1")), W, L + "ffn.lin2"), W, L + "output_layer_norm", 1e-12)
    out = {}
    if t == "base":
        out["last_hidden_state"] = x
    elif t == "mlm":
        out["last_hidden_state"] = x
        h = ln(a(lin(x, W, "vocab_transform")), W, "vocab_layer_norm", 1e-12)
        dec = W[p + "embeddings.word_embeddings.weight"] if cfg.get("tie_word_embeddings", True) \
            else W["vocab_projector.weight"]
        out["logits"] = h @ dec.T + W["vocab_projector.bias"]
    elif t == "seqcls":
        h = np.maximum(lin(x[:, 0], W, "pre_classifier"), 0.0)
        out["logits"] = lin(h, W, "classifier")
    else:
        out["logits"] = lin(x, W, "classifier")
    return out


def rope(x, pos, theta, d):
    """Rotate-half RoPE of x [B, H, S, d] at positions pos [S]."""
    inv = 1.0 / (theta ** (np.arange(0, d, 2, dtype=np.float64) / d))
    ang = np.outer(pos, inv)
    cos = np.cos(np.concatenate([ang, ang], -1))
    sin = np.sin(np.concatenate([ang, ang], -1))
    rot = np.concatenate([-x[..., d // 2:], x[..., : d // 2]], -1)
    return x * cos + rot * sin


def modernbert(cfg, W, ids, mask, types):
    t = task(cfg)
    p = "" if t == "base" else "model."
    H, nh = cfg["hidden_size"], cfg["num_attention_heads"]
    d = H // nh
    eps = cfg.get("norm_eps", 1e-5)
    nb = cfg.get("norm_bias", False)
    n = cfg.get("num_hidden_layers", 22)
    if cfg.get("layer_types"):
        kinds = cfg["layer_types"]
    else:
        g = cfg.get("global_attn_every_n_layers", 3)
        kinds = ["full_attention" if i % g == 0 else "sliding_attention" for i in range(n)]
    half = cfg["sliding_window"] if cfg.get("sliding_window") is not None else cfg.get("local_attention", 128) // 2
    rp = cfg.get("rope_parameters") or {}
    thetas = {"full_attention": rp.get("full_attention", {}).get("rope_theta", cfg.get("global_rope_theta", 160000.0)),
              "sliding_attention": rp.get("sliding_attention", {}).get("rope_theta",
                                                                     cfg.get("local_rope_theta", 10000.0))}
    a = act(cfg.get("hidden_activation", "gelu"))
    B, S = ids.shape
    x = ln(W[p + "embeddings.tok_embeddings.weight"][ids], W, p + "embeddings.norm", eps, nb)
    pos = np.arange(S)
    km = key_mask(mask)
    window = np.where(np.abs(pos[:, None] - pos[None, :]) <= half, 0.0, NEG)[None, None]
    for i in range(n):
        L = f"{p}layers.{i}."
        h = x if i == 0 else ln(x, W, L + "attn_norm", eps, nb)
        qkv = lin(h, W, L + "attn.Wqkv")
        q, k, v = (heads_of(z, nh) for z in np.split(qkv, 3, axis=-1))
        th = thetas[kinds[i]]
        q, k = rope(q, pos, th, d), rope(k, pos, th, d)
        s = (q @ k.transpose(0, 1, 3, 2)) * d ** -0.5 + km
        if kinds[i] == "sliding_attention":
            s = np.maximum(s + window, NEG)
        o = (_softmax(s) @ v).transpose(0, 2, 1, 3).reshape(B, S, H)
        x = x + lin(o, W, L + "attn.Wo")
        h = ln(x, W, L + "mlp_norm", eps, nb)
        inp, gate = np.split(lin(h, W, L + "mlp.Wi"), 2, axis=-1)
        x = x + lin(a(inp) * gate, W, L + "mlp.Wo")
    x = ln(x, W, p + "final_norm", eps, nb)
    out = {}
    ca = act(cfg.get("classifier_activation", "gelu"))

    def head(z):
        return ln(ca(lin(z, W, "head.dense")), W, "head.norm", eps, nb)
    if t == "base":
        out["last_hidden_state"] = x
    elif t == "mlm":
        out["last_hidden_state"] = x
        dec = W[p + "embeddings.tok_embeddings.weight"] if cfg.get("tie_word_embeddings", True) \
            else W["decoder.weight"]
        lg = head(x) @ dec.T
        out["logits"] = lg + W["decoder.bias"] if cfg.get("decoder_bias", True) else lg
    elif t == "seqcls":
        if cfg.get("classifier_pooling", "cls") == "cls":
            pooled = x[:, 0]
        else:
            mm = np.asarray(mask)[:, :, None]
            pooled = (x * mm).sum(1) / mm.sum(1)
        out["logits"] = lin(head(pooled), W, "classifier")
    else:
        out["logits"] = lin(head(x), W, "classifier")
    return out


def mpnet(cfg, W, ids, mask, types):
    """MPNet: RoBERTa-like positions (padding_idx 1), T5's bidirectional
    buckets (32, max distance 128) as a bias on every layer's scores."""
    t = task(cfg)
    p = "" if t == "base" else "mpnet."
    eps = cfg.get("layer_norm_eps", 1e-12)
    H, nh = cfg.get("hidden_size", 768), cfg.get("num_attention_heads", 12)
    a = act(cfg.get("hidden_act", "gelu"))
    B, S = ids.shape
    real = (ids != 1).astype(np.int64)
    pos = np.cumsum(real, axis=1) * real + 1
    x = W[p + "embeddings.word_embeddings.weight"][ids] + W[p + "embeddings.position_embeddings.weight"][pos]
    x = ln(x, W, p + "embeddings.LayerNorm", eps)
    rel = np.arange(S)[None, :] - np.arange(S)[:, None]
    table = W[p + "encoder.relative_attention_bias.weight"]
    bias = table[t5_buckets(rel, True, 32, 128)].transpose(2, 0, 1)[None]
    m = key_mask(mask) + bias
    for i in range(cfg.get("num_hidden_layers", 12)):
        L = f"{p}encoder.layer.{i}."
        o = attention(lin(x, W, L + "attention.attn.q"), lin(x, W, L + "attention.attn.k"),
                      lin(x, W, L + "attention.attn.v"), nh, (H // nh) ** -0.5, m)
        x = ln(x + lin(o, W, L + "attention.attn.o"), W, L + "attention.LayerNorm", eps)
        x = ln(x + lin(a(lin(x, W, L + "intermediate.dense")), W, L + "output.dense"), W, L + "output.LayerNorm", eps)
    out = {}
    if t == "base":
        out["last_hidden_state"] = x
        if "pooler.dense.weight" in W:
            out["pooler_output"] = np.tanh(lin(x[:, 0], W, "pooler.dense"))
    elif t == "mlm":
        out["last_hidden_state"] = x
        h = ln(_gelu_erf(lin(x, W, "lm_head.dense")), W, "lm_head.layer_norm", eps)
        if cfg.get("tie_word_embeddings", True):
            out["logits"] = h @ W[p + "embeddings.word_embeddings.weight"].T + W["lm_head.bias"]
        else:
            out["logits"] = lin(h, W, "lm_head.decoder")
    elif t == "seqcls":
        out["logits"] = lin(np.tanh(lin(x[:, 0], W, "classifier.dense")), W, "classifier.out_proj")
    else:
        out["logits"] = lin(x, W, "classifier")
    return out


def deberta_parts(v):
    """pos_att_type / norm_rel_ebd: a list as it is, a string split at "|",
    each part stripped and lower-cased (DebertaV2Config, the encoder)."""
    if v is None:
        return []
    if isinstance(v, str):
        return [x.strip() for x in v.lower().split("|")]
    return list(v)


def deberta_log_bucket(rel, bucket_size, max_position):
    """make_log_bucket_position, in float32 as torch computes it."""
    sign = np.sign(rel)
    mid = bucket_size // 2
    abs_pos = np.where((rel < mid) & (rel > -mid), mid - 1, np.abs(rel))
    ratio = (abs_pos / mid).astype(np.float32)
    denom = np.log(np.float32((max_position - 1) / mid))
    log_pos = np.ceil(np.log(ratio) / denom * np.float32(mid - 1)).astype(np.float32) + np.float32(mid)
    return np.where(abs_pos <= mid, rel.astype(np.float32), log_pos * sign).astype(np.int64)


def deberta_v2(cfg, W, ids, mask, types):
    """DeBERTa-v2 / v3: disentangled attention over relative embeddings."""
    t = task(cfg)
    p = "" if t == "base" else "deberta."
    H = cfg.get("hidden_size", 1536)
    nh = cfg.get("num_attention_heads", 24)
    d = cfg.get("attention_head_size", H // nh)
    E = cfg.get("embedding_size", H)
    eps = cfg.get("layer_norm_eps", 1e-7)
    a = act(cfg.get("hidden_act", "gelu"))
    B, S = ids.shape
    pos_types = deberta_parts(cfg.get("pos_att_type"))
    for x in pos_types:
        if x not in ("c2p", "p2c"):
            raise ValueError(f"pos_att_type {x!r} not in the reference")
    relative = cfg.get("relative_attention", False)
    share = cfg.get("share_att_key", False)
    max_rel = cfg.get("max_relative_positions", -1)
    if max_rel < 1:
        max_rel = cfg.get("max_position_embeddings", 512)
    buckets = cfg.get("position_buckets", -1)
    span = buckets if buckets > 0 else max_rel
    norm_rel = "layer_norm" in deberta_parts(cfg.get("norm_rel_ebd", "none"))
    factor = 1 + ("c2p" in pos_types) + ("p2c" in pos_types)
    scale = math.sqrt(d * factor)
    m = np.asarray(mask).astype(np.float64)
    # Embeddings.
    e = p + "embeddings."
    word = W[e + "word_embeddings.weight"]
    x = word[ids]
    if cfg.get("position_biased_input", True):
        x = x + W[e + "position_embeddings.weight"][np.arange(S)][None]
    if cfg.get("type_vocab_size", 0) > 0:
        x = x + W[e + "token_type_embeddings.weight"][types if types is not None else np.zeros_like(ids)]
    if E != H:
        x = x @ W[e + "embed_proj.weight"].T
    x = ln(x, W, e + "LayerNorm", eps) * m[:, :, None]
    emb = x
    # Relative positions q - k (bucketed) and the embeddings.
    rel_pos = np.arange(S)[:, None] - np.arange(S)[None, :]
    if buckets > 0:
        rel_pos = deberta_log_bucket(rel_pos, buckets, max_rel)
    rel_emb = None
    if relative:
        rel_emb = W[p + "encoder.rel_embeddings.weight"]
        if norm_rel:
            rel_emb = ln(rel_emb, W, p + "encoder.LayerNorm", eps)
        rel_emb = rel_emb[: 2 * span]
    allowed = (m[:, None, :, None] * m[:, None, None, :]) > 0  # [B, 1, S, S]
    conv_k = cfg.get("conv_kernel_size", 0)
    for i in range(cfg.get("num_hidden_layers", 24)):
        L = f"{p}encoder.layer.{i}."
        A = L + "attention.self."
        q = heads_of(lin(x, W, A + "query_proj"), nh)  # [B, nh, S, d]
        k = heads_of(lin(x, W, A + "key_proj"), nh)
        v = heads_of(lin(x, W, A + "value_proj"), nh)
        scores = q @ (k.transpose(0, 1, 3, 2) / scale)
        if relative:
            def pos(name):
                return heads_of(lin(rel_emb[None], W, A + name), nh)[0]  # [nh, 2 span, d]
            if "c2p" in pos_types:
                pk = pos("key_proj" if share else "pos_key_proj")
                c2p = q @ pk.transpose(0, 2, 1)  # [B, nh, S, 2 span]
                idx = np.clip(rel_pos + span, 0, 2 * span - 1)
                scores = scores + np.take_along_axis(c2p, np.broadcast_to(idx, c2p.shape[:2] + idx.shape), -1) / scale
            if "p2c" in pos_types:
                pq = pos("query_proj" if share else "pos_query_proj")
                p2c = k @ pq.transpose(0, 2, 1)  # [B, nh, S(keys), 2 span]
                idx = np.clip(-rel_pos + span, 0, 2 * span - 1)  # [key, query]
                g = np.take_along_axis(p2c, np.broadcast_to(idx, p2c.shape[:2] + idx.shape), -1)
                scores = scores + g.transpose(0, 1, 3, 2) / scale
        scores = np.where(allowed, scores, NEG)
        o = _softmax(scores) @ v
        o = o.transpose(0, 2, 1, 3).reshape(B, S, nh * d)
        x = ln(x + lin(o, W, L + "attention.output.dense"), W, L + "attention.output.LayerNorm", eps)
        f = lin(a(lin(x, W, L + "intermediate.dense")), W, L + "output.dense")
        x = ln(x + f, W, L + "output.LayerNorm", eps)
        if i == 0 and conv_k > 0:
            c = p + "encoder.conv."
            out = conv1d_same(emb.transpose(0, 2, 1), W[c + "conv.weight"], W[c + "conv.bias"],
                              cfg.get("conv_groups", 1)).transpose(0, 2, 1)
            out = act(cfg.get("conv_act", "tanh"))(out * m[:, :, None])
            x = ln(x + out, W, c + "LayerNorm", eps) * m[:, :, None]
    out = {}
    if t == "base":
        out["last_hidden_state"] = x
    elif t == "mlm":
        out["last_hidden_state"] = x
        if cfg.get("legacy", True):
            h = ln(a(lin(x, W, "cls.predictions.transform.dense")), W, "cls.predictions.transform.LayerNorm", eps)
            if cfg.get("tie_word_embeddings", True):
                out["logits"] = h @ word.T + W["cls.predictions.bias"]
            else:
                out["logits"] = lin(h, W, "cls.predictions.decoder")
        else:
            h = ln(a(lin(x, W, "lm_predictions.lm_head.dense")), W, "lm_predictions.lm_head.LayerNorm", eps)
            out["logits"] = h @ word.T + W["lm_predictions.lm_head.bias"]
    elif t == "seqcls":
        pooled = act(cfg.get("pooler_hidden_act", "gelu"))(lin(x[:, 0], W, "pooler.dense"))
        out["logits"] = lin(pooled, W, "classifier")
    else:
        out["logits"] = lin(x, W, "classifier")
    return out


def conv1d_same(x, w, b, groups):
    """x [B, C, N], w [O, C / groups, K] (K odd), padding (K - 1) / 2."""
    K = w.shape[2]
    pad = (K - 1) // 2
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad)))
    N = x.shape[2]
    cols = np.stack([xp[:, :, j: j + K] for j in range(N)], axis=1)  # B, N, C, K
    O, Cg = w.shape[0], w.shape[1]
    og = O // groups
    outs = [np.einsum("bncj,ocj->bon", cols[:, :, g * Cg:(g + 1) * Cg], w[g * og:(g + 1) * og])
            for g in range(groups)]
    return np.concatenate(outs, axis=1) + b[None, :, None]


def encoder_outputs(cfg, W, ids, mask, types=None):
    mt = cfg["model_type"]
    if mt in ("bert", "roberta", "xlm-roberta"):
        return bert_like(cfg, W, ids, mask, types)
    if mt == "distilbert":
        return distilbert(cfg, W, ids, mask, types)
    if mt == "modernbert":
        return modernbert(cfg, W, ids, mask, types)
    if mt == "mpnet":
        return mpnet(cfg, W, ids, mask, types)
    if mt == "deberta-v2":
        return deberta_v2(cfg, W, ids, mask, types)
    raise ValueError(f"model_type {mt!r} is no encoder of the reference")


# ---------------------------------------------------------------------------
# Encoder-decoders
# ---------------------------------------------------------------------------
def marian_table(rows, dim):
    pos = np.arange(rows)[:, None]
    enc = pos / np.power(10000, 2 * (np.arange(dim) // 2) / dim)
    out = np.zeros((rows, dim))
    sentinel = dim // 2 if dim % 2 == 0 else dim // 2 + 1
    out[:, :sentinel] = np.sin(enc[:, 0::2])
    out[:, sentinel:] = np.cos(enc[:, 1::2])
    return out


def t5_buckets(rel, bidirectional, num_buckets, max_distance):
    """transformers' _relative_position_bucket (the log in float32)."""
    b = np.zeros_like(rel)
    if bidirectional:
        num_buckets //= 2
        b += (rel > 0).astype(np.int64) * num_buckets
        rel = np.abs(rel)
    else:
        rel = -np.minimum(rel, 0)
    max_exact = num_buckets // 2
    small = rel < max_exact
    # (distances below max_exact take `small`; 1 keeps the log finite)
    far = np.maximum(rel, 1).astype(np.float32)
    large = max_exact + (np.log(far / np.float32(max_exact))
                         / np.float32(math.log(max_distance / max_exact))
                         * np.float32(num_buckets - max_exact)).astype(np.int64)
    large = np.minimum(large, num_buckets - 1)
    return b + np.where(small, rel, large)


class Seq2Seq:
    def __init__(self, cfg, W):
        self.cfg, self.W = cfg, W
        self.mt = cfg["model_type"]

    # ---- BART / mBART / Marian / Whisper ---------------------------------
    def _bart_layer(self, x, L, heads, self_add, cross=None):
        c, W = self.cfg, self.W
        pre = self.mt in ("mbart", "whisper")
        a = act(c.get("activation_function", "gelu"))
        d = c["d_model"] // heads

        def block(x, f, norm):
            if pre:
                return x + f(ln(x, W, L + norm, 1e-5))
            return ln(x + f(x), W, L + norm, 1e-5)

        def mha(h, kv, name, add):
            return lin(attention(lin(h, W, name + ".q_proj"), lin(kv, W, name + ".k_proj"),
                                 lin(kv, W, name + ".v_proj"), heads, d ** -0.5, add), W, name + ".out_proj")
        x = block(x, lambda h: mha(h, h, L + "self_attn", self_add), "self_attn_layer_norm")
        if cross is not None:
            enc, add = cross
            x = block(x, lambda h: mha(h, enc, L + "encoder_attn", add), "encoder_attn_layer_norm")
        return block(x, lambda h: lin(a(lin(h, W, L + "fc1")), W, L + "fc2"), "final_layer_norm")

    def _bart_embed(self, ids, stack):
        c, W = self.cfg, self.W
        B, S = ids.shape
        D = c["d_model"]
        shared = self.mt != "whisper" and (self.mt != "marian" or c.get("share_encoder_decoder_embeddings", True))
        table = W["model.shared.weight"] if shared else W[f"model.{stack}.embed_tokens.weight"]
        scale = math.sqrt(D) if (c.get("scale_embedding", False) and self.mt != "whisper") else 1.0
        x = table[ids] * scale
        if self.mt == "marian":
            x = x + marian_table(c["max_position_embeddings"], D)[np.arange(S)]
        elif self.mt == "whisper":
            x = x + W["model.decoder.embed_positions.weight"][np.arange(S)]
        else:
            x = x + W[f"model.{stack}.embed_positions.weight"][np.arange(S) + 2]
        if self.mt in ("bart", "mbart"):
            x = ln(x, W, f"model.{stack}.layernorm_embedding", 1e-5)
        return x, table

    def encode(self, inputs):
        c, W = self.cfg, self.W
        if self.mt in ("t5", "mt5"):
            return self._t5_encode(inputs["input_ids"], inputs["attention_mask"])
        if self.mt == "whisper":
            f = inputs["input_features"].astype(np.float64)
            x = _gelu_erf(conv1d(f, W["model.encoder.conv1.weight"], W["model.encoder.conv1.bias"], 1))
            x = _gelu_erf(conv1d(x, W["model.encoder.conv2.weight"], W["model.encoder.conv2.bias"], 2))
            x = x.transpose(0, 2, 1) + W["model.encoder.embed_positions.weight"]
            m = None
        else:
            x, _ = self._bart_embed(inputs["input_ids"], "encoder")
            m = key_mask(inputs["attention_mask"])
        for i in range(c["encoder_layers"]):
            x = self._bart_layer(x, f"model.encoder.layers.{i}.", c["encoder_attention_heads"], m)
        if self.mt in ("mbart", "whisper"):
            x = ln(x, W, "model.encoder.layer_norm", 1e-5)
        return x

    def logits(self, enc, mask, dec_ids):
        c, W = self.cfg, self.W
        if self.mt in ("t5", "mt5"):
            return self._t5_decode(enc, mask, dec_ids)
        x, table = self._bart_embed(dec_ids, "decoder")
        T = dec_ids.shape[1]
        cm = causal(T)
        em = key_mask(mask)
        for i in range(c["decoder_layers"]):
            x = self._bart_layer(x, f"model.decoder.layers.{i}.", c["decoder_attention_heads"], cm, (enc, em))
        if self.mt in ("mbart", "whisper"):
            x = ln(x, W, "model.decoder.layer_norm", 1e-5)
        head_name = "proj_out.weight" if self.mt == "whisper" else "lm_head.weight"
        if self.mt == "marian":
            tied = c.get("share_encoder_decoder_embeddings", True)
        else:
            tied = c.get("tie_word_embeddings", True)
        head = table if tied else W[head_name]
        lg = x @ head.T
        if "final_logits_bias" in W:
            lg = lg + W["final_logits_bias"]
        return lg

    # ---- T5 ---------------------------------------------------------------
    def _t5_ffn(self, x, L):
        c, W = self.cfg, self.W
        proj = c.get("feed_forward_proj", "gated-gelu" if self.mt == "mt5" else "relu")
        gated = c.get("is_gated_act", proj.startswith("gated-"))
        name = c.get("dense_act_fn", "gelu_new" if proj == "gated-gelu" else proj.split("-")[-1])
        a = act(name)
        if gated:
            h = a(lin(x, W, L + "wi_0", False)) * lin(x, W, L + "wi_1", False)
        else:
            h = a(lin(x, W, L + "wi", False))
        return lin(h, W, L + "wo", False)

    def _t5_bias(self, stack, q, k, bidirectional):
        c = self.cfg
        rel = np.arange(k)[None, :] - np.arange(q)[:, None]
        b = t5_buckets(rel, bidirectional, c.get("relative_attention_num_buckets", 32),
                       c.get("relative_attention_max_distance", 128))
        table = self.W[f"{stack}.block.0.layer.0.SelfAttention.relative_attention_bias.weight"]
        return table[b].transpose(2, 0, 1)[None]

    def _t5_attn(self, h, kv, name, add):
        nh = self.cfg.get("num_heads", 8)
        W = self.W
        o = attention(lin(h, W, name + ".q", False), lin(kv, W, name + ".k", False),
                      lin(kv, W, name + ".v", False), nh, 1.0, add)
        return lin(o, W, name + ".o", False)

    def _eps(self):
        return self.cfg.get("layer_norm_epsilon", 1e-6)

    def _t5_encode(self, ids, mask):
        c, W = self.cfg, self.W
        x = W["shared.weight"][ids]
        S = ids.shape[1]
        add = self._t5_bias("encoder", S, S, True) + key_mask(mask)
        for i in range(c.get("num_layers", 6)):
            L = f"encoder.block.{i}."
            h = rms(x, W[L + "layer.0.layer_norm.weight"], self._eps())
            x = x + self._t5_attn(h, h, L + "layer.0.SelfAttention", add)
            x = x + self._t5_ffn(rms(x, W[L + "layer.1.layer_norm.weight"], self._eps()), L + "layer.1.DenseReluDense.")
        return rms(x, W["encoder.final_layer_norm.weight"], self._eps())

    def _t5_decode(self, enc, mask, ids):
        c, W = self.cfg, self.W
        x = W["shared.weight"][ids]
        T = ids.shape[1]
        add = self._t5_bias("decoder", T, T, False) + causal(T)
        em = key_mask(mask)
        n = c.get("num_decoder_layers", c.get("num_layers", 6))
        for i in range(n):
            L = f"decoder.block.{i}."
            h = rms(x, W[L + "layer.0.layer_norm.weight"], self._eps())
            x = x + self._t5_attn(h, h, L + "layer.0.SelfAttention", add)
            h = rms(x, W[L + "layer.1.layer_norm.weight"], self._eps())
            x = x + self._t5_attn(h, enc, L + "layer.1.EncDecAttention", em)
            x = x + self._t5_ffn(rms(x, W[L + "layer.2.layer_norm.weight"], self._eps()), L + "layer.2.DenseReluDense.")
        x = rms(x, W["decoder.final_layer_norm.weight"], self._eps())
        if self.mt == "mt5":
            scale = False
        else:
            scale = c.get("scale_decoder_outputs", c.get("tie_word_embeddings", True))
        if scale:
            x = x * c["d_model"] ** -0.5
        head = W["lm_head.weight"] if "lm_head.weight" in W else W["shared.weight"]
        return x @ head.T

    def greedy(self, enc, mask, start, steps):
        """An uncached argmax loop: ids [start, t1, ...], logits [steps, V]."""
        ids = [start]
        out = []
        for _ in range(steps):
            lg = self.logits(enc, mask, np.array([ids]))[0, -1]
            out.append(lg)
            ids.append(int(np.argmax(lg)))
        return ids, np.stack(out)


def conv1d(x, w, b, stride):
    """x [B, C, N], w [O, C, 3], padding 1."""
    B, C, N = x.shape
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1)))
    n_out = (N + 2 - 3) // stride + 1
    cols = np.stack([xp[:, :, j * stride: j * stride + 3] for j in range(n_out)], axis=1)  # B, n, C, 3
    return np.einsum("bncj,ocj->bon", cols, w) + b[None, :, None]
