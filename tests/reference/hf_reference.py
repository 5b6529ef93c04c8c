#!/usr/bin/python3
"""Independent numpy reference of several Hugging Face decoder families.

Written from the Hugging Face transformers (5.x) semantics of each architecture
(modeling_*.py, configuration_*.py, modeling_rope_utils.py, masking_utils.py),
NOT from archc's sources, so that it can check archc's ONNX output on configs
the shared HF fixtures do not cover.  Everything is computed in float64.

Families: llama, mistral, qwen2, qwen3, gpt2, mixtral, qwen3_moe, phi3.

Public API
  Model(config: dict, weights: dict[str, np.ndarray], family: str)
      .forward(ids [B, S] int, positions=None) -> logits [B, S, V] float64
      .greedy(prompt: list[int], steps) -> (tokens, step_logits [steps, V], margins)
  expected_weight_shapes(config, family) -> {checkpoint name: shape}
  read_safetensors(path) / write_safetensors(path, tensors, metadata)

Config options that the reference does not implement raise ValueError instead
of being computed some other way.
"""
import json
import math
import struct
import sys

import numpy as np

HF_CLASS = {
    "llama": "LlamaForCausalLM",
    "mistral": "MistralForCausalLM",
    "qwen2": "Qwen2ForCausalLM",
    "qwen3": "Qwen3ForCausalLM",
    "gpt2": "GPT2LMHeadModel",
    "mixtral": "MixtralForCausalLM",
    "qwen3_moe": "Qwen3MoeForCausalLM",
    "phi3": "Phi3ForCausalLM",
}

# ---------------------------------------------------------------------------
# safetensors
# ---------------------------------------------------------------------------
_DT = {"F32": "<f4", "F64": "<f8", "F16": "<f2", "BF16": None, "I64": "<i8", "I32": "<i4"}
_DT_NAME = {np.dtype("<f4"): "F32", np.dtype("<f8"): "F64", np.dtype("<i8"): "I64",
            np.dtype("<i4"): "I32", np.dtype("<f2"): "F16"}


