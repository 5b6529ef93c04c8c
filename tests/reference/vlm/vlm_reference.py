#!/usr/bin/python3
"""Independent numpy reference of Hugging Face vision-language models.

Written from the Hugging Face transformers semantics of each model
(modeling_gemma3.py, modeling_siglip.py, modeling_llava.py, modeling_clip.py,
modeling_qwen2_5_vl.py, modeling_qwen3_vl.py, modeling_smolvlm.py and their
text decoders), NOT from archc's sources. Everything runs in float64. Where
HF has a particular way of computing something (Qwen2.5-VL's window
reordering and per-window attention split at cu_seqlens, Qwen3-VL's
linspace interpolation, SmolVLM's bucketize positions and view/permute
pixel shuffle, get_rope_index), this follows HF's way, so the reference is
independent of how archc expresses it.

Families (config model_type): gemma3, llava, qwen2_5_vl, qwen3_vl, smolvlm.

Public API
  VlmModel(config, weights)
      .image_features(inputs) -> (features [N, D], extra dict: deepstack list)
      .forward(input_ids [B, S], inputs) -> logits [B, S, V]
          inputs: pixel_values, image_grid_thw (Qwen), pixel_attention_mask
          (SmolVLM), token_type_ids (Gemma 3)
      .rope_index(input_ids, grid) -> (position_ids [3, B, S], deltas [B])  (Qwen)
  expected_weight_shapes(config) -> {checkpoint name: shape}

Options the reference does not implement raise ValueError.
"""
import json
import math
import os
import struct
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from hf_reference import ACTIVATIONS, write_safetensors  # noqa: E402,F401

_DT = {"F32": "<f4", "F64": "<f8", "F16": "<f2", "I64": "<i8", "I32": "<i4", "U8": "u1", "BOOL": "u1"}


