"""Plugin families of the numpy reference: the dense LLaMA-shaped decoders of the second wave -- OLMo, OLMo 2,
OLMo 3, Granite, Helium, Ministral, Arcee, Seed-OSS, SmolLM3, EXAONE 4, Hunyuan dense, ERNIE 4.5, GLM, GLM-4,
Gemma and Apertus.

Written from Hugging Face transformers' configuration_*.py / modular_*.py / modeling_*.py of each family
(transformers 5.x), NOT from archc's sources. Checkpoint names and shapes follow the HF hub layout (as in the
shared hf-golden fixtures). Everything is computed in float64.

Covered (HF semantics), per family:
* olmo: LayerNorm without weight or bias (eps 1e-5, OlmoLayerNorm), q/k/v clamped to +-clip_qkv after their
  projections, q/k/v/o biases per attention_bias, bias-free SwiGLU MLP.
* olmo2: RMSNorms on the branch outputs only (post_attention_layernorm, post_feedforward_layernorm), q_norm /
  k_norm RMSNorms over the full projected width (heads * head_dim) before the head split and RoPE.
* olmo3: OLMo 2 plus layer_types (default: every 4th layer full, the others sliding_window), the sliding layers
  rotated with the default RoPE and the full layers with the configured rope scaling (OLMo 3's two rotary
  embeddings).
* granite: embedding_multiplier, attention_multiplier (the score scale), residual_multiplier (both branches),
  logits divided by logits_scaling; attention_bias, mlp_bias.
* helium: RoPE on interleaved pairs (rotate_half over x[0::2], x[1::2], cos/sin repeat_interleave'd), q/k/v
  biases per attention_bias and an o_proj without bias (hidden_size x hidden_size), mlp_bias.
* ministral: Qwen2's layer without q/k/v biases; layer_types (default all sliding when sliding_window is set),
  one flat rope_parameters (HF raises on a dict keyed by layer type).
* arcee: non-gated MLP down(act(up(x))) (relu2 default), mlp_bias, attention_bias.
* seed_oss: q/k/v biases per attention_bias, o_proj bias per attention_out_bias, head_dim (128; null ->
  hidden_size / heads), num_key_value_heads (8; null -> heads), mlp_bias.
* smollm3: no_rope_layers (1 = RoPE, default: every no_rope_layer_interval-th layer NoPE), layer_types (default
  sliding on the NoPE layers when use_sliding_window and sliding_window), attention_bias, mlp_bias.
* exaone4: post-norm block (olmo2), per-head q/k RMSNorms before RoPE, layer_types (default: all but every
  sliding_window_pattern-th layer sliding), RoPE only on the sliding layers when sliding_window is set.
* hunyuan_v1_dense: per-head query_layernorm / key_layernorm after RoPE, attention_bias, bias-free MLP, rope
  "dynamic" with alpha = a fixed base theta * alpha^(head_dim / (head_dim - 2)).
* ernie4_5: use_bias on every projection, RoPE on interleaved pairs, head_dim / num_key_value_heads as seed_oss.
* glm / glm4: q/k/v biases per attention_bias (o_proj none), partial RoPE (partial_rotary_factor, default 0.5)
  on interleaved pairs of the first rotary dims, fused gate_up_proj; glm4 adds post_self_attn_layernorm and
  post_mlp_layernorm on the branch outputs.
* gemma: (1 + w) RMSNorms, the embedding times sqrt(hidden_size), q/k/v/o biases per attention_bias, GeGLU with
  hidden_act.
* apertus: per-head q_norm / k_norm before RoPE, attention_layernorm / feedforward_layernorm, non-gated bias-free
  MLP with xIELU (alpha_p, alpha_n [1] and the beta, eps buffers of the checkpoint) or another hidden_act,
  default rope llama3 (theta 12e6, factor 8, original 8192, low 1, high 4) when no rope_parameters is given.
Common: GQA (query head h reads kv head h // (H/KV)), HF's sliding mask (key j visible to query i iff j <= i and
i - j < window), rope types default / linear / llama3 / yarn / longrope (hf_reference.Rope), tied heads.
Anything else raises ValueError.
"""
import math

import numpy as np

import hf_reference as ref