def read_safetensors(path):
    """Returns ({name: array}, metadata dict)."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    meta = header.pop("__metadata__", {}) or {}
    out = {}
    for name, e in header.items():
        dt = _DT.get(e["dtype"])
        if dt is None:
            raise ValueError(f"{path}: tensor {name}: dtype {e['dtype']} not supported")
        a, b = e["data_offsets"]
        out[name] = np.frombuffer(data[a:b], dtype=dt).reshape(e["shape"])
    return out, meta


def write_safetensors(path, tensors, metadata=None):
    """Header JSON padded with spaces to a multiple of 8, tensors contiguous in name order."""
    header = {}
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    blobs = []
    off = 0
    for name in sorted(tensors):
        # (ascontiguousarray makes a 0-d array 1-d: keep the shape, Apertus' xIELU buffers are 0-d)
        arr = np.ascontiguousarray(tensors[name]).reshape(np.shape(tensors[name]))
        arr = arr.astype(arr.dtype.newbyteorder("<"), copy=False)
        if arr.dtype not in _DT_NAME:
            raise ValueError(f"tensor {name}: dtype {arr.dtype} not supported")
        raw = arr.tobytes()
        header[name] = {"dtype": _DT_NAME[arr.dtype], "shape": list(arr.shape),
                        "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for raw in blobs:
            f.write(raw)


# ---------------------------------------------------------------------------
# elementwise helpers
# ---------------------------------------------------------------------------
_erf = np.vectorize(math.erf, otypes=[np.float64])


def _gelu_tanh(x):
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def _gelu_erf(x):
    return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


# transformers' ACT2FN (activations.py), same math per name.
ACTIVATIONS = {
    "silu": lambda x: x * _sigmoid(x),
    "swish": lambda x: x * _sigmoid(x),
    "relu": lambda x: np.maximum(x, 0.0),
    "relu2": lambda x: np.maximum(x, 0.0) ** 2,                      # ReLUSquaredActivation
    "relu6": lambda x: np.clip(x, 0.0, 6.0),                         # nn.ReLU6
    "leaky_relu": lambda x: np.where(x > 0.0, x, 0.01 * x),          # nn.LeakyReLU default slope
    "gelu": _gelu_erf,                                               # exact (erf) GELU
    "gelu_python": _gelu_erf,
    "gelu_10": lambda x: np.clip(_gelu_erf(x), -10.0, 10.0),         # ClippedGELUActivation(-10, 10)
    "gelu_new": _gelu_tanh,                                          # tanh approximation
    "gelu_pytorch_tanh": _gelu_tanh,                                 # same formula
    "gelu_python_tanh": _gelu_tanh,
    "gelu_accurate": _gelu_tanh,
    "gelu_fast": lambda x: 0.5 * x * (1.0 + np.tanh(x * 0.7978845608 * (1.0 + 0.044715 * x * x))),
    "quick_gelu": lambda x: x * _sigmoid(1.702 * x),
    "mish": lambda x: x * np.tanh(np.log1p(np.exp(x))),
    "tanh": np.tanh,
    "sigmoid": _sigmoid,
    "linear": lambda x: x,
}


def _act(name):
    if name not in ACTIVATIONS:
        raise ValueError(f"activation {name!r} not supported by the reference")
    return ACTIVATIONS[name]


def _softmax(x, axis=-1):
    m = np.max(x, axis=axis, keepdims=True)
    e = np.exp(x - m)
    return e / np.sum(e, axis=axis, keepdims=True)


def _rms_norm(x, w, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def _layer_norm(x, w, b, eps):
    mu = np.mean(x, axis=-1, keepdims=True)
    var = np.mean((x - mu) ** 2, axis=-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * w + b


def _linear(x, w, b=None):
    """nn.Linear: weight [out, in]."""
    y = x @ w.T
    return y if b is None else y + b


# ---------------------------------------------------------------------------
# config parsing
# ---------------------------------------------------------------------------
# Keys that never change the inference computation (token ids, dtype, dropout, training-only knobs).
_HARMLESS = {
    "architectures", "model_type", "bos_token_id", "eos_token_id", "pad_token_id", "torch_dtype", "dtype",
    "transformers_version", "use_cache", "initializer_range", "attention_dropout", "_name_or_path",
    "output_attentions", "output_hidden_states", "return_dict", "max_position_embeddings",
    "tie_word_embeddings",
}
_LLAMA_LIKE = {"hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
               "num_key_value_heads", "hidden_act", "rms_norm_eps", "vocab_size", "head_dim",
               "rope_theta", "rope_scaling", "rope_parameters"}
_KNOWN = {
    "llama": _LLAMA_LIKE | {"attention_bias", "mlp_bias", "pretraining_tp"},
    "mistral": _LLAMA_LIKE | {"sliding_window"},
    "qwen2": _LLAMA_LIKE | {"use_sliding_window", "sliding_window", "max_window_layers", "layer_types"},
    "qwen3": _LLAMA_LIKE | {"attention_bias", "use_sliding_window", "sliding_window", "max_window_layers",
                            "layer_types"},
    "mixtral": _LLAMA_LIKE | {"sliding_window", "num_local_experts", "num_experts_per_tok",
                              "output_router_logits", "router_aux_loss_coef", "router_jitter_noise"},
    "qwen3_moe": _LLAMA_LIKE | {"attention_bias", "use_sliding_window", "sliding_window", "max_window_layers",
                                "decoder_sparse_step", "moe_intermediate_size", "num_experts_per_tok",
                                "num_experts", "norm_topk_prob", "output_router_logits",
                                "router_aux_loss_coef", "mlp_only_layers"},
    "phi3": _LLAMA_LIKE | {"original_max_position_embeddings", "partial_rotary_factor", "sliding_window",
                           "resid_pdrop", "embd_pdrop"},
    "gpt2": {"vocab_size", "n_positions", "n_embd", "n_layer", "n_head", "n_inner", "activation_function",
             "resid_pdrop", "embd_pdrop", "attn_pdrop", "layer_norm_epsilon", "summary_type",
             "summary_use_proj", "summary_activation", "summary_proj_to_labels", "summary_first_dropout",
             "scale_attn_weights", "scale_attn_by_inverse_layer_idx", "reorder_and_upcast_attn",
             "add_cross_attention", "n_ctx", "task_specific_params"},
}
_TIE_DEFAULT = {"gpt2": True}


def _req(cfg, key):
    if cfg.get(key) is None:
        raise ValueError(f"config key {key!r} is required by the reference")
    return cfg[key]


# Options a family does not have are accepted only in their "off" state.
_OFF = {"attention_bias": (False,), "mlp_bias": (False,), "use_sliding_window": (False,),
        "sliding_window": (None,), "layer_types": (None,)}


def _check_keys(cfg, family):
    unknown = sorted(k for k in set(cfg) - _HARMLESS - _KNOWN[family]
                     if not (k in _OFF and cfg[k] in _OFF[k]))
    if unknown:
        raise ValueError(f"{family}: config keys not supported by the reference: {unknown}")
    if cfg.get("model_type") != family:
        raise ValueError(f"config model_type {cfg.get('model_type')!r} does not match family {family!r}")
    archs = cfg.get("architectures") or []
    if archs and archs[0] != HF_CLASS[family]:
        raise ValueError(f"architectures[0] {archs[0]!r} is not {HF_CLASS[family]}")


def _rope_parameters(cfg, family):
    """transformers-5 standardisation of rope_scaling / rope_parameters (RotaryEmbeddingConfigMixin)."""
    src = cfg.get("rope_scaling") or cfg.get("rope_parameters") or {}
    rp = dict(src)
    if "rope_theta" not in rp:
        rp["rope_theta"] = _req(cfg, "rope_theta")
    rtype = rp.get("rope_type", rp.get("type", "default"))
    rp["rope_type"] = rtype
    if family == "phi3":
        rp.setdefault("partial_rotary_factor", cfg.get("partial_rotary_factor", 1.0))
        if rtype not in ("default", "longrope"):
            raise ValueError(f"phi3: rope_type {rtype!r} not supported (HF accepts default/longrope)")
    elif cfg.get("partial_rotary_factor") is not None:
        rp["partial_rotary_factor"] = cfg["partial_rotary_factor"]
    if family != "phi3" and float(rp.get("partial_rotary_factor", 1.0)) != 1.0:
        raise ValueError(f"{family}: partial_rotary_factor != 1 not supported")
    if rtype in ("llama3", "yarn", "longrope"):
        if family == "phi3":
            # Phi-3 keeps the pretraining length at the top level, with priority (default 4096).
            rp["original_max_position_embeddings"] = cfg.get("original_max_position_embeddings", 4096)
        elif cfg.get("original_max_position_embeddings") is not None:
            rp["original_max_position_embeddings"] = cfg["original_max_position_embeddings"]
        else:
            rp.setdefault("original_max_position_embeddings", _req(cfg, "max_position_embeddings"))
    if rtype not in ("default", "linear", "llama3", "yarn", "longrope"):
        raise ValueError(f"rope_type {rtype!r} not supported by the reference")
    allowed = {
        "default": set(),
        "linear": {"factor"},
        "llama3": {"factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"},
        "yarn": {"factor", "original_max_position_embeddings", "attention_factor", "beta_fast", "beta_slow",
                 "mscale", "mscale_all_dim", "truncate"},
        "longrope": {"short_factor", "long_factor", "factor", "attention_factor",
                     "original_max_position_embeddings"},
    }[rtype] | {"rope_type", "type", "rope_theta", "partial_rotary_factor"}
    extra = sorted(set(rp) - allowed)
    if extra:
        raise ValueError(f"rope ({rtype}): keys not supported by the reference: {extra}")
    return rp


class Rope:
    def __init__(self, rp, head_dim, max_pos):
        self.rp = rp
        self.type = rp["rope_type"]
        self.base = float(rp["rope_theta"])
        self.dim = int(head_dim * float(rp.get("partial_rotary_factor", 1.0)))
        self.max_pos = max_pos
        if self.dim % 2:
            raise ValueError(f"rotary dim {self.dim} is odd")
        self.exponents = np.arange(0, self.dim, 2, dtype=np.float64) / self.dim

    def inv_freq(self, seq_len):
        """(inv_freq [dim/2], attention scaling applied to cos and sin)."""
        rp, base, dim = self.rp, self.base, self.dim
        inv = 1.0 / base ** self.exponents
        t = self.type
        if t == "default":
            return inv, 1.0
        if t == "linear":
            return inv / float(rp["factor"]), 1.0
        if t == "llama3":
            factor = float(rp["factor"])
            lo, hi = float(rp["low_freq_factor"]), float(rp["high_freq_factor"])
            old = float(rp["original_max_position_embeddings"])
            lo_wl, hi_wl = old / lo, old / hi
            wl = 2 * math.pi / inv
            out = np.where(wl > lo_wl, inv / factor, inv)
            smooth = (old / wl - lo) / (hi - lo)
            smoothed = (1 - smooth) * out / factor + smooth * out
            medium = ~(wl < hi_wl) & ~(wl > lo_wl)
            return np.where(medium, smoothed, out), 1.0
        if t == "yarn":
            orig = float(rp["original_max_position_embeddings"])
            factor = rp.get("factor")
            factor = float(self.max_pos) / orig if factor is None else float(factor)

            def mscale(scale, m=1.0):
                return 1.0 if scale <= 1 else 0.1 * m * math.log(scale) + 1.0

            att = rp.get("attention_factor")
            if att is None:
                ms, msa = rp.get("mscale"), rp.get("mscale_all_dim")
                att = mscale(factor, ms) / mscale(factor, msa) if (ms and msa) else mscale(factor)
            beta_fast = rp.get("beta_fast") or 32
            beta_slow = rp.get("beta_slow") or 1

            def corr_dim(rot):
                return dim * math.log(orig / (rot * 2 * math.pi)) / (2 * math.log(base))

            lo, hi = corr_dim(beta_fast), corr_dim(beta_slow)
            if rp.get("truncate", True):
                lo, hi = math.floor(lo), math.ceil(hi)
            lo, hi = max(lo, 0), min(hi, dim - 1)
            if lo == hi:
                hi += 0.001
            ramp = np.clip((np.arange(dim // 2, dtype=np.float64) - lo) / (hi - lo), 0.0, 1.0)
            extra = 1.0 - ramp
            pos_freqs = base ** self.exponents
            inv_extra, inv_inter = 1.0 / pos_freqs, 1.0 / (factor * pos_freqs)
            return inv_inter * (1 - extra) + inv_extra * extra, float(att)
        if t == "longrope":
            orig = int(rp["original_max_position_embeddings"])
            factor = rp.get("factor")
            factor = float(self.max_pos) / orig if factor is None else float(factor)
            att = rp.get("attention_factor")
            if att is None:
                att = 1.0 if factor <= 1.0 else math.sqrt(1 + math.log(factor) / math.log(orig))
            # HF (dynamic_rope_update) picks the factors per forward from max(position_ids) + 1.
            ext = rp["long_factor"] if seq_len > orig else rp["short_factor"]
            ext = np.asarray(ext, dtype=np.float64)
            if ext.shape != (dim // 2,):
                raise ValueError(f"longrope factors must have length {dim // 2}, got {ext.shape}")
            return 1.0 / (ext * base ** self.exponents), float(att)
        raise AssertionError(t)

    def cos_sin(self, positions):
        """positions [B, S] -> cos, sin [B, S, dim] (HF: cat(freqs, freqs) times attention scaling)."""
        inv, scale = self.inv_freq(int(np.max(positions)) + 1)
        freqs = positions[..., None].astype(np.float64) * inv
        emb = np.concatenate([freqs, freqs], axis=-1)
        return np.cos(emb) * scale, np.sin(emb) * scale

    @staticmethod
    def apply(x, cos, sin):
        """x [B, S, H, hd]; rotate_half on the first rotary dims, pass the rest through."""
        d = cos.shape[-1]
        xr, xp = x[..., :d], x[..., d:]
        half = d // 2
        rot = np.concatenate([-xr[..., half:], xr[..., :half]], axis=-1)
        c, s = cos[:, :, None, :], sin[:, :, None, :]
        return np.concatenate([xr * c + rot * s, xp], axis=-1)


class Spec:
    """Everything the forward pass needs, derived from a config.json with HF semantics."""

    def __init__(self, cfg, family):
        if family not in HF_CLASS:
            raise ValueError(f"unknown family {family!r}; one of {sorted(HF_CLASS)}")
        _check_keys(cfg, family)
        self.family = family
        self.cfg = cfg
        self.tied = bool(cfg.get("tie_word_embeddings", _TIE_DEFAULT.get(family, False)))
        if family == "gpt2":
            self._gpt2(cfg)
        else:
            self._llama_like(cfg, family)

    def _gpt2(self, cfg):
        self.hidden = _req(cfg, "n_embd")
        self.n_layers = _req(cfg, "n_layer")
        self.n_heads = _req(cfg, "n_head")
        self.vocab = _req(cfg, "vocab_size")
        self.n_positions = _req(cfg, "n_positions")
        if self.hidden % self.n_heads:
            raise ValueError("gpt2: n_embd not divisible by n_head")
        self.head_dim = self.hidden // self.n_heads
        self.inner = cfg.get("n_inner") or 4 * self.hidden
        self.act = cfg.get("activation_function", "gelu_new")
        _act(self.act)
        self.eps = float(cfg.get("layer_norm_epsilon", 1e-5))
        self.scale_attn = bool(cfg.get("scale_attn_weights", True))
        self.inverse_layer = bool(cfg.get("scale_attn_by_inverse_layer_idx", False))
        # reorder_and_upcast_attn only changes the float precision of the same product (float32 here).
        if cfg.get("add_cross_attention"):
            raise ValueError("gpt2: add_cross_attention not supported")

    def _llama_like(self, cfg, family):
        self.hidden = _req(cfg, "hidden_size")
        self.n_layers = _req(cfg, "num_hidden_layers")
        self.n_heads = _req(cfg, "num_attention_heads")
        self.n_kv = cfg.get("num_key_value_heads") or self.n_heads
        self.vocab = _req(cfg, "vocab_size")
        self.inter = _req(cfg, "intermediate_size")
        self.eps = float(_req(cfg, "rms_norm_eps"))
        self.head_dim = cfg.get("head_dim") or self.hidden // self.n_heads
        if self.n_heads % self.n_kv:
            raise ValueError("num_attention_heads not divisible by num_key_value_heads")
        self.act = cfg.get("hidden_act", "silu")
        _act(self.act)
        if cfg.get("pretraining_tp", 1) != 1:
            raise ValueError("pretraining_tp != 1 not supported")
        L = self.n_layers
        # biases: (q/k/v, o, mlp)
        if family == "llama":
            ab, mb = bool(cfg.get("attention_bias", False)), bool(cfg.get("mlp_bias", False))
            self.qkv_bias, self.o_bias, self.mlp_bias = ab, ab, mb
        elif family == "qwen2":
            self.qkv_bias, self.o_bias, self.mlp_bias = True, False, False
        elif family in ("qwen3", "qwen3_moe"):
            ab = bool(cfg.get("attention_bias", False))
            self.qkv_bias, self.o_bias, self.mlp_bias = ab, ab, False
        else:  # mistral, mixtral, phi3
            self.qkv_bias, self.o_bias, self.mlp_bias = False, False, False
        self.qk_norm = family in ("qwen3", "qwen3_moe")
        self.fused = family == "phi3"
        # sliding windows per layer (None = full attention)
        if family in ("mistral", "mixtral", "phi3"):
            w = cfg.get("sliding_window")
            self.windows = [w] * L
        elif family in ("qwen2", "qwen3"):
            w = cfg.get("sliding_window") if cfg.get("use_sliding_window", False) else None
            types = cfg.get("layer_types")
            if types is None:
                mwl = _req(cfg, "max_window_layers") if w is not None else 0
                types = ["sliding_attention" if w is not None and i >= mwl else "full_attention"
                         for i in range(L)]
            if len(types) != L or any(t not in ("full_attention", "sliding_attention") for t in types):
                raise ValueError(f"layer_types {types} invalid for {L} layers")
            if "sliding_attention" in types and w is None:
                raise ValueError("layer_types has sliding_attention but no sliding window is active")
            self.windows = [w if t == "sliding_attention" else None for t in types]
        elif family == "qwen3_moe":
            # Qwen3MoeConfig.__post_init__: sliding_window = sliding_window if use_sliding_window else None;
            # every attention layer passes it (no layer_types; max_window_layers is stored, never read).
            w = cfg.get("sliding_window", 4096) if cfg.get("use_sliding_window", False) else None
            self.windows = [w] * L
        else:  # llama
            self.windows = [None] * L
        for w in self.windows:
            if w is not None and (not isinstance(w, int) or w < 1):
                raise ValueError(f"sliding_window {w!r} invalid")
        # MoE
        self.moe = [None] * L
        if family == "mixtral":
            E, k = _req(cfg, "num_local_experts"), _req(cfg, "num_experts_per_tok")
            self.moe = [("mixtral", E, k, self.inter, True)] * L
        elif family == "qwen3_moe":
            E, k = _req(cfg, "num_experts"), _req(cfg, "num_experts_per_tok")
            step = cfg.get("decoder_sparse_step", 1)
            only = set(cfg.get("mlp_only_layers") or [])
            norm = bool(_req(cfg, "norm_topk_prob"))
            mi = _req(cfg, "moe_intermediate_size")
            self.moe = [("qwen3_moe", E, k, mi, norm)
                        if (i not in only and E > 0 and (i + 1) % step == 0) else None for i in range(L)]
        for m in self.moe:
            if m is not None and not 1 <= m[2] <= m[1]:
                raise ValueError("num_experts_per_tok out of range")
        self.rope = Rope(_rope_parameters(cfg, family), self.head_dim, cfg.get("max_position_embeddings"))
        if self.rope.dim > self.head_dim:
            raise ValueError("rotary dim larger than head_dim")


def expected_weight_shapes(cfg, family):
    """The HF checkpoint names and shapes of a model (what from_pretrained loads with nothing missing)."""
    if family in PLUGINS:
        return PLUGINS[family].expected_weight_shapes(cfg, family)
    s = Spec(cfg, family)
    return _weight_shapes(s)


def _weight_shapes(s):
    w = {}
    if s.family == "gpt2":
        D, I = s.hidden, s.inner
        w["transformer.wte.weight"] = (s.vocab, D)
        w["transformer.wpe.weight"] = (s.n_positions, D)
        for i in range(s.n_layers):
            p = f"transformer.h.{i}."
            for ln in ("ln_1", "ln_2"):
                w[p + ln + ".weight"] = (D,)
                w[p + ln + ".bias"] = (D,)
            w[p + "attn.c_attn.weight"] = (D, 3 * D)   # Conv1D: [in, out]
            w[p + "attn.c_attn.bias"] = (3 * D,)
            w[p + "attn.c_proj.weight"] = (D, D)
            w[p + "attn.c_proj.bias"] = (D,)
            w[p + "mlp.c_fc.weight"] = (D, I)
            w[p + "mlp.c_fc.bias"] = (I,)
            w[p + "mlp.c_proj.weight"] = (I, D)
            w[p + "mlp.c_proj.bias"] = (D,)
        w["transformer.ln_f.weight"] = (D,)
        w["transformer.ln_f.bias"] = (D,)
        if not s.tied:
            w["lm_head.weight"] = (s.vocab, D)
        return w
    D, H, KV, hd = s.hidden, s.n_heads, s.n_kv, s.head_dim
    w["model.embed_tokens.weight"] = (s.vocab, D)
    w["model.norm.weight"] = (D,)
    if not s.tied:
        w["lm_head.weight"] = (s.vocab, D)
    for i in range(s.n_layers):
        p = f"model.layers.{i}."
        w[p + "input_layernorm.weight"] = (D,)
        w[p + "post_attention_layernorm.weight"] = (D,)
        a = p + "self_attn."
        if s.fused:
            w[a + "qkv_proj.weight"] = ((H + 2 * KV) * hd, D)
        else:
            w[a + "q_proj.weight"] = (H * hd, D)
            w[a + "k_proj.weight"] = (KV * hd, D)
            w[a + "v_proj.weight"] = (KV * hd, D)
            if s.qkv_bias:
                w[a + "q_proj.bias"] = (H * hd,)
                w[a + "k_proj.bias"] = (KV * hd,)
                w[a + "v_proj.bias"] = (KV * hd,)
        w[a + "o_proj.weight"] = (D, H * hd)
        if s.o_bias:
            w[a + "o_proj.bias"] = (D,)
        if s.qk_norm:
            w[a + "q_norm.weight"] = (hd,)
            w[a + "k_norm.weight"] = (hd,)
        moe = s.moe[i]
        if moe is None:
            m, I = p + "mlp.", s.inter
            if s.fused:
                w[m + "gate_up_proj.weight"] = (2 * I, D)
            else:
                w[m + "gate_proj.weight"] = (I, D)
                w[m + "up_proj.weight"] = (I, D)
            w[m + "down_proj.weight"] = (D, I)
            if s.mlp_bias:
                w[m + "gate_proj.bias"] = (I,)
                w[m + "up_proj.bias"] = (I,)
                w[m + "down_proj.bias"] = (D,)
        elif moe[0] == "mixtral":
            _, E, _, I, _ = moe
            m = p + "block_sparse_moe."
            w[m + "gate.weight"] = (E, D)
            for e in range(E):
                w[m + f"experts.{e}.w1.weight"] = (I, D)
                w[m + f"experts.{e}.w2.weight"] = (D, I)
                w[m + f"experts.{e}.w3.weight"] = (I, D)
        else:
            _, E, _, I, _ = moe
            m = p + "mlp."
            w[m + "gate.weight"] = (E, D)
            for e in range(E):
                w[m + f"experts.{e}.gate_proj.weight"] = (I, D)
                w[m + f"experts.{e}.up_proj.weight"] = (I, D)
                w[m + f"experts.{e}.down_proj.weight"] = (D, I)
    return w


# GPT-2 checkpoints may carry the causal-mask buffers; HF ignores them on load.
_IGNORED_ON_LOAD = {"gpt2": (".attn.bias", ".attn.masked_bias")}


def prepare_inputs(ids, positions, vocab):
    """ids [B, S] as int64 (checked against the vocabulary) and positions (default 0..S-1)."""
    ids = np.asarray(ids, dtype=np.int64)
    if ids.ndim != 2:
        raise ValueError("ids must be [B, S]")
    if positions is None:
        positions = np.broadcast_to(np.arange(ids.shape[1]), ids.shape)
    positions = np.asarray(positions, dtype=np.int64)
    if np.any(ids < 0) or np.any(ids >= vocab):
        raise ValueError("token id out of range")
    return ids, positions


class GreedyMixin:
    """greedy() for any model with forward(ids) -> logits [B, S, V]."""

    def greedy(self, prompt, steps):
        """Greedy decoding by recomputing the whole sequence each step (equivalent to HF generate with
        a correct cache). Returns (new tokens, step logits [steps, V], top1 - top2 margins)."""
        seq = list(int(t) for t in prompt)
        toks, logits, margins = [], [], []
        for _ in range(steps):
            last = self.forward(np.asarray([seq]))[0, -1]
            order = np.argsort(-last, kind="stable")
            t = int(order[0])
            toks.append(t)
            logits.append(last)
            margins.append(float(last[order[0]] - last[order[1]]))
            seq.append(t)
        return toks, np.stack(logits), margins


def Model(config, weights, family):  # noqa: N802 (kept a constructor-like name for callers)
    """The reference model of `family`: the core families below, or a plugin module's."""
    if family in PLUGINS:
        return PLUGINS[family].Model(config, weights, family)
    return CoreModel(config, weights, family)