def read_safetensors(path):
    """({name: array}, metadata); the fixtures' raw images are U8."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    meta = header.pop("__metadata__", {}) or {}
    out = {}
    for name, e in header.items():
        if e["dtype"] not in _DT:
            raise ValueError(f"{path}: tensor {name}: dtype {e['dtype']} not supported")
        a, b = e["data_offsets"]
        out[name] = np.frombuffer(data[a:b], dtype=_DT[e["dtype"]]).reshape(e["shape"])
    return out, meta

_erf = np.vectorize(math.erf, otypes=[np.float64])


def act(name):
    if name == "quick_gelu":
        return lambda x: x / (1.0 + np.exp(-1.702 * x))
    if name not in ACTIVATIONS:
        raise ValueError(f"activation {name!r} not supported")
    return ACTIVATIONS[name]


def gelu(x):
    return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))


def softmax(x, axis=-1):
    m = np.max(x, axis=axis, keepdims=True)
    e = np.exp(x - m)
    return e / np.sum(e, axis=axis, keepdims=True)


def rms(x, w, eps, offset=0.0):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * (offset + w)


def ln(x, w, b, eps):
    mu = np.mean(x, axis=-1, keepdims=True)
    var = np.mean((x - mu) ** 2, axis=-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * w + b


def lin(x, w, b=None):
    y = x @ w.T
    return y if b is None else y + b


def rotate_half(x):
    h = x.shape[-1] // 2
    return np.concatenate([-x[..., h:], x[..., :h]], axis=-1)


# ---------------------------------------------------------------------------
# text decoders
# ---------------------------------------------------------------------------
# The text classes' defaults the reference reads (transformers 5.3): kv heads
# (None: the head count), head_dim (None: hidden // heads), RMSNorm eps and
# the default RoPE base (Gemma 3's bases are per layer type, below).
TEXT_DEFAULTS = {
    "llava": {"kv": None, "head_dim": None, "eps": 1e-6, "theta": 10000.0},      # LlamaConfig
    "smolvlm": {"kv": None, "head_dim": None, "eps": 1e-6, "theta": 10000.0},    # LlamaConfig
    "qwen2_5_vl": {"kv": 8, "head_dim": None, "eps": 1e-5, "theta": 1000000.0},  # Qwen2_5_VLTextConfig
    "qwen3_vl": {"kv": 32, "head_dim": 128, "eps": 1e-6, "theta": 500000.0},     # Qwen3VLTextConfig
    "gemma3": {"kv": 4, "head_dim": 256, "eps": 1e-6, "theta": 1000000.0},       # Gemma3TextConfig
}


class Text:
    """The text model of a VLM: llama (llava, smolvlm), qwen2 (qwen2_5_vl,
    with chunked M-RoPE), qwen3 (qwen3_vl, interleaved M-RoPE, q/k norms),
    gemma3 text."""

    def __init__(self, kind, tc, w, prefix, head):
        self.kind, self.tc, self.w, self.prefix = kind, tc, w, prefix
        g = lambda k, d=None: tc.get(k, d)  # noqa: E731
        self.D = tc["hidden_size"]
        self.L = tc["num_hidden_layers"]
        self.H = tc["num_attention_heads"]
        d = TEXT_DEFAULTS[kind]
        # An absent key takes the text class's default; a null kv count is
        # the head count (every class's __post_init__).
        kv = tc.get("num_key_value_heads", d["kv"])
        self.KV = self.H if kv is None else kv
        self.V = tc["vocab_size"]
        if kind == "qwen2_5_vl":
            self.hd = self.D // self.H  # Qwen2_5_VLAttention ignores head_dim
        else:
            self.hd = g("head_dim", d["head_dim"]) or self.D // self.H
        self.eps = g("rms_norm_eps", d["eps"])
        if kind == "gemma3":
            self.act = act(g("hidden_activation", "gelu_pytorch_tanh"))
        else:
            self.act = act(g("hidden_act", "silu"))
        # transformers-4 rope_scaling replaces rope_parameters; rope_theta
        # fills a dict without one, else the class's default theta.
        rp = (g("rope_parameters") or g("rope_scaling") if kind == "gemma3"
              else g("rope_scaling") or g("rope_parameters")) or {}
        self.theta = rp.get("rope_theta", g("rope_theta", d["theta"]))
        if kind == "gemma3":
            self._gemma_setup(tc, rp)
        else:
            rtype = rp.get("rope_type", rp.get("type", "default"))
            if rtype not in ("default", "mrope"):
                raise ValueError(f"rope type {rtype} not supported for {kind}")
            if g("sliding_window") and g("use_sliding_window", kind in ("llava", "smolvlm")) \
                    and tc.get("model_type") == "mistral":
                raise ValueError("sliding windows are not supported by the reference")
            # Qwen3-VL's text rotary falls back to [24, 20, 20]; Qwen2.5-VL
            # requires the key.
            self.mrope = rp.get("mrope_section", [24, 20, 20] if kind == "qwen3_vl" else None)
            self.interleaved = kind == "qwen3_vl"
        self.head_w = head

    def _gemma_setup(self, tc, rp):
        if "full_attention" in rp:
            full, local = rp["full_attention"], rp["sliding_attention"]
        else:
            full, local = dict(rp), {"rope_theta": tc.get("rope_local_base_freq", 10000.0)}
            full.setdefault("rope_theta", tc.get("rope_theta", 1e6))
        self.g_full = full
        self.g_local = local
        types = tc.get("layer_types")
        if types is None:
            pat = tc.get("sliding_window_pattern", tc.get("_sliding_window_pattern", 6))
            types = ["sliding_attention" if (i + 1) % pat else "full_attention" for i in range(self.L)]
        self.types = types
        self.window = tc.get("sliding_window", 4096)
        self.scale = tc.get("query_pre_attn_scalar", 256) ** -0.5
        if tc.get("attn_logit_softcapping") or tc.get("final_logit_softcapping"):
            raise ValueError("gemma3 soft-capping not supported by the reference")

    def p(self, name):
        return self.w[f"{self.prefix}.{name}"]

    def embed(self, ids):
        e = self.p("embed_tokens.weight")[ids]
        return e * np.float64(np.float32(math.sqrt(self.D))) if self.kind == "gemma3" else e

    def _inv_freq(self, theta, dim, factor=1.0):
        return 1.0 / (theta ** (np.arange(0, dim, 2, dtype=np.float64) / dim)) / factor

    def _cos_sin(self, positions, inv):
        # positions [B, S] or [3, B, S]
        if positions.ndim == 2:
            f = positions[..., None].astype(np.float64) * inv
        else:
            fr = positions[..., None].astype(np.float64) * inv  # [3, B, S, half]
            half = inv.shape[0]
            sec = self.mrope
            f = fr[0].copy()
            if self.interleaved:
                for a, off in ((1, 1), (2, 2)):
                    idx = np.arange(off, min(sec[a] * 3, half), 3)  # a clipped slice
                    f[..., idx] = fr[a][..., idx]
            else:
                start = 0
                for a in range(3):
                    f[..., start:start + sec[a]] = fr[a][..., start:start + sec[a]]
                    start += sec[a]
                assert start == half
        emb = np.concatenate([f, f], axis=-1)
        return np.cos(emb), np.sin(emb)

    def forward(self, x, positions, image_blocks=None, deepstack=None, visual_mask=None):
        """x [B, S, D] embeddings -> logits [B, S, V] (one full forward)."""
        B, S, _ = x.shape
        H, KV, hd = self.H, self.KV, self.hd
        idx = np.arange(S)
        causal = idx[None, :] <= idx[:, None]
        if self.kind == "gemma3":
            cs_full = self._cos_sin(positions, self._inv_freq(self.g_full["rope_theta"], hd,
                                                              self.g_full.get("factor", 1.0)
                                                              if self.g_full.get("rope_type") == "linear" else 1.0))
            cs_local = self._cos_sin(positions, self._inv_freq(self.g_local["rope_theta"], hd))
            # Bidirectional runs of image tokens (token_type_ids).
            bid = np.zeros((B, S, S), dtype=bool)
            if image_blocks is not None:
                img = image_blocks == 1
                prev = np.concatenate([np.zeros((B, 1), bool), img[:, :-1]], axis=1)
                group = np.cumsum(img & ~prev, axis=1) - 1
                group = np.where(img, group, -1)
                bid = img[:, :, None] & img[:, None, :] & (group[:, :, None] == group[:, None, :])
        else:
            cs = self._cos_sin(positions, self._inv_freq(self.theta, hd))
        for i in range(self.L):
            pre = f"layers.{i}."
            if self.kind == "gemma3":
                h = rms(x, self.p(pre + "input_layernorm.weight"), self.eps, 1.0)
            else:
                h = rms(x, self.p(pre + "input_layernorm.weight"), self.eps)
            a = pre + "self_attn."
            bias = self.kind == "qwen2_5_vl" or self.tc.get("attention_bias", False)
            q = lin(h, self.p(a + "q_proj.weight"), self.w.get(f"{self.prefix}.{a}q_proj.bias") if bias else None)
            k = lin(h, self.p(a + "k_proj.weight"), self.w.get(f"{self.prefix}.{a}k_proj.bias") if bias else None)
            v = lin(h, self.p(a + "v_proj.weight"), self.w.get(f"{self.prefix}.{a}v_proj.bias") if bias else None)
            q = q.reshape(B, S, H, hd).transpose(0, 2, 1, 3)
            k = k.reshape(B, S, KV, hd).transpose(0, 2, 1, 3)
            v = v.reshape(B, S, KV, hd).transpose(0, 2, 1, 3)
            if self.kind == "gemma3":
                q = rms(q, self.p(a + "q_norm.weight"), self.eps, 1.0)
                k = rms(k, self.p(a + "k_norm.weight"), self.eps, 1.0)
                sliding = self.types[i] == "sliding_attention"
                cos, sin = cs_local if sliding else cs_full
                scale = self.scale
            else:
                if self.kind == "qwen3_vl":
                    q = rms(q, self.p(a + "q_norm.weight"), self.eps)
                    k = rms(k, self.p(a + "k_norm.weight"), self.eps)
                cos, sin = cs
                scale = hd ** -0.5
            cos, sin = cos[:, None], sin[:, None]
            q = q * cos + rotate_half(q) * sin
            k = k * cos + rotate_half(k) * sin
            rep = H // KV
            k = np.repeat(k, rep, axis=1)
            v = np.repeat(v, rep, axis=1)
            s = (q @ k.transpose(0, 1, 3, 2)) * scale
            allowed = np.broadcast_to(causal, (B, S, S))
            if self.kind == "gemma3":
                if sliding:
                    allowed = allowed & (idx[:, None] - idx[None, :] < self.window)
                allowed = allowed | bid
            s = np.where(allowed[:, None], s, -np.inf)
            o = (softmax(s) @ v).transpose(0, 2, 1, 3).reshape(B, S, H * hd)
            o_bias = self.tc.get("attention_bias", False) and self.kind != "qwen2_5_vl"
            o = lin(o, self.p(a + "o_proj.weight"), self.w.get(f"{self.prefix}.{a}o_proj.bias") if o_bias else None)
            m = pre + "mlp."
            mb = self.tc.get("mlp_bias", False)
            mlp = lambda t: lin(self.act(lin(t, self.p(m + "gate_proj.weight"),  # noqa: E731
                                             self.w.get(f"{self.prefix}.{m}gate_proj.bias") if mb else None))
                                * lin(t, self.p(m + "up_proj.weight"),
                                      self.w.get(f"{self.prefix}.{m}up_proj.bias") if mb else None),
                                self.p(m + "down_proj.weight"),
                                self.w.get(f"{self.prefix}.{m}down_proj.bias") if mb else None)
            if self.kind == "gemma3":
                x = x + rms(o, self.p(pre + "post_attention_layernorm.weight"), self.eps, 1.0)
                y = mlp(rms(x, self.p(pre + "pre_feedforward_layernorm.weight"), self.eps, 1.0))
                x = x + rms(y, self.p(pre + "post_feedforward_layernorm.weight"), self.eps, 1.0)
            else:
                x = x + o
                x = x + mlp(rms(x, self.p(pre + "post_attention_layernorm.weight"), self.eps))
            if deepstack is not None and i < len(deepstack):
                x = x.copy()
                x[visual_mask] = x[visual_mask] + deepstack[i]
        x = rms(x, self.p("norm.weight"), self.eps, 1.0 if self.kind == "gemma3" else 0.0)
        return x @ self.head_w.T


# ---------------------------------------------------------------------------
# vision towers
# ---------------------------------------------------------------------------
def vit_layer(x, w, pre, heads, eps, actf, key_mask=None):
    """SigLIP / CLIP / Idefics3 encoder layer over [N, L, D]."""
    N, L, D = x.shape
    hd = D // heads
    h = ln(x, w[pre + "layer_norm1.weight"], w[pre + "layer_norm1.bias"], eps)
    a = pre + "self_attn."
    q = lin(h, w[a + "q_proj.weight"], w[a + "q_proj.bias"]).reshape(N, L, heads, hd).transpose(0, 2, 1, 3)
    k = lin(h, w[a + "k_proj.weight"], w[a + "k_proj.bias"]).reshape(N, L, heads, hd).transpose(0, 2, 1, 3)
    v = lin(h, w[a + "v_proj.weight"], w[a + "v_proj.bias"]).reshape(N, L, heads, hd).transpose(0, 2, 1, 3)
    s = (q @ k.transpose(0, 1, 3, 2)) * hd ** -0.5
    if key_mask is not None:
        s = np.where(key_mask[:, None, None, :], s, -np.inf)
    o = (softmax(s) @ v).transpose(0, 2, 1, 3).reshape(N, L, D)
    x = x + lin(o, w[a + "out_proj.weight"], w[a + "out_proj.bias"])
    h = ln(x, w[pre + "layer_norm2.weight"], w[pre + "layer_norm2.bias"], eps)
    m = pre + "mlp."
    return x + lin(actf(lin(h, w[m + "fc1.weight"], w[m + "fc1.bias"])), w[m + "fc2.weight"], w[m + "fc2.bias"])


def conv_patches(pixels, weight, bias, P):
    """Conv2d(kernel = stride = P) over [N, C, H, W] -> [N, (H/P)(W/P), D], raster order."""
    N, C, Hh, Ww = pixels.shape
    nh, nw = Hh // P, Ww // P
    p = pixels[:, :, :nh * P, :nw * P].reshape(N, C, nh, P, nw, P).transpose(0, 2, 4, 1, 3, 5)
    p = p.reshape(N, nh * nw, C * P * P)
    y = p @ weight.reshape(weight.shape[0], -1).T
    return y if bias is None else y + bias


# The composite config class's default of its top-level tie_word_embeddings:
# Gemma3Config True; LlavaConfig, SmolVLMConfig, Qwen3VLConfig False;
# Qwen2_5_VLConfig False (the released transformers-4 class, and transformers
# 5's Qwen2VLConfig it derives from; early transformers-5 copies declared
# none, PreTrainedConfig's True).
TIE_DEFAULT = {"gemma3": True, "qwen2_5_vl": False, "llava": False, "smolvlm": False, "qwen3_vl": False}


def head_tied(c):
    """Whether lm_head is the embedding: transformers 5's
    *ForConditionalGeneration ties by the composite config's top-level
    tie_word_embeddings, never by text_config's; LlavaConfig.__post_init__
    sets the top-level flag when text_config's is true (text_config's default:
    its class's, LlamaConfig's False). A flat Qwen2.5-VL config (no
    text_config) has the one key."""
    kind = c["model_type"]
    tied = c.get("tie_word_embeddings", TIE_DEFAULT[kind])
    if kind == "llava" and not tied:
        tied = bool((c.get("text_config") or {}).get("tie_word_embeddings", False))
    return bool(tied)


def vision_cfg(c, key, default):
    return c["vision_config"].get(key, default)


class VlmModel:
    def __init__(self, config, weights):
        self.c = config
        self.w = {k: np.asarray(v, dtype=np.float64) for k, v in weights.items()}
        self.kind = config["model_type"]
        tc = config.get("text_config") or config
        self.tc = tc
        tied = head_tied(config)
        prefix, head_name = {
            "gemma3": ("language_model.model", "language_model.lm_head.weight"),
            "llava": ("language_model.model", "language_model.lm_head.weight"),
            "qwen2_5_vl": ("model", "lm_head.weight"),
            "qwen3_vl": ("model.language_model", "lm_head.weight"),
            "smolvlm": ("model.text_model", "lm_head.weight"),
        }[self.kind]
        head = self.w[f"{prefix}.embed_tokens.weight"] if tied else self.w[head_name]
        self.text = Text(self.kind, tc, self.w, prefix, head)
        self.image_token = config.get("image_token_id", config.get("image_token_index"))

    # ---- vision -----------------------------------------------------------
    def image_features(self, inp):
        return getattr(self, "_vision_" + self.kind)(inp)

    def _vision_gemma3(self, inp):
        c, w = self.c, self.w
        vp = "vision_tower.vision_model."
        D = vision_cfg(c, "hidden_size", 768)
        P = vision_cfg(c, "patch_size", 16)
        eps = vision_cfg(c, "layer_norm_eps", 1e-6)
        x = conv_patches(inp["pixel_values"], w[vp + "embeddings.patch_embedding.weight"],
                         w[vp + "embeddings.patch_embedding.bias"], P)
        x = x + w[vp + "embeddings.position_embedding.weight"][np.arange(x.shape[1])]
        actf = act(vision_cfg(c, "hidden_act", "gelu_pytorch_tanh"))
        for i in range(vision_cfg(c, "num_hidden_layers", 12)):
            x = vit_layer(x, w, f"{vp}encoder.layers.{i}.", vision_cfg(c, "num_attention_heads", 12), eps, actf)
        x = ln(x, w[vp + "post_layernorm.weight"], w[vp + "post_layernorm.bias"], eps)
        # Gemma3MultiModalProjector.
        N, L, _ = x.shape
        side = int(round(math.sqrt(L)))
        toks = c.get("mm_tokens_per_image", 256)
        k = side // int(round(math.sqrt(toks)))
        g = x.transpose(0, 2, 1).reshape(N, D, side, side)
        t = side // k
        pooled = g.reshape(N, D, t, k, t, k).mean(axis=(3, 5)).reshape(N, D, t * t).transpose(0, 2, 1)
        mp = "multi_modal_projector."
        normed = rms(pooled, w[mp + "mm_soft_emb_norm.weight"], eps, 1.0)
        f = normed @ w[mp + "mm_input_projection_weight"]
        return f.reshape(-1, f.shape[-1]), {}

    def _vision_llava(self, inp):
        # vision_config is a dict here: its missing keys take
        # CLIPVisionConfig's defaults (LlavaConfig's LLaVA-1.5 sizes apply
        # only to an absent vision_config).
        c, w = self.c, self.w
        vp = "vision_tower.vision_model."
        D = vision_cfg(c, "hidden_size", 768)
        P = vision_cfg(c, "patch_size", 32)
        eps = vision_cfg(c, "layer_norm_eps", 1e-5)
        L = vision_cfg(c, "num_hidden_layers", 12)
        x = conv_patches(inp["pixel_values"], w[vp + "embeddings.patch_embedding.weight"], None, P)
        N = x.shape[0]
        cls = np.broadcast_to(w[vp + "embeddings.class_embedding"], (N, 1, D))
        x = np.concatenate([cls, x], axis=1)
        x = x + w[vp + "embeddings.position_embedding.weight"][np.arange(x.shape[1])]
        x = ln(x, w[vp + "pre_layrnorm.weight"], w[vp + "pre_layrnorm.bias"], eps)
        actf = act(vision_cfg(c, "hidden_act", "quick_gelu"))
        states = [x]
        for i in range(L):  # HF runs every layer (output_hidden_states=True)
            x = vit_layer(x, w, f"{vp}encoder.layers.{i}.", vision_cfg(c, "num_attention_heads", 12), eps, actf)
            states.append(x)
        layer = c.get("vision_feature_layer", -2)
        strategy = c.get("vision_feature_select_strategy", "default")
        layers = layer if isinstance(layer, list) else [layer]
        picked = [states[k] for k in layers]
        if strategy == "default":
            picked = [h[:, 1:] for h in picked]
        elif strategy != "full":
            raise ValueError(strategy)
        f = np.concatenate(picked, axis=-1)
        mp = "multi_modal_projector."
        bias = c.get("multimodal_projector_bias", True)
        h = act(c.get("projector_hidden_act", "gelu"))(lin(f, w[mp + "linear_1.weight"],
                                                           w.get(mp + "linear_1.bias") if bias else None))
        f = lin(h, w[mp + "linear_2.weight"], w.get(mp + "linear_2.bias") if bias else None)
        return f.reshape(-1, f.shape[-1]), {}

    def _vision_smolvlm(self, inp):
        c, w = self.c, self.w
        vp = "model.vision_model."
        D = vision_cfg(c, "hidden_size", 1152)
        P = vision_cfg(c, "patch_size", 32)
        eps = vision_cfg(c, "layer_norm_eps", 1e-6)
        size = vision_cfg(c, "image_size", 224)
        pv = inp["pixel_values"]
        B, n = pv.shape[:2]
        pv = pv.reshape(B * n, *pv.shape[2:])
        real = (pv == 0.0).sum(axis=(1, 2, 3)) != np.prod(pv.shape[1:])
        if not real.any():
            real[0] = True
        pv = pv[real]
        mask = inp["pixel_attention_mask"].reshape(B * n, *inp["pixel_attention_mask"].shape[2:])[real]
        nh, nw = mask.shape[1] // P, mask.shape[2] // P
        pmask = mask[:, :nh * P, :nw * P].reshape(-1, nh, P, nw, P).sum(axis=(2, 4)) > 0
        x = conv_patches(pv, w[vp + "embeddings.patch_embedding.weight"], w[vp + "embeddings.patch_embedding.bias"], P)
        side = size // P
        boundaries = np.arange(1 / side, 1.0, 1 / side)
        pos = np.zeros((x.shape[0], nh * nw), dtype=np.int64)
        for b in range(x.shape[0]):
            m = pmask[b]
            nbh, nbw = int(m[:, 0].sum()), int(m[0].sum())
            fh = np.arange(0, 1 - 1e-6, 1 / nbh)
            fw = np.arange(0, 1 - 1e-6, 1 / nbw)
            bh = np.searchsorted(boundaries, fh, side="right")
            bw = np.searchsorted(boundaries, fw, side="right")
            ids = (bh[:, None] * side + bw).reshape(-1)
            pos[b][m.reshape(-1)] = ids
        x = x + w[vp + "embeddings.position_embedding.weight"][pos]
        flat = pmask.reshape(x.shape[0], -1)
        key_mask = None if flat.all() else flat
        actf = act(vision_cfg(c, "hidden_act", "gelu_pytorch_tanh"))
        for i in range(vision_cfg(c, "num_hidden_layers", 12)):
            x = vit_layer(x, w, f"{vp}encoder.layers.{i}.", vision_cfg(c, "num_attention_heads", 16), eps, actf,
                          key_mask)
        x = ln(x, w[vp + "post_layernorm.weight"], w[vp + "post_layernorm.bias"], eps)
        # Connector: HF's pixel_shuffle (view / permute), then proj.
        s = c.get("scale_factor", 2)
        bsz, seq, e = x.shape
        h = wd = int(seq ** 0.5)
        y = x.reshape(bsz, h, wd, e).reshape(bsz, h, wd // s, e * s).transpose(0, 2, 1, 3)
        y = y.reshape(bsz, wd // s, h // s, e * s * s).transpose(0, 2, 1, 3).reshape(bsz, seq // (s * s), e * s * s)
        f = lin(y, w["model.connector.modality_projection.proj.weight"])
        return f.reshape(-1, f.shape[-1]), {}

    def _qwen_rot(self, grid, hd, merge):
        """rot_pos_emb: [P, hd/2] (row freqs | col freqs) in merge-block order."""
        inv = 1.0 / (10000.0 ** (np.arange(0, hd // 2, 2, dtype=np.float64) / (hd // 2)))
        pos = []
        for t, h, wd in grid:
            hp = np.arange(h)[:, None].repeat(wd, 1).reshape(h // merge, merge, wd // merge, merge)
            hp = hp.transpose(0, 2, 1, 3).reshape(-1)
            wp = np.arange(wd)[None, :].repeat(h, 0).reshape(h // merge, merge, wd // merge, merge)
            wp = wp.transpose(0, 2, 1, 3).reshape(-1)
            pos.append(np.tile(np.stack([hp, wp], -1), (t, 1)))
        pos = np.concatenate(pos)
        return np.concatenate([pos[:, :1] * inv, pos[:, 1:] * inv], axis=-1)

    def _qwen_block_attn(self, x, w, pre, heads, rot, cu):
        Pn, D = x.shape
        hd = D // heads
        qkv = lin(x, w[pre + "qkv.weight"], w[pre + "qkv.bias"]).reshape(Pn, 3, heads, hd).transpose(1, 0, 2, 3)
        q, k, v = qkv
        emb = np.concatenate([rot, rot], -1)
        cos, sin = np.cos(emb)[:, None], np.sin(emb)[:, None]
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        out = np.zeros((Pn, heads, hd))
        for a, b in zip(cu[:-1], cu[1:]):  # attention per chunk, as HF's eager path
            if b <= a:
                continue
            qq, kk, vv = (t[a:b].transpose(1, 0, 2) for t in (q, k, v))
            s = qq @ kk.transpose(0, 2, 1) * hd ** -0.5
            out[a:b] = (softmax(s) @ vv).transpose(1, 0, 2)
        return lin(out.reshape(Pn, D), w[pre + "proj.weight"], w[pre + "proj.bias"])

    def _vision_qwen2_5_vl(self, inp):
        c, w = self.c, self.w
        vc = c["vision_config"]
        D = vc.get("hidden_size", 3584)
        heads = vc.get("num_heads", 16)
        merge = vc.get("spatial_merge_size", 2)
        P = vc.get("patch_size", 14)
        unit = merge * merge
        grid = [tuple(int(v) for v in g) for g in inp["image_grid_thw"]]
        x = inp["pixel_values"] @ w["visual.patch_embed.proj.weight"].reshape(D, -1).T
        rot = self._qwen_rot(grid, D // heads, merge)
        # get_window_index
        wm = vc.get("window_size", 112) // merge // P
        window_index, cu_w, base = [], [0], 0
        for t, h, wd in grid:
            lh, lw = h // merge, wd // merge
            index = np.arange(t * lh * lw).reshape(t, lh, lw)
            ph, pw = wm - lh % wm, wm - lw % wm
            nwh, nww = (lh + ph) // wm, (lw + pw) // wm
            padded = np.full((t, lh + ph, lw + pw), -100)
            padded[:, :lh, :lw] = index
            padded = padded.reshape(t, nwh, wm, nww, wm).transpose(0, 1, 3, 2, 4).reshape(t, nwh * nww, wm, wm)
            seqlens = (padded != -100).sum((2, 3)).reshape(-1)
            flat = padded.reshape(-1)
            window_index.append(flat[flat != -100] + base)
            cu_w.extend((np.cumsum(seqlens) * unit + cu_w[-1]).tolist())
            base += t * lh * lw
        window_index = np.concatenate(window_index)
        cu_w = np.array(cu_w)
        cu_w = cu_w[np.concatenate([[True], cu_w[1:] != cu_w[:-1]])]  # unique_consecutive
        Pn = x.shape[0]
        x = x.reshape(Pn // unit, unit, D)[window_index].reshape(Pn, D)
        rot = rot.reshape(Pn // unit, unit, -1)[window_index].reshape(Pn, -1)
        frames = np.concatenate([[h * wd] * t for t, h, wd in grid])
        cu = np.concatenate([[0], np.cumsum(frames)])
        full = vc.get("fullatt_block_indexes", [7, 15, 23, 31])
        actf = act(vc.get("hidden_act", "silu"))
        for i in range(vc.get("depth", 32)):
            pre = f"visual.blocks.{i}."
            x = x + self._qwen_block_attn(rms(x, w[pre + "norm1.weight"], 1e-6), w, pre + "attn.", heads, rot,
                                          cu if i in full else cu_w)
            h = rms(x, w[pre + "norm2.weight"], 1e-6)
            m = pre + "mlp."
            x = x + lin(actf(lin(h, w[m + "gate_proj.weight"], w[m + "gate_proj.bias"]))
                        * lin(h, w[m + "up_proj.weight"], w[m + "up_proj.bias"]),
                        w[m + "down_proj.weight"], w[m + "down_proj.bias"])
        y = rms(x, w["visual.merger.ln_q.weight"], 1e-6).reshape(-1, unit * D)
        y = lin(gelu(lin(y, w["visual.merger.mlp.0.weight"], w["visual.merger.mlp.0.bias"])),
                w["visual.merger.mlp.2.weight"], w["visual.merger.mlp.2.bias"])
        return y[np.argsort(window_index)], {}

    def _vision_qwen3_vl(self, inp):
        c, w = self.c, self.w
        vc = c["vision_config"]
        D = vc.get("hidden_size", 1152)
        heads = vc.get("num_heads", 16)
        merge = vc.get("spatial_merge_size", 2)
        unit = merge * merge
        grid = [tuple(int(v) for v in g) for g in inp["image_grid_thw"]]
        x = inp["pixel_values"] @ w["model.visual.patch_embed.proj.weight"].reshape(D, -1).T \
            + w["model.visual.patch_embed.proj.bias"]
        # fast_pos_embed_interpolate (float32 linspace and weights, as HF).
        table = w["model.visual.pos_embed.weight"]
        side = int(round(math.sqrt(table.shape[0])))
        embeds = []
        for t, h, wd in grid:
            hi = np.linspace(0, side - 1, h, dtype=np.float32)
            wi = np.linspace(0, side - 1, wd, dtype=np.float32)
            hf, wf = hi.astype(np.int64), wi.astype(np.int64)
            hc, wc = np.minimum(hf + 1, side - 1), np.minimum(wf + 1, side - 1)
            dh = (hi - hf).astype(np.float32)
            dw = (wi - wf).astype(np.float32)
            idx = [(hf[:, None] * side + wf[None]).reshape(-1), (hf[:, None] * side + wc[None]).reshape(-1),
                   (hc[:, None] * side + wf[None]).reshape(-1), (hc[:, None] * side + wc[None]).reshape(-1)]
            wts = [((1 - dh)[:, None] * (1 - dw)[None]).reshape(-1), ((1 - dh)[:, None] * dw[None]).reshape(-1),
                   (dh[:, None] * (1 - dw)[None]).reshape(-1), (dh[:, None] * dw[None]).reshape(-1)]
            pe = sum(table[idx[k]] * wts[k].astype(np.float64)[:, None] for k in range(4))
            pe = np.tile(pe, (t, 1)).reshape(t, h // merge, merge, wd // merge, merge, D)
            embeds.append(pe.transpose(0, 1, 3, 2, 4, 5).reshape(-1, D))
        x = x + np.concatenate(embeds)
        rot = self._qwen_rot(grid, D // heads, merge)
        frames = np.concatenate([[h * wd] * t for t, h, wd in grid])
        cu = np.concatenate([[0], np.cumsum(frames)])
        ds = vc.get("deepstack_visual_indexes", [8, 16, 24])
        actf = act(vc.get("hidden_act", "gelu_pytorch_tanh"))

        def merger(h, pre, post):
            k = unit * D
            hh = ln(h.reshape(-1, k), w[pre + "norm.weight"], w[pre + "norm.bias"], 1e-6) if post \
                else ln(h, w[pre + "norm.weight"], w[pre + "norm.bias"], 1e-6).reshape(-1, k)
            return lin(gelu(lin(hh, w[pre + "linear_fc1.weight"], w[pre + "linear_fc1.bias"])),
                       w[pre + "linear_fc2.weight"], w[pre + "linear_fc2.bias"])
        deep = []
        for i in range(vc.get("depth", 27)):
            pre = f"model.visual.blocks.{i}."
            x = x + self._qwen_block_attn(ln(x, w[pre + "norm1.weight"], w[pre + "norm1.bias"], 1e-6), w,
                                          pre + "attn.", heads, rot, cu)
            h = ln(x, w[pre + "norm2.weight"], w[pre + "norm2.bias"], 1e-6)
            m = pre + "mlp."
            x = x + lin(actf(lin(h, w[m + "linear_fc1.weight"], w[m + "linear_fc1.bias"])),
                        w[m + "linear_fc2.weight"], w[m + "linear_fc2.bias"])
            if i in ds:
                deep.append(merger(x, f"model.visual.deepstack_merger_list.{ds.index(i)}.", True))
        return merger(x, "model.visual.merger.", False), {"deepstack": deep}

    # ---- Qwen M-RoPE positions (get_rope_index) ---------------------------
    def rope_index(self, ids, grid):
        c = self.c
        merge = c["vision_config"].get("spatial_merge_size", 2)
        start_id = c["vision_start_token_id"]
        B, S = ids.shape
        pos = np.ones((3, B, S), dtype=np.int64)
        deltas = []
        img = 0
        for b in range(B):
            toks = list(ids[b])
            vs = [i for i, t in enumerate(toks) if t == start_id]
            n_img = sum(1 for i in vs if i + 1 < S and toks[i + 1] == self.image_token)
            parts, st = [], 0
            for _ in range(n_img):
                ed = toks.index(self.image_token, st)
                t, h, wd = (int(v) for v in grid[img])
                img += 1
                lt, lh, lw = t, h // merge, wd // merge
                st_idx = parts[-1].max() + 1 if parts else 0
                parts.append(np.arange(ed - st)[None].repeat(3, 0) + st_idx)
                ti = np.arange(lt)[:, None].repeat(lh * lw, 1).reshape(-1) * 0  # still images: t index 0 * fps
                hi = np.arange(lh)[None, :, None].repeat(lt, 0).repeat(lw, 2).reshape(-1)
                wi = np.arange(lw)[None, None, :].repeat(lt, 0).repeat(lh, 1).reshape(-1)
                parts.append(np.stack([ti, hi, wi]) + (ed - st) + st_idx)
                st = ed + lt * lh * lw
            if st < S:
                st_idx = parts[-1].max() + 1 if parts else 0
                parts.append(np.arange(S - st)[None].repeat(3, 0) + st_idx)
            p = np.concatenate(parts, axis=1)
            pos[:, b] = p
            deltas.append(int(p.max()) + 1 - S)
        return pos, np.array(deltas)

    # ---- full forward -----------------------------------------------------
    def forward(self, ids, inp, features=None):
        if features is None:
            features, extra = self.image_features(inp)
        else:
            features, extra = features
        mask = ids == self.image_token
        if self.kind == "gemma3" and self.image_token >= self.text.V:
            # Gemma3Model looks an out-of-vocabulary image token up as id 0
            # (its row is replaced by the features anyway).
            x = self.text.embed(np.where(mask, 0, ids))
        else:
            x = self.text.embed(ids)
        if mask.sum() != features.shape[0]:
            raise ValueError(f"{mask.sum()} image tokens, {features.shape[0]} feature rows")
        x = x.copy()
        x[mask] = features
        B, S = ids.shape
        if self.kind in ("qwen2_5_vl", "qwen3_vl"):
            positions = inp["position_ids"]
        else:
            positions = np.broadcast_to(np.arange(S), (B, S))
        deep = extra.get("deepstack")
        return self.text.forward(x, positions, image_blocks=inp.get("token_type_ids"),
                                 deepstack=deep, visual_mask=mask if deep else None)


# ---------------------------------------------------------------------------
# checkpoint layout
# ---------------------------------------------------------------------------
def _vit_layer_shapes(pre, D, I):
    s = {}
    for n in ("layer_norm1", "layer_norm2"):
        s[pre + n + ".weight"] = [D]
        s[pre + n + ".bias"] = [D]
    for n in ("q_proj", "k_proj", "v_proj", "out_proj"):
        s[pre + "self_attn." + n + ".weight"] = [D, D]
        s[pre + "self_attn." + n + ".bias"] = [D]
    s[pre + "mlp.fc1.weight"] = [I, D]
    s[pre + "mlp.fc1.bias"] = [I]
    s[pre + "mlp.fc2.weight"] = [D, I]
    s[pre + "mlp.fc2.bias"] = [D]
    return s


def _text_shapes(kind, tc, prefix, head, tied):
    D, L, H = tc["hidden_size"], tc["num_hidden_layers"], tc["num_attention_heads"]
    d = TEXT_DEFAULTS[kind]
    KV = tc.get("num_key_value_heads", d["kv"]) or H
    hd = D // H if kind == "qwen2_5_vl" else (tc.get("head_dim", d["head_dim"]) or D // H)
    I, V = tc["intermediate_size"], tc["vocab_size"]
    s = {f"{prefix}.embed_tokens.weight": [V, D], f"{prefix}.norm.weight": [D]}
    for i in range(L):
        p = f"{prefix}.layers.{i}."
        s[p + "input_layernorm.weight"] = [D]
        s[p + "post_attention_layernorm.weight"] = [D]
        if kind == "gemma3":
            s[p + "pre_feedforward_layernorm.weight"] = [D]
            s[p + "post_feedforward_layernorm.weight"] = [D]
        if kind in ("gemma3", "qwen3_vl"):
            s[p + "self_attn.q_norm.weight"] = [hd]
            s[p + "self_attn.k_norm.weight"] = [hd]
        s[p + "self_attn.q_proj.weight"] = [H * hd, D]
        s[p + "self_attn.k_proj.weight"] = [KV * hd, D]
        s[p + "self_attn.v_proj.weight"] = [KV * hd, D]
        s[p + "self_attn.o_proj.weight"] = [D, H * hd]
        qkv_bias = kind == "qwen2_5_vl" or tc.get("attention_bias", False)
        if qkv_bias:
            s[p + "self_attn.q_proj.bias"] = [H * hd]
            s[p + "self_attn.k_proj.bias"] = [KV * hd]
            s[p + "self_attn.v_proj.bias"] = [KV * hd]
        if tc.get("attention_bias", False) and kind != "qwen2_5_vl":
            s[p + "self_attn.o_proj.bias"] = [D]
        for n, shp in (("gate_proj", [I, D]), ("up_proj", [I, D]), ("down_proj", [D, I])):
            s[p + "mlp." + n + ".weight"] = shp
            if tc.get("mlp_bias", False):
                s[p + "mlp." + n + ".bias"] = [shp[0]]
    if not tied:
        s[head] = [V, D]
    return s


def expected_weight_shapes(c):
    kind = c["model_type"]
    tc = c.get("text_config") or c
    vc = c["vision_config"]
    tied = head_tied(c)
    s = {}
    if kind == "gemma3":
        s.update(_text_shapes(kind, tc, "language_model.model", "language_model.lm_head.weight", tied))
        D, I, P = vc.get("hidden_size", 768), vc.get("intermediate_size", 3072), vc.get("patch_size", 16)
        n = (vc.get("image_size", 224) // P) ** 2
        vp = "vision_tower.vision_model."
        s[vp + "embeddings.patch_embedding.weight"] = [D, vc.get("num_channels", 3), P, P]
        s[vp + "embeddings.patch_embedding.bias"] = [D]
        s[vp + "embeddings.position_embedding.weight"] = [n, D]
        for i in range(vc.get("num_hidden_layers", 12)):
            s.update(_vit_layer_shapes(f"{vp}encoder.layers.{i}.", D, I))
        s[vp + "post_layernorm.weight"] = [D]
        s[vp + "post_layernorm.bias"] = [D]
        if vc.get("vision_use_head", True):
            s[vp + "head.probe"] = [1, 1, D]
            s[vp + "head.attention.in_proj_weight"] = [3 * D, D]
            s[vp + "head.attention.in_proj_bias"] = [3 * D]
            s[vp + "head.attention.out_proj.weight"] = [D, D]
            s[vp + "head.attention.out_proj.bias"] = [D]
            s[vp + "head.layernorm.weight"] = [D]
            s[vp + "head.layernorm.bias"] = [D]
            s[vp + "head.mlp.fc1.weight"] = [I, D]
            s[vp + "head.mlp.fc1.bias"] = [I]
            s[vp + "head.mlp.fc2.weight"] = [D, I]
            s[vp + "head.mlp.fc2.bias"] = [D]
        s["multi_modal_projector.mm_soft_emb_norm.weight"] = [D]
        s["multi_modal_projector.mm_input_projection_weight"] = [D, tc["hidden_size"]]
    elif kind == "llava":
        s.update(_text_shapes(kind, tc, "language_model.model", "language_model.lm_head.weight", tied))
        D, I, P = vc.get("hidden_size", 768), vc.get("intermediate_size", 3072), vc.get("patch_size", 32)
        n = (vc.get("image_size", 224) // P) ** 2
        vp = "vision_tower.vision_model."
        s[vp + "embeddings.patch_embedding.weight"] = [D, vc.get("num_channels", 3), P, P]
        s[vp + "embeddings.class_embedding"] = [D]
        s[vp + "embeddings.position_embedding.weight"] = [n + 1, D]
        s[vp + "pre_layrnorm.weight"] = [D]
        s[vp + "pre_layrnorm.bias"] = [D]
        for i in range(vc.get("num_hidden_layers", 12)):
            s.update(_vit_layer_shapes(f"{vp}encoder.layers.{i}.", D, I))
        s[vp + "post_layernorm.weight"] = [D]
        s[vp + "post_layernorm.bias"] = [D]
        layer = c.get("vision_feature_layer", -2)
        k = len(layer) if isinstance(layer, list) else 1
        Dt = tc["hidden_size"]
        s["multi_modal_projector.linear_1.weight"] = [Dt, k * D]
        s["multi_modal_projector.linear_2.weight"] = [Dt, Dt]
        if c.get("multimodal_projector_bias", True):
            s["multi_modal_projector.linear_1.bias"] = [Dt]
            s["multi_modal_projector.linear_2.bias"] = [Dt]
    elif kind == "smolvlm":
        s.update(_text_shapes(kind, tc, "model.text_model", "lm_head.weight", tied))
        D, I, P = vc.get("hidden_size", 1152), vc.get("intermediate_size", 3072), vc.get("patch_size", 32)
        n = (vc.get("image_size", 224) // P) ** 2
        vp = "model.vision_model."
        s[vp + "embeddings.patch_embedding.weight"] = [D, vc.get("num_channels", 3), P, P]
        s[vp + "embeddings.patch_embedding.bias"] = [D]
        s[vp + "embeddings.position_embedding.weight"] = [n, D]
        for i in range(vc.get("num_hidden_layers", 12)):
            s.update(_vit_layer_shapes(f"{vp}encoder.layers.{i}.", D, I))
        s[vp + "post_layernorm.weight"] = [D]
        s[vp + "post_layernorm.bias"] = [D]
        sf = c.get("scale_factor", 2)
        s["model.connector.modality_projection.proj.weight"] = [tc["hidden_size"], D * sf * sf]
    elif kind in ("qwen2_5_vl", "qwen3_vl"):
        q3 = kind == "qwen3_vl"
        s.update(_text_shapes(kind, tc, "model.language_model" if q3 else "model", "lm_head.weight", tied))
        vpre = "model.visual." if q3 else "visual."
        D = vc.get("hidden_size", 1152 if q3 else 3584)
        I = vc.get("intermediate_size", 4304 if q3 else 3420)
        P, T, C = vc.get("patch_size", 16 if q3 else 14), vc.get("temporal_patch_size", 2), vc.get("in_channels", 3)
        m = vc.get("spatial_merge_size", 2)
        out = vc.get("out_hidden_size", 3584)
        s[vpre + "patch_embed.proj.weight"] = [D, C, T, P, P]
        if q3:
            s[vpre + "patch_embed.proj.bias"] = [D]
            s[vpre + "pos_embed.weight"] = [vc.get("num_position_embeddings", 2304), D]
        for i in range(vc.get("depth", 27 if q3 else 32)):
            p = f"{vpre}blocks.{i}."
            for n in ("norm1", "norm2"):
                s[p + n + ".weight"] = [D]
                if q3:
                    s[p + n + ".bias"] = [D]
            s[p + "attn.qkv.weight"] = [3 * D, D]
            s[p + "attn.qkv.bias"] = [3 * D]
            s[p + "attn.proj.weight"] = [D, D]
            s[p + "attn.proj.bias"] = [D]
            mlp = (("linear_fc1", [I, D]), ("linear_fc2", [D, I])) if q3 else \
                (("gate_proj", [I, D]), ("up_proj", [I, D]), ("down_proj", [D, I]))
            for n, shp in mlp:
                s[p + "mlp." + n + ".weight"] = shp
                s[p + "mlp." + n + ".bias"] = [shp[0]]
        k = m * m * D
        if q3:
            mergers = [(f"{vpre}merger.", D)] + [(f"{vpre}deepstack_merger_list.{j}.", k)
                                                  for j in range(len(vc.get("deepstack_visual_indexes", [8, 16, 24])))]
            for pre, nd in mergers:
                s[pre + "norm.weight"] = [nd]
                s[pre + "norm.bias"] = [nd]
                s[pre + "linear_fc1.weight"] = [k, k]
                s[pre + "linear_fc1.bias"] = [k]
                s[pre + "linear_fc2.weight"] = [out, k]
                s[pre + "linear_fc2.bias"] = [out]
        else:
            s[vpre + "merger.ln_q.weight"] = [D]
            s[vpre + "merger.mlp.0.weight"] = [k, k]
            s[vpre + "merger.mlp.0.bias"] = [k]
            s[vpre + "merger.mlp.2.weight"] = [out, k]
            s[vpre + "merger.mlp.2.bias"] = [out]
    else:
        raise ValueError(f"model_type {kind} not supported by the reference")
    return s


def check_weights(c, weights):
    want = expected_weight_shapes(c)
    got = {k: list(v.shape) for k, v in weights.items()}
    missing = sorted(set(want) - set(got))
    extra = sorted(set(got) - set(want))
    bad = sorted(k for k in want if k in got and want[k] != got[k])
    if missing or extra or bad:
        raise ValueError(f"checkpoint layout differs: missing {missing[:5]}, unexpected {extra[:5]}, "
                         f"mis-shaped {bad[:5]}")