FAMILIES = {
    "olmo": "OlmoForCausalLM",
    "olmo2": "Olmo2ForCausalLM",
    "olmo3": "Olmo3ForCausalLM",
    "granite": "GraniteForCausalLM",
    "helium": "HeliumForCausalLM",
    "ministral": "MinistralForCausalLM",
    "arcee": "ArceeForCausalLM",
    "seed_oss": "SeedOssForCausalLM",
    "smollm3": "SmolLM3ForCausalLM",
    "exaone4": "Exaone4ForCausalLM",
    "hunyuan_v1_dense": "HunYuanDenseV1ForCausalLM",
    "ernie4_5": "Ernie4_5ForCausalLM",
    "glm": "GlmForCausalLM",
    "glm4": "Glm4ForCausalLM",
    "gemma": "GemmaForCausalLM",
    "apertus": "ApertusForCausalLM",
}

_HARMLESS = {
    "architectures", "model_type", "bos_token_id", "eos_token_id", "pad_token_id", "eod_token_id", "torch_dtype",
    "dtype", "transformers_version", "use_cache", "initializer_range", "attention_dropout", "residual_dropout",
    "pretraining_tp", "_name_or_path", "max_position_embeddings", "tie_word_embeddings",
}
_ROPE = {"rope_theta", "rope_scaling", "rope_parameters"}
_BASE = {"vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
         "num_key_value_heads", "hidden_act", "head_dim"} | _ROPE
_KNOWN = {
    "olmo": _BASE | {"attention_bias", "clip_qkv"},
    "olmo2": _BASE | {"attention_bias", "rms_norm_eps"},
    "olmo3": _BASE | {"attention_bias", "rms_norm_eps", "sliding_window", "layer_types"},
    "granite": (_BASE - {"head_dim"}) | {"attention_bias", "mlp_bias", "rms_norm_eps", "embedding_multiplier",
                                         "logits_scaling", "residual_multiplier", "attention_multiplier"},
    "helium": _BASE | {"attention_bias", "mlp_bias", "rms_norm_eps"},
    "ministral": _BASE | {"rms_norm_eps", "sliding_window", "layer_types"},
    "arcee": _BASE | {"attention_bias", "mlp_bias", "rms_norm_eps"},
    "seed_oss": _BASE | {"attention_bias", "attention_out_bias", "mlp_bias", "rms_norm_eps"},
    "smollm3": _BASE | {"attention_bias", "mlp_bias", "rms_norm_eps", "use_sliding_window", "sliding_window",
                        "no_rope_layers", "no_rope_layer_interval", "layer_types"},
    "exaone4": _BASE | {"rms_norm_eps", "sliding_window", "sliding_window_pattern", "layer_types"},
    "hunyuan_v1_dense": _BASE | {"attention_bias", "rms_norm_eps"},
    "ernie4_5": _BASE | {"rms_norm_eps", "use_bias"},
    "glm": _BASE | {"attention_bias", "rms_norm_eps", "partial_rotary_factor"},
    "glm4": _BASE | {"attention_bias", "rms_norm_eps", "partial_rotary_factor"},
    "gemma": _BASE | {"attention_bias", "rms_norm_eps", "hidden_activation", "use_bidirectional_attention"},
    "apertus": _BASE | {"attention_bias", "rms_norm_eps"},
}