class CoreModel(GreedyMixin):
    def __init__(self, config, weights, family):
        self.spec = Spec(config, family)
        shapes = _weight_shapes(self.spec)
        got = {k: v for k, v in weights.items()
               if not any(k.endswith(sfx) for sfx in _IGNORED_ON_LOAD.get(family, ()))}
        missing = sorted(set(shapes) - set(got))
        unexpected = sorted(set(got) - set(shapes))
        bad = sorted(k for k in set(shapes) & set(got) if tuple(got[k].shape) != tuple(shapes[k]))
        if missing or unexpected or bad:
            raise ValueError(f"checkpoint does not match {HF_CLASS[family]}: missing {missing[:8]}, "
                             f"unexpected {unexpected[:8]}, bad shapes "
                             f"{[(k, got[k].shape, shapes[k]) for k in bad[:8]]}")
        self.w = {k: np.asarray(v, dtype=np.float64) for k, v in got.items()}
        self.router_gaps = []   # (k-th minus (k+1)-th router probability) of every routed token

    # ---- attention -------------------------------------------------------
    @staticmethod
    def _attend(q, k, v, scale, window, n_rep):
        """q [B,S,H,hd], k/v [B,S,KV,hd] -> [B,S,H*hd]; causal (+ HF sliding window: q - k < window)."""
        B, S, H, hd = q.shape
        k = np.repeat(k, n_rep, axis=2)  # head h uses kv head h // n_rep
        v = np.repeat(v, n_rep, axis=2)
        scores = np.einsum("bqhd,bkhd->bhqk", q, k) * scale
        qi = np.arange(S)[:, None]
        ki = np.arange(S)[None, :]
        vis = ki <= qi
        if window is not None:
            vis &= (qi - ki) < window
        scores = np.where(vis[None, None], scores, -np.inf)
        p = _softmax(scores, axis=-1)
        return np.einsum("bhqk,bkhd->bqhd", p, v).reshape(B, S, H * v.shape[-1])

    # ---- llama-like ------------------------------------------------------
    def _mlp(self, x, p, I):
        s, w = self.spec, self.w
        act = _act(s.act)
        if s.fused:
            gu = _linear(x, w[p + "gate_up_proj.weight"])
            gate, up = gu[..., :I], gu[..., I:]
        else:
            gate = _linear(x, w[p + "gate_proj.weight"], w.get(p + "gate_proj.bias"))
            up = _linear(x, w[p + "up_proj.weight"], w.get(p + "up_proj.bias"))
        return _linear(act(gate) * up, w[p + "down_proj.weight"], w.get(p + "down_proj.bias"))

    def _moe(self, x, p, moe):
        kind, E, k, I, norm = moe
        w, act = self.w, _act(self.spec.act)
        shp = x.shape
        t = x.reshape(-1, shp[-1])
        pre = p + ("block_sparse_moe." if kind == "mixtral" else "mlp.")
        probs = _softmax(_linear(t, w[pre + "gate.weight"]), axis=-1)
        order = np.argsort(-probs, axis=-1, kind="stable")
        top = order[:, :k]
        topw = np.take_along_axis(probs, top, axis=-1)
        if k < E:
            nxt = np.take_along_axis(probs, order[:, k:k + 1], axis=-1)
            self.router_gaps.extend((topw[:, -1] - nxt[:, 0]).tolist())
        if norm:  # Mixtral always renormalises the top-k; Qwen3-MoE only with norm_topk_prob
            topw = topw / np.sum(topw, axis=-1, keepdims=True)
        out = np.zeros_like(t)
        for e in range(E):
            rows, slot = np.nonzero(top == e)
            if rows.size == 0:
                continue
            xe = t[rows]
            if kind == "mixtral":
                ep = pre + f"experts.{e}."
                h = act(_linear(xe, w[ep + "w1.weight"])) * _linear(xe, w[ep + "w3.weight"])
                y = _linear(h, w[ep + "w2.weight"])
            else:
                ep = pre + f"experts.{e}."
                h = act(_linear(xe, w[ep + "gate_proj.weight"])) * _linear(xe, w[ep + "up_proj.weight"])
                y = _linear(h, w[ep + "down_proj.weight"])
            np.add.at(out, rows, y * topw[rows, slot][:, None])
        return out.reshape(shp)

    def _forward_llama_like(self, ids, positions):
        s, w = self.spec, self.w
        B, S = ids.shape
        H, KV, hd = s.n_heads, s.n_kv, s.head_dim
        x = w["model.embed_tokens.weight"][ids]
        cos, sin = s.rope.cos_sin(positions)
        for i in range(s.n_layers):
            p = f"model.layers.{i}."
            a = p + "self_attn."
            h = _rms_norm(x, w[p + "input_layernorm.weight"], s.eps)
            if s.fused:
                qkv = _linear(h, w[a + "qkv_proj.weight"])
                q = qkv[..., :H * hd]
                k = qkv[..., H * hd:(H + KV) * hd]
                v = qkv[..., (H + KV) * hd:]
            else:
                q = _linear(h, w[a + "q_proj.weight"], w.get(a + "q_proj.bias"))
                k = _linear(h, w[a + "k_proj.weight"], w.get(a + "k_proj.bias"))
                v = _linear(h, w[a + "v_proj.weight"], w.get(a + "v_proj.bias"))
            q = q.reshape(B, S, H, hd)
            k = k.reshape(B, S, KV, hd)
            v = v.reshape(B, S, KV, hd)
            if s.qk_norm:  # per-head RMSNorm before RoPE
                q = _rms_norm(q, w[a + "q_norm.weight"], s.eps)
                k = _rms_norm(k, w[a + "k_norm.weight"], s.eps)
            q = Rope.apply(q, cos, sin)
            k = Rope.apply(k, cos, sin)
            o = self._attend(q, k, v, hd ** -0.5, s.windows[i], H // KV)
            x = x + _linear(o, w[a + "o_proj.weight"], w.get(a + "o_proj.bias"))
            h = _rms_norm(x, w[p + "post_attention_layernorm.weight"], s.eps)
            if s.moe[i] is None:
                x = x + self._mlp(h, p + "mlp.", s.inter)
            else:
                x = x + self._moe(h, p, s.moe[i])
        x = _rms_norm(x, w["model.norm.weight"], s.eps)
        head = w["model.embed_tokens.weight"] if s.tied else w["lm_head.weight"]
        return x @ head.T

    # ---- gpt2 ------------------------------------------------------------
    def _forward_gpt2(self, ids, positions):
        s, w = self.spec, self.w
        B, S = ids.shape
        if int(np.max(positions)) >= s.n_positions:
            raise ValueError("position beyond n_positions")
        D, H, hd = s.hidden, s.n_heads, s.head_dim
        act = _act(s.act)
        x = w["transformer.wte.weight"][ids] + w["transformer.wpe.weight"][positions]
        for i in range(s.n_layers):
            p = f"transformer.h.{i}."
            h = _layer_norm(x, w[p + "ln_1.weight"], w[p + "ln_1.bias"], s.eps)
            qkv = h @ w[p + "attn.c_attn.weight"] + w[p + "attn.c_attn.bias"]  # Conv1D
            q, k, v = (qkv[..., j * D:(j + 1) * D].reshape(B, S, H, hd) for j in range(3))
            scale = (hd ** -0.5 if s.scale_attn else 1.0) / (float(i + 1) if s.inverse_layer else 1.0)
            o = self._attend(q, k, v, scale, None, 1)
            x = x + o @ w[p + "attn.c_proj.weight"] + w[p + "attn.c_proj.bias"]
            h = _layer_norm(x, w[p + "ln_2.weight"], w[p + "ln_2.bias"], s.eps)
            m = act(h @ w[p + "mlp.c_fc.weight"] + w[p + "mlp.c_fc.bias"])
            x = x + m @ w[p + "mlp.c_proj.weight"] + w[p + "mlp.c_proj.bias"]
        x = _layer_norm(x, w["transformer.ln_f.weight"], w["transformer.ln_f.bias"], s.eps)
        head = w["transformer.wte.weight"] if s.tied else w["lm_head.weight"]
        return x @ head.T

    # ---- public ----------------------------------------------------------
    def forward(self, ids, positions=None):
        """One uncached forward: ids [B, S] -> logits [B, S, V] (float64). No padding, no attention mask."""
        ids, positions = prepare_inputs(ids, positions, self.spec.vocab)
        if self.spec.family == "gpt2":
            return self._forward_gpt2(ids, positions)
        return self._forward_llama_like(ids, positions)


def family_for_class(cls):
    """The reference family implementing the Hugging Face class `cls`."""
    found = [fam for fam, c in HF_CLASS.items() if c == cls]
    if len(found) != 1:
        raise ValueError(f"the reference implements no family for {cls}"
                         if not found else
                         f"{cls} is implemented by {found}: name one")
    return found[0]


def case_family(case_dir, family="auto"):
    """`family`, or with "auto" the one of the case's architectures[0]."""
    if family != "auto":
        return family
    with open(f"{case_dir}/config.json") as f:
        return family_for_class(json.load(f)["architectures"][0])


def load_case(case_dir, family):
    """Model for a case directory (config.json + model.safetensors)."""
    family = case_family(case_dir, family)
    with open(f"{case_dir}/config.json") as f:
        cfg = json.load(f)
    weights, _ = read_safetensors(f"{case_dir}/model.safetensors")
    return Model(cfg, weights, family)


# ---- plugin families --------------------------------------------------------
# Further families live in tests/reference/families/*.py. Each module defines
#   FAMILIES = {"family": "HFClassName", ...}
#   expected_weight_shapes(cfg, family) -> {name: shape}
#   Model(cfg, weights, family) -> object with .spec.vocab, .router_gaps (list),
#                                  .forward(ids [B, S]) -> logits, .greedy(...)
#   weight_init(name, shape) -> None (default scheme) or ("normal", std) /
#                               ("norm", None) / ("uniform", (lo, hi)) /
#                               ("randint", (lo, hi)) (int64)           [optional]
# and is registered here by name.
PLUGINS = {}


def _load_plugins():
    import importlib
    import os as _os
    here = _os.path.join(_os.path.dirname(_os.path.abspath(__file__)), "families")
    if not _os.path.isdir(here):
        return
    if here not in sys.path:
        sys.path.insert(0, here)
    for fname in sorted(_os.listdir(here)):
        if fname.endswith(".py") and not fname.startswith("_"):
            mod = importlib.import_module(fname[:-3])
            for fam, cls in mod.FAMILIES.items():
                if fam in HF_CLASS:
                    raise ValueError(f"family {fam} defined twice ({fname})")
                HF_CLASS[fam] = cls
                PLUGINS[fam] = mod


_load_plugins()