# The config classes' defaults (None: the key is required by the reference). "kv_none" / "hd_none": what an
# explicit null resolves to ("heads": num_attention_heads, "split": hidden_size // num_attention_heads).
_DEFAULTS = {
    "olmo": dict(vocab_size=50304, hidden_size=4096, intermediate_size=11008, num_hidden_layers=32,
                 num_attention_heads=32, theta=10000.0, tie=False),
    "granite": dict(vocab_size=32000, hidden_size=4096, intermediate_size=11008, num_hidden_layers=32,
                    num_attention_heads=32, eps=1e-6, theta=10000.0, tie=False),
    "helium": dict(vocab_size=48000, hidden_size=2560, intermediate_size=7040, num_hidden_layers=24,
                   num_attention_heads=20, num_key_value_heads=20, head_dim=128, eps=1e-8, theta=100000.0,
                   tie=False),
    "ministral": dict(vocab_size=32000, hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
                      num_attention_heads=32, num_key_value_heads=8, eps=1e-6, theta=10000.0, tie=False),
    "arcee": dict(vocab_size=32000, hidden_size=2560, intermediate_size=18432, num_hidden_layers=32,
                  num_attention_heads=32, eps=1e-5, theta=10000.0, tie=False, act="relu2"),
    "seed_oss": dict(vocab_size=155136, hidden_size=4096, intermediate_size=27648, num_hidden_layers=64,
                     num_attention_heads=80, num_key_value_heads=8, head_dim=128, eps=1e-6, theta=10000.0,
                     tie=False),
    "smollm3": dict(vocab_size=128256, hidden_size=2048, intermediate_size=11008, num_hidden_layers=36,
                    num_attention_heads=16, num_key_value_heads=4, eps=1e-6, theta=2000000.0, tie=True),
    "exaone4": dict(vocab_size=102400, hidden_size=4096, intermediate_size=16384, num_hidden_layers=32,
                    num_attention_heads=32, num_key_value_heads=32, eps=1e-5, theta=10000.0, tie=False),
    "hunyuan_v1_dense": dict(vocab_size=290943, hidden_size=4096, intermediate_size=11008, num_hidden_layers=32,
                             num_attention_heads=32, eps=1e-5, theta=10000.0, tie=False),
    "ernie4_5": dict(vocab_size=103424, hidden_size=1024, intermediate_size=3072, num_hidden_layers=18,
                     num_attention_heads=16, num_key_value_heads=2, head_dim=128, eps=1e-5, theta=500000.0,
                     tie=True),
    "glm": dict(vocab_size=151552, hidden_size=4096, intermediate_size=13696, num_hidden_layers=40,
                num_attention_heads=32, num_key_value_heads=2, head_dim=128, eps=1.5625e-07, theta=10000.0,
                tie=False),
    "gemma": dict(vocab_size=256000, hidden_size=3072, intermediate_size=24576, num_hidden_layers=28,
                  num_attention_heads=16, num_key_value_heads=16, head_dim=256, eps=1e-6, theta=10000.0,
                  tie=True, act="gelu_pytorch_tanh"),
    "apertus": dict(vocab_size=131072, hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
                    num_attention_heads=32, eps=1e-5, theta=12000000.0, tie=False, act="xielu"),
}
_DEFAULTS["olmo2"] = dict(_DEFAULTS["olmo"], eps=1e-5)
_DEFAULTS["olmo3"] = dict(_DEFAULTS["olmo2"])
_DEFAULTS["glm4"] = dict(_DEFAULTS["glm"])
# An explicit null means num_attention_heads / hidden_size // heads (the config's __post_init__).
_KV_NULL_IS_HEADS = {"ministral", "seed_oss", "smollm3", "ernie4_5", "olmo", "olmo2", "olmo3", "granite", "arcee",
                     "hunyuan_v1_dense", "apertus"}
_HD_NULL_IS_SPLIT = {"seed_oss", "ernie4_5", "hunyuan_v1_dense"}


def _relu2(x):
    return np.maximum(x, 0.0) ** 2


def _act(name):
    if name == "relu2":
        return _relu2
    return ref._act(name)


def _rms(x, w, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def _rms_1p(x, w, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * (1.0 + w)


def _ln_plain(x, eps=1e-5):
    mu = np.mean(x, axis=-1, keepdims=True)
    return (x - mu) / np.sqrt(np.mean((x - mu) ** 2, axis=-1, keepdims=True) + eps)


def _lin(x, w, b=None):
    y = x @ w.T
    return y if b is None else y + b


def _softplus(x):
    return np.log1p(np.exp(-np.abs(x))) + np.maximum(x, 0.0)


def _xielu(x, alpha_p, alpha_n, beta, eps):
    """HF XIELUActivation (Python form): softplus-parametrised alphas, beta and eps from the checkpoint."""
    ap = _softplus(alpha_p)
    an = beta + _softplus(alpha_n)
    return np.where(x > 0, ap * x * x + beta * x, (np.expm1(np.minimum(x, eps)) - x) * an + beta * x)


def _get(cfg, key, default):
    """cfg[key], or the default when the key is absent (an explicit null stays None)."""
    return cfg[key] if key in cfg else default


def _rope_source(cfg, default_theta, default_params=None):
    """Standardised rope parameters as transformers 5 builds them: rope_parameters, or when it is absent / null the
    config class's default dict (default_params, e.g. ApertusConfig's); a legacy rope_scaling replaces it when truthy
    (convert_rope_params_to_dict: `rope_scaling or rope_parameters`, so null and {} keep it); then the top-level
    rope_theta (else the class's default_theta) only fills a missing rope_theta (setdefault)."""
    rp, rs = cfg.get("rope_parameters"), cfg.get("rope_scaling")
    if rp is None:
        rp = default_params
    src = dict(rs or (rp if rp is not None else {}))
    if "type" in src and "rope_type" not in src:
        src["rope_type"] = src.pop("type")
    src.setdefault("rope_type", "default")
    theta = cfg.get("rope_theta")
    if "rope_theta" not in src:
        src["rope_theta"] = default_theta if theta is None else theta
    return src


def _make_rope(params, head_dim, max_pos, partial=1.0):
    params = dict(params)
    prf = float(params.pop("partial_rotary_factor", partial))
    if not 0.0 < prf <= 1.0:
        raise ValueError(f"partial_rotary_factor {prf} out of range")
    rp = ref._rope_parameters({"rope_parameters": params, "max_position_embeddings": max_pos}, "llama")
    rp["partial_rotary_factor"] = prf
    rope = ref.Rope(rp, head_dim, max_pos)
    if rope.dim < 2 or rope.dim > head_dim:
        raise ValueError(f"rotary dim {rope.dim} invalid for head_dim {head_dim}")
    return rope


class _FixedBaseRope:
    """Hunyuan's alpha RoPE: the default rotation with base theta * alpha^(hd / (hd - 2))."""

    def __init__(self, base, head_dim):
        self.dim = head_dim
        self.inv = 1.0 / base ** (np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)

    def cos_sin(self, positions):
        freqs = positions[..., None].astype(np.float64) * self.inv
        emb = np.concatenate([freqs, freqs], axis=-1)
        return np.cos(emb), np.sin(emb)


def _apply_rope(x, cos, sin, interleaved):
    """x [B, S, H, hd]; rotate the first cos.shape[-1] dims, the rest pass through. Interleaved: pairs
    (2k, 2k+1) with frequency k (cos[..., :d/2] repeat_interleave'd, rotate_half over x[0::2], x[1::2])."""
    if not interleaved:
        return ref.Rope.apply(x, cos, sin)
    d = cos.shape[-1]
    c = np.repeat(cos[..., : d // 2], 2, axis=-1)[:, :, None, :]
    s = np.repeat(sin[..., : d // 2], 2, axis=-1)[:, :, None, :]
    xr, xp = x[..., :d], x[..., d:]
    x1, x2 = xr[..., 0::2], xr[..., 1::2]
    rot = np.stack([-x2, x1], axis=-1).reshape(xr.shape)
    return np.concatenate([xr * c + rot * s, xp], axis=-1)


class _Spec:
    pass


def _spec(cfg, family):
    if family not in FAMILIES:
        raise ValueError(f"unknown family {family!r}")
    unknown = sorted(set(cfg) - _HARMLESS - _KNOWN[family])
    if unknown:
        raise ValueError(f"{family}: config keys not supported by the reference: {unknown}")
    if cfg.get("model_type") != family:
        raise ValueError(f"config model_type {cfg.get('model_type')!r} is not {family!r}")
    archs = cfg.get("architectures") or []
    if archs and archs[0] != FAMILIES[family]:
        raise ValueError(f"architectures[0] {archs[0]!r} is not {FAMILIES[family]}")
    d = _DEFAULTS[family]
    s = _Spec()
    s.family = family

    def val(key):
        v = cfg.get(key, d.get(key))
        if v is None:
            raise ValueError(f"{family}: config key {key!r} is required by the reference")
        return v

    s.vocab, s.hidden, s.inter = int(val("vocab_size")), int(val("hidden_size")), int(val("intermediate_size"))
    s.n_layers, s.n_heads = int(val("num_hidden_layers")), int(val("num_attention_heads"))
    kv = _get(cfg, "num_key_value_heads", d.get("num_key_value_heads"))
    if kv is None:
        if "num_key_value_heads" in cfg and family not in _KV_NULL_IS_HEADS:
            raise ValueError(f"{family}: num_key_value_heads null is not supported by HF")
        kv = s.n_heads
    s.n_kv = int(kv)
    hd = _get(cfg, "head_dim", d.get("head_dim"))
    if hd is None:
        if "head_dim" in cfg and d.get("head_dim") is not None and family not in _HD_NULL_IS_SPLIT:
            raise ValueError(f"{family}: head_dim null is not supported by HF")
        hd = s.hidden // s.n_heads
    s.head_dim = int(hd)
    if s.n_heads % s.n_kv:
        raise ValueError("num_attention_heads must be a multiple of num_key_value_heads")
    s.eps = float(cfg.get("rms_norm_eps", d.get("eps", 1e-6)))
    s.act_name = cfg.get("hidden_act", d.get("act", "silu"))
    s.tied = bool(cfg.get("tie_word_embeddings", d["tie"]))
    max_pos = int(cfg.get("max_position_embeddings", 2048))
    L = s.n_layers

    # Defaults of the llama-shaped layer, then the family's differences.
    s.norm = "rms"                 # rms | rms1p | plain (weightless LayerNorm)
    s.block = "pre"                # pre | post | sandwich4
    s.norm_names = ["input_layernorm", "post_attention_layernorm"]
    bias = bool(cfg.get("attention_bias", False))
    s.qkv_bias, s.o_bias, s.mlp_bias = bias, bias, bool(cfg.get("mlp_bias", False))
    s.qk_norm, s.qk_after_rope, s.qk_names = None, False, ("q_norm", "k_norm")
    s.clip = None
    s.interleaved, partial = False, 1.0
    s.mlp = "gated"                # gated | fused | plain | xielu
    s.embed_scale, s.residual, s.logit_div, s.scale = 1.0, 1.0, 1.0, s.head_dim ** -0.5
    rope_default = None
    sliding = [False] * L
    rope_on = [True] * L
    window = None
    per_type_rope = None           # (sliding params, full params)

    if family == "olmo":
        s.norm, s.mlp_bias = "plain", False
        s.clip = cfg.get("clip_qkv")
    elif family in ("olmo2", "olmo3"):
        s.block, s.norm_names = "post", ["post_attention_layernorm", "post_feedforward_layernorm"]
        s.qk_norm, s.mlp_bias = "full", False
        if family == "olmo3":
            window = _get(cfg, "sliding_window", 4096)
            lt = cfg.get("layer_types") or ["sliding_attention" if (i + 1) % 4 != 0 else "full_attention"
                                            for i in range(L)]
            sliding = [t == "sliding_attention" for t in lt]
            per_type_rope = "olmo3"
    elif family == "granite":
        s.embed_scale = float(cfg.get("embedding_multiplier", 1.0))
        s.residual = float(cfg.get("residual_multiplier", 1.0))
        s.scale = float(cfg.get("attention_multiplier", 1.0))
        s.logit_div = float(cfg.get("logits_scaling", 1.0))
    elif family == "helium":
        s.o_bias, s.interleaved = False, True
        if s.n_heads * s.head_dim != s.hidden:
            raise ValueError("helium: o_proj is hidden_size x hidden_size")
    elif family == "ministral":
        s.qkv_bias = s.o_bias = False
        window = _get(cfg, "sliding_window", 4096)
        lt = cfg.get("layer_types") or [("sliding_attention" if window is not None else "full_attention")] * L
        sliding = [t == "sliding_attention" for t in lt]
        rp = cfg.get("rope_parameters") or {}
        if "full_attention" in rp or "sliding_attention" in rp:
            # One Qwen2RotaryEmbedding reads rope_parameters["rope_type"]: a dict keyed by layer type
            # (standardize_rope_params' per-layer form) raises KeyError in HF.
            raise ValueError("ministral: rope_parameters keyed by layer type is not run by HF")
    elif family == "arcee":
        s.mlp = "plain"
    elif family == "seed_oss":
        s.qkv_bias = bool(cfg.get("attention_bias", True))
        s.o_bias = bool(cfg.get("attention_out_bias", False))
    elif family == "smollm3":
        interval = int(cfg.get("no_rope_layer_interval", 4))
        nrl = cfg.get("no_rope_layers") or [int((i + 1) % interval != 0) for i in range(L)]
        if len(nrl) < L:
            raise ValueError("no_rope_layers shorter than num_hidden_layers")
        rope_on = [bool(nrl[i]) for i in range(L)]
        window = cfg.get("sliding_window")
        use_sw = bool(cfg.get("use_sliding_window", False))
        lt = cfg.get("layer_types") or ["sliding_attention" if use_sw and window is not None and not rope_on[i]
                                        else "full_attention" for i in range(L)]
        sliding = [t == "sliding_attention" for t in lt]
        if any(sliding) and window is None:
            raise ValueError("smollm3: sliding layers without sliding_window")
    elif family == "exaone4":
        s.block, s.norm_names = "post", ["post_attention_layernorm", "post_feedforward_layernorm"]
        s.qk_norm, s.qkv_bias, s.o_bias, s.mlp_bias = "head", False, False, False
        window = _get(cfg, "sliding_window", 4096)
        pattern = _get(cfg, "sliding_window_pattern", 4)
        lt = cfg.get("layer_types")
        if lt is None:
            if window is None:
                lt = ["full_attention"] * L
            else:
                if not isinstance(pattern, int) or pattern <= 0:
                    raise ValueError("exaone4: sliding_window_pattern must be a positive int")
                lt = ["sliding_attention" if (i + 1) % pattern != 0 else "full_attention" for i in range(L)]
        sliding = [t == "sliding_attention" for t in lt]
        rope_on = [window is None or sliding[i] for i in range(L)]
    elif family == "hunyuan_v1_dense":
        s.qk_norm, s.qk_after_rope, s.qk_names = "head", True, ("query_layernorm", "key_layernorm")
        s.mlp_bias = False
    elif family == "ernie4_5":
        ub = bool(cfg.get("use_bias", False))
        s.qkv_bias = s.o_bias = s.mlp_bias = ub
        s.interleaved = True
    elif family in ("glm", "glm4"):
        s.qkv_bias, s.o_bias, s.mlp_bias = bool(cfg.get("attention_bias", True)), False, False
        s.interleaved, s.mlp = True, "fused"
        partial = float(cfg.get("partial_rotary_factor", 0.5))
        if family == "glm4":
            s.block = "sandwich4"
            s.norm_names = ["input_layernorm", "post_self_attn_layernorm", "post_attention_layernorm",
                            "post_mlp_layernorm"]
    elif family == "gemma":
        if cfg.get("use_bidirectional_attention"):
            raise ValueError("gemma: use_bidirectional_attention not supported")
        s.norm, s.mlp_bias = "rms1p", False
        s.embed_scale = math.sqrt(s.hidden)
    elif family == "apertus":
        s.qk_norm, s.mlp_bias = "head", False
        s.norm_names = ["attention_layernorm", "feedforward_layernorm"]
        s.mlp = "xielu" if s.act_name == "xielu" else "plain"
        rope_default = {"rope_type": "llama3", "rope_theta": 12000000.0, "factor": 8.0,
                        "original_max_position_embeddings": 8192, "low_freq_factor": 1.0,
                        "high_freq_factor": 4.0}
    s.act = None if s.mlp == "xielu" else _act(s.act_name)

    src = _rope_source(cfg, d["theta"], rope_default)
    if per_type_rope == "olmo3":
        full = _make_rope(src, s.head_dim, max_pos)
        plain = _make_rope({"rope_type": "default", "rope_theta": src["rope_theta"]}, s.head_dim, max_pos)
        s.ropes = [plain if sliding[i] else full for i in range(L)]
    elif family == "hunyuan_v1_dense" and src["rope_type"] == "dynamic" and src.get("alpha") is not None:
        if cfg.get("head_dim") is None:
            raise ValueError("hunyuan: the alpha RoPE reads config.head_dim")
        alpha = float(src["alpha"])
        rope = _FixedBaseRope(float(src["rope_theta"]) * alpha ** (s.head_dim / (s.head_dim - 2)), s.head_dim)
        s.ropes = [rope] * L
    else:
        if family not in ("glm", "glm4") and "partial_rotary_factor" in src:
            raise ValueError(f"{family}: partial_rotary_factor not supported by the reference")
        rope = _make_rope(src, s.head_dim, max_pos, partial)
        s.ropes = [rope] * L
    s.ropes = [s.ropes[i] if rope_on[i] else None for i in range(L)]
    s.windows = [window if sliding[i] else None for i in range(L)]
    return s


def _shapes(s):
    H, KV, hd, D, I, V = s.n_heads, s.n_kv, s.head_dim, s.hidden, s.inter, s.vocab
    out = {"model.embed_tokens.weight": (V, D)}
    if s.norm != "plain":
        out["model.norm.weight"] = (D,)
    if not s.tied:
        out["lm_head.weight"] = (V, D)
    o_in = D if s.family == "helium" else H * hd
    for i in range(s.n_layers):
        p = f"model.layers.{i}."
        a = p + "self_attn."
        for n, rows in (("q_proj", H * hd), ("k_proj", KV * hd), ("v_proj", KV * hd)):
            out[a + n + ".weight"] = (rows, D)
            if s.qkv_bias:
                out[a + n + ".bias"] = (rows,)
        out[a + "o_proj.weight"] = (D, o_in)
        if s.o_bias:
            out[a + "o_proj.bias"] = (D,)
        if s.qk_norm == "full":
            out[a + "q_norm.weight"], out[a + "k_norm.weight"] = (H * hd,), (KV * hd,)
        elif s.qk_norm == "head":
            out[a + s.qk_names[0] + ".weight"], out[a + s.qk_names[1] + ".weight"] = (hd,), (hd,)
        if s.norm != "plain":
            for n in s.norm_names:
                out[p + n + ".weight"] = (D,)
        m = p + "mlp."
        if s.mlp == "gated":
            names = (("gate_proj", (I, D)), ("up_proj", (I, D)), ("down_proj", (D, I)))
        elif s.mlp == "fused":
            names = (("gate_up_proj", (2 * I, D)), ("down_proj", (D, I)))
        else:
            names = (("up_proj", (I, D)), ("down_proj", (D, I)))
        for n, shp in names:
            out[m + n + ".weight"] = shp
            if s.mlp_bias:
                out[m + n + ".bias"] = (shp[0],)
        if s.mlp == "xielu":
            out[m + "act_fn.alpha_p"], out[m + "act_fn.alpha_n"] = (1,), (1,)
            out[m + "act_fn.beta"], out[m + "act_fn.eps"] = (), ()
    return out


def expected_weight_shapes(cfg, family):
    """HF checkpoint names and shapes (what from_pretrained loads with nothing missing)."""
    _INIT_FAMILY[0] = family
    return _shapes(_spec(cfg, family))


_INIT_FAMILY = [None]


def weight_init(name, shape):
    """make_case's random-weight scheme where the default does not fit: Gemma's (1 + w) norms near 0 and its
    sqrt(hidden)-scaled embedding; xIELU's alphas (softplus-inverse, around HF's 0.8 init) and its beta / eps
    buffers at HF's values."""
    fam = _INIT_FAMILY[0]
    if fam == "gemma":
        if name == "model.embed_tokens.weight":
            return ("normal", 1.0 / math.sqrt(shape[1]))
        if name.endswith("layernorm.weight") or name == "model.norm.weight":
            return ("uniform", (-0.2, 0.2))
    if name.endswith("act_fn.alpha_p") or name.endswith("act_fn.alpha_n"):
        return ("uniform", (-0.5, 0.8))
    if name.endswith("act_fn.beta"):
        return ("uniform", (0.5, 0.5))
    if name.endswith("act_fn.eps"):
        return ("uniform", (-1e-6, -1e-6))
    return None


class Model(ref.GreedyMixin):
    def __init__(self, cfg, weights, family):
        self.spec = _spec(cfg, family)
        shapes = _shapes(self.spec)
        missing = sorted(set(shapes) - set(weights))
        unexpected = sorted(set(weights) - set(shapes))
        bad = sorted(k for k in set(shapes) & set(weights) if tuple(weights[k].shape) != tuple(shapes[k]))
        if missing or unexpected or bad:
            raise ValueError(f"checkpoint does not match {FAMILIES[family]}: missing {missing[:8]}, "
                             f"unexpected {unexpected[:8]}, bad shapes "
                             f"{[(k, weights[k].shape, shapes[k]) for k in bad[:8]]}")
        self.w = {k: np.asarray(v, dtype=np.float64) for k, v in weights.items()}
        self.router_gaps = []

    def _norm(self, x, name):
        s = self.spec
        if s.norm == "plain":
            return _ln_plain(x)
        w = self.w[name + ".weight"]
        return _rms_1p(x, w, s.eps) if s.norm == "rms1p" else _rms(x, w, s.eps)

    def _mlp(self, h, m):
        s, w = self.spec, self.w
        b = (lambda n: w.get(m + n + ".bias"))
        if s.mlp == "gated":
            g = _lin(h, w[m + "gate_proj.weight"], b("gate_proj"))
            u = _lin(h, w[m + "up_proj.weight"], b("up_proj"))
            return _lin(s.act(g) * u, w[m + "down_proj.weight"], b("down_proj"))
        if s.mlp == "fused":
            gu = _lin(h, w[m + "gate_up_proj.weight"])
            g, u = gu[..., : s.inter], gu[..., s.inter:]
            return _lin(u * s.act(g), w[m + "down_proj.weight"])
        u = _lin(h, w[m + "up_proj.weight"], b("up_proj"))
        if s.mlp == "xielu":
            a = m + "act_fn."
            u = _xielu(u, w[a + "alpha_p"], w[a + "alpha_n"], w[a + "beta"], w[a + "eps"])
        else:
            u = s.act(u)
        return _lin(u, w[m + "down_proj.weight"], b("down_proj"))

    def forward(self, ids, positions=None):
        s, w = self.spec, self.w
        ids, positions = ref.prepare_inputs(ids, positions, s.vocab)
        B, S = ids.shape
        H, KV, hd = s.n_heads, s.n_kv, s.head_dim
        x = w["model.embed_tokens.weight"][ids] * s.embed_scale
        cs = {}
        for i in range(s.n_layers):
            p = f"model.layers.{i}."
            a = p + "self_attn."
            h = x if s.block == "post" else self._norm(x, p + s.norm_names[0])
            q = _lin(h, w[a + "q_proj.weight"], w.get(a + "q_proj.bias"))
            k = _lin(h, w[a + "k_proj.weight"], w.get(a + "k_proj.bias"))
            v = _lin(h, w[a + "v_proj.weight"], w.get(a + "v_proj.bias"))
            if s.clip is not None:
                q, k, v = (np.clip(t, -s.clip, s.clip) for t in (q, k, v))
            if s.qk_norm == "full":
                q, k = _rms(q, w[a + "q_norm.weight"], s.eps), _rms(k, w[a + "k_norm.weight"], s.eps)
            q, k, v = q.reshape(B, S, H, hd), k.reshape(B, S, KV, hd), v.reshape(B, S, KV, hd)
            qn, kn = s.qk_names
            if s.qk_norm == "head" and not s.qk_after_rope:
                q, k = _rms(q, w[a + qn + ".weight"], s.eps), _rms(k, w[a + kn + ".weight"], s.eps)
            rope = s.ropes[i]
            if rope is not None:
                if id(rope) not in cs:
                    cs[id(rope)] = rope.cos_sin(positions)
                cos, sin = cs[id(rope)]
                q, k = _apply_rope(q, cos, sin, s.interleaved), _apply_rope(k, cos, sin, s.interleaved)
            if s.qk_norm == "head" and s.qk_after_rope:
                q, k = _rms(q, w[a + qn + ".weight"], s.eps), _rms(k, w[a + kn + ".weight"], s.eps)
            o = ref.CoreModel._attend(q, k, v, s.scale, s.windows[i], H // KV)
            o = _lin(o, w[a + "o_proj.weight"], w.get(a + "o_proj.bias"))
            if s.block == "post":
                o = self._norm(o, p + s.norm_names[0])
            elif s.block == "sandwich4":
                o = self._norm(o, p + s.norm_names[1])
            x = x + o * s.residual
            if s.block == "post":
                m = self._norm(self._mlp(x, p + "mlp."), p + s.norm_names[1])
            elif s.block == "sandwich4":
                m = self._norm(self._mlp(self._norm(x, p + s.norm_names[2]), p + "mlp."), p + s.norm_names[3])
            else:
                m = self._mlp(self._norm(x, p + s.norm_names[1]), p + "mlp.")
            x = x + m * s.residual
        x = self._norm(x, "model.norm")
        head = w["model.embed_tokens.weight"] if s.tied else w["lm_head.weight"]
        return (x @ head.T) / s.logit_div
