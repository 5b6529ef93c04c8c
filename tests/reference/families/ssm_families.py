"""Plugin families of the numpy reference: the state-space models Mamba (1), Mamba-2 and the hybrids Jamba, Bamba,
Falcon-H1, Nemotron-H, Granite-4.0 (granitemoehybrid) and LFM2.

Written from Hugging Face transformers' modeling / configuration code of each family (modeling_mamba.py,
modeling_mamba2.py, modular_jamba.py, modeling_bamba.py, modular_falcon_h1.py, modular_nemotron_h.py with the
Zamba2 Mamba-2 mixer it reuses, modular_granitemoehybrid.py with GraniteMoeShared, modular_lfm2.py and the
configuration_*.py files), NOT from archc's sources. Checkpoint names and shapes follow the HF hub layout (as in
the shared hf-golden fixtures). Everything is computed in float64, and every scan runs token by token (the
plain recurrence; HF's chunked SSD prefill computes the same function).

Covered (HF semantics of the torch paths, no padding):
* Mamba-1 mixer (mamba, jamba): in_proj -> [x | z] (use_bias), depthwise causal conv (conv bias) + act, x_proj ->
  [dt_rank | B | C], Jamba's dt/B/C RMSNorms (rms_norm_eps), dt = softplus(dt_proj(.)) (dt_proj has a bias),
  A = -exp(A_log) [I, N], h_t = exp(dt A) h + dt B x, y = h C + D x, y * act(z), out_proj. time_step_rank /
  mamba_dt_rank "auto" = ceil(hidden / 16). Mamba's intermediate_size is the stored value, else expand * hidden.
* Mamba-2 mixer (mamba2, bamba, falcon_h1, nemotron_h, granitemoehybrid): in_proj -> [z | x B C | dt], conv + act
  over x|B|C, dt = softplus(dt + dt_bias) clamped to time_step_limit (Nemotron-H's Zamba2 mixer instead clamps
  from below at time_step_min), A = -exp(A_log) [H], head h reads B/C group h // (H / G)
  (repeat_interleave), h_t = exp(dt A) h + dt x B^T, y = h C + D x. Gated RMSNorm: full width with the gate
  before the norm (mamba2, bamba, granite), per group of intermediate / n_groups with the gate before
  (nemotron_h), Falcon-H1's per-group norm with the gate after (mamba_norm_before_gate) or before, only when
  mamba_rms_norm, else y * silu(z). Falcon-H1: mamba_d_ssm, ssm_in_multiplier on the input, mup vector
  (ssm_multipliers over the z / x / B / C / dt slices), out_proj bias = projectors_bias.
* Attention: q/k/v/o (biases: bamba, falcon_h1, granitemoehybrid, nemotron_h attention_bias), GQA (repeat_kv),
  causal softmax, scale head_dim^-1/2 (Granite: attention_multiplier);
  RoPE (rotate_half) for bamba (transformers 5.3 rotates the full head: BambaConfig's hard-coded
  partial_rotary_factor = 0.5 never reaches the rotary embedding), falcon_h1 (keys times key_multiplier),
  granitemoehybrid (position_embedding_type "rope" only) and lfm2 (per-head q/k RMSNorms before RoPE);
  none for jamba and nemotron_h.
* MLPs / MoE: SwiGLU (jamba, bamba with mlp_bias, lfm2's w1/w3/w2 with the auto-adjusted width, falcon_h1 with
  mlp_multipliers); Nemotron-H non-gated up/down (relu2); Jamba softmax top-k without renormalisation
  (experts on i % expert_layer_period == expert_layer_offset); Nemotron-H sigmoid routing with the
  selection-only correction bias, group-limited (top-2 sum per group), renormalised (+1e-20) and scaled,
  optional latent projections, shared expert; Granite top-k logits then softmax over k, fused input_linear
  [E, 2I, D] (gate rows first) / output_linear [E, D, I] plus shared_mlp, or only shared_mlp with 0 experts.
* Layer patterns: Jamba periods / offsets, Bamba attn_layer_indices, Nemotron-H hybrid_override_pattern or
  layers_block_type, Granite layer_types, LFM2 layer_types or full_attn_idxs. Tied heads per config (never for
  Nemotron-H, whose class ties nothing). Multipliers: Falcon-H1 muP, Granite embedding / residual / logits.

Anything else raises ValueError.
"""
import math

import numpy as np

import hf_reference as ref

FAMILIES = {
    "mamba": "MambaForCausalLM",
    "mamba2": "Mamba2ForCausalLM",
    "jamba": "JambaForCausalLM",
    "bamba": "BambaForCausalLM",
    "falcon_h1": "FalconH1ForCausalLM",
    "nemotron_h": "NemotronHForCausalLM",
    "granitemoehybrid": "GraniteMoeHybridForCausalLM",
    "lfm2": "Lfm2ForCausalLM",
}

_HARMLESS = ref._HARMLESS | {
    "router_aux_loss_coef", "output_router_logits", "num_logits_to_keep", "use_mamba_kernels", "time_step_min",
    "time_step_max", "time_step_floor", "time_step_scale", "time_step_init_scheme", "rescale_prenorm_residual",
    "residual_in_fp32", "use_mambapy", "z_loss_coefficient", "mamba_ssm_cache_dtype", "hidden_dropout",
    "fused_add_norm", "pad_vocab_size_multiple", "n_layer", "attention_dropout", "sliding_window",
    "num_nextn_predict_layers", "mtp_layers_block_type", "moe_shared_expert_overlap", "n_shared_experts",
}
_MAMBA2_KEYS = {"mamba_n_heads", "mamba_d_head", "mamba_n_groups", "mamba_d_state", "mamba_d_conv",
                "mamba_expand", "mamba_chunk_size", "mamba_conv_bias", "mamba_proj_bias", "time_step_limit"}
_ATTN_KEYS = {"hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
              "hidden_act", "rms_norm_eps", "vocab_size", "rope_theta", "rope_scaling", "rope_parameters"}
_KNOWN = {
    "mamba": {"vocab_size", "hidden_size", "state_size", "num_hidden_layers", "layer_norm_epsilon", "expand",
              "intermediate_size", "conv_kernel", "use_bias", "use_conv_bias", "hidden_act", "time_step_rank",
              "rms_norm"},
    "mamba2": {"vocab_size", "hidden_size", "state_size", "num_hidden_layers", "layer_norm_epsilon", "expand",
               "num_heads", "head_dim", "conv_kernel", "n_groups", "use_bias", "use_conv_bias", "hidden_act",
               "time_step_rank", "time_step_limit", "rms_norm", "chunk_size"},
    "jamba": _ATTN_KEYS - {"rope_theta", "rope_scaling", "rope_parameters"} | {
        "num_experts", "num_experts_per_tok", "expert_layer_period", "expert_layer_offset", "attn_layer_period",
        "attn_layer_offset", "mamba_d_state", "mamba_d_conv", "mamba_expand", "mamba_dt_rank", "mamba_conv_bias",
        "mamba_proj_bias"},
    "bamba": _ATTN_KEYS | _MAMBA2_KEYS | {"attn_layer_indices", "head_dim", "partial_rotary_factor",
                                         "attention_bias", "mlp_bias"},
    "falcon_h1": _ATTN_KEYS | _MAMBA2_KEYS | {
        "head_dim", "attention_bias", "mlp_bias", "projectors_bias", "mamba_d_ssm", "mamba_norm_before_gate",
        "mamba_rms_norm", "lm_head_multiplier", "embedding_multiplier", "mlp_multipliers", "key_multiplier",
        "attention_out_multiplier", "attention_in_multiplier", "ssm_multipliers", "ssm_in_multiplier",
        "ssm_out_multiplier"},
    "nemotron_h": {"vocab_size", "hidden_size", "hybrid_override_pattern", "layers_block_type", "layer_types",
                   "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "head_dim",
                   "intermediate_size", "mlp_hidden_act", "mlp_bias", "attention_bias", "layer_norm_epsilon",
                   "ssm_state_size", "mamba_num_heads", "mamba_head_dim", "mamba_hidden_act", "n_groups",
                   "conv_kernel", "expand", "use_conv_bias", "chunk_size", "time_step_limit", "use_bias",
                   "mamba_proj_bias", "n_routed_experts", "moe_intermediate_size",
                   "moe_shared_expert_intermediate_size", "moe_latent_size", "num_experts_per_tok",
                   "routed_scaling_factor", "n_group", "topk_group", "norm_topk_prob", "rope_theta",
                   "time_step_min", "mamba_n_groups", "mamba_d_conv", "mamba_conv_bias", "mamba_chunk_size",
                   "mamba_dt_min"},
    "granitemoehybrid": _ATTN_KEYS | _MAMBA2_KEYS | {
        "attention_bias", "embedding_multiplier", "logits_scaling", "residual_multiplier", "attention_multiplier",
        "num_local_experts", "num_experts_per_tok", "shared_intermediate_size", "position_embedding_type",
        "layer_types", "layers_block_type"},
    "lfm2": {"vocab_size", "hidden_size", "intermediate_size", "block_ff_dim", "num_hidden_layers",
             "num_attention_heads", "num_key_value_heads", "norm_eps", "rope_theta", "theta", "rope_scaling",
             "rope_parameters", "conv_bias", "conv_L_cache", "block_multiple_of", "block_ffn_dim_multiplier",
             "block_auto_adjust_ff_dim", "full_attn_idxs", "layer_types", "tie_embedding", "block_dim"},
}
# The class's default for tie_word_embeddings (PretrainedConfig: True).
_TIE_DEFAULT = {"mamba": True, "mamba2": False, "jamba": False, "bamba": False, "falcon_h1": False,
                "nemotron_h": False, "granitemoehybrid": False, "lfm2": True}

_ACT = dict(ref.ACTIVATIONS)
_ACT["relu2"] = lambda x: np.maximum(x, 0.0) ** 2


def _act(name):
    if name not in _ACT:
        raise ValueError(f"activation {name!r} not supported by the reference")
    return _ACT[name]


def _silu(x):
    return x / (1.0 + np.exp(-x))


def _softplus(x):
    return np.logaddexp(0.0, x)


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def _rms(x, w, eps):
    y = x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps)
    return y if w is None else y * w


def _pos(cfg, key, default=None):
    v = cfg.get(key, default)
    if v is None:
        raise ValueError(f"config key {key!r} is required by the reference")
    if not isinstance(v, int) or isinstance(v, bool) or v < 1:
        raise ValueError(f"config {key}={v!r} must be a positive integer")
    return v


def _check_keys(cfg, family):
    unknown = sorted(set(cfg) - _HARMLESS - _KNOWN[family])
    if unknown:
        raise ValueError(f"{family}: config keys not supported by the reference: {unknown}")
    if cfg.get("model_type") != family:
        raise ValueError(f"config model_type {cfg.get('model_type')!r} is not {family!r}")
    archs = cfg.get("architectures") or []
    if archs and archs[0] != FAMILIES[family]:
        raise ValueError(f"architectures[0] {archs[0]!r} is not {FAMILIES[family]}")


def _rope(cfg, head_dim, theta_default, bamba=False):
    """A hf_reference.Rope from rope_parameters / rope_scaling + rope_theta (full rotary).

    bamba: BambaConfig forces partial_rotary_factor 0.5 into the rope dict (when it has none);
    BambaRotaryEmbedding's default RoPE ignores it (whole heads), the other types rotate that
    fraction (transformers 5.16)."""
    src = cfg.get("rope_parameters") or cfg.get("rope_scaling") or {}
    if cfg.get("rope_parameters") and cfg.get("rope_scaling"):
        raise ValueError("both rope_parameters and rope_scaling given")
    rp = dict(src)
    if "type" in rp and "rope_type" not in rp:
        rp["rope_type"] = rp.pop("type")
    rp.setdefault("rope_type", "default")
    partial = float(rp.pop("partial_rotary_factor", 0.5 if bamba else 1.0))
    if bamba and rp["rope_type"] == "default":
        partial = 1.0
    if partial != 1.0 and not bamba:
        raise ValueError("a partial_rotary_factor inside rope_parameters is not supported (ambiguous across HF "
                         "versions for these families)")
    theta = cfg.get("rope_theta", cfg.get("theta"))
    rp.setdefault("rope_theta", theta_default if theta is None else theta)
    rp = ref._rope_parameters({"rope_parameters": rp, "rope_theta": rp["rope_theta"],
                               "max_position_embeddings": cfg.get("max_position_embeddings")}, "llama")
    if partial != 1.0:
        rp = dict(rp, partial_rotary_factor=partial)
    return ref.Rope(rp, head_dim, cfg.get("max_position_embeddings"))


def _dt_limit(cfg):
    lim = cfg.get("time_step_limit")
    if lim is None:
        return None, None
    if len(lim) != 2:
        raise ValueError(f"time_step_limit {lim!r} must be [min, max]")
    lo, hi = float(lim[0]), float(lim[1])
    return (lo if lo > 0.0 else None), (hi if math.isfinite(hi) else None)


class _M2:
    """The options of one Mamba-2 mixer."""


class _Spec:
    pass


def _mamba2_opts(inner, heads, head_dim, groups, state, kernel, act, chunk, eps, conv_bias, in_bias, out_bias,
                 norm, norm_before_gate=False, dt_lo=None, dt_hi=None, in_mult=1.0, mup=None):
    if inner != heads * head_dim:
        raise ValueError(f"mamba: heads {heads} x head_dim {head_dim} != intermediate {inner}")
    if heads % groups:
        raise ValueError(f"mamba: {heads} heads not divisible by n_groups {groups}")
    _act(act)
    m = _M2()
    m.inner, m.heads, m.head_dim, m.groups, m.state, m.kernel = inner, heads, head_dim, groups, state, kernel
    m.act, m.chunk, m.eps, m.conv_bias, m.in_bias, m.out_bias = act, chunk, eps, conv_bias, in_bias, out_bias
    m.norm, m.norm_before_gate, m.dt_lo, m.dt_hi, m.in_mult, m.mup = norm, norm_before_gate, dt_lo, dt_hi, \
        in_mult, mup
    m.conv_dim = inner + 2 * groups * state
    return m


def _layer_kinds_nemotron(cfg):
    types = cfg.get("layers_block_type")
    if types is None:
        pattern = cfg.get("hybrid_override_pattern")
        chars = {"M": "mamba", "E": "moe", "*": "attention", "-": "mlp"}
        if pattern is None:  # NemotronHConfig's default
            return ["mamba", "moe", "attention", "moe"]
        if any(c not in chars for c in pattern):
            raise ValueError(f"hybrid_override_pattern {pattern!r}: only M, E, *, -")
        return [chars[c] for c in pattern]
    names = {"mamba": "mamba", "linear_attention": "mamba", "moe": "moe", "attention": "attention",
             "full_attention": "attention", "mlp": "mlp"}
    if any(t not in names for t in types):
        raise ValueError(f"layers_block_type {types!r}: unknown type")
    return [names[t] for t in types]


def _spec(cfg, family):
    if family not in FAMILIES:
        raise ValueError(f"unknown family {family!r}")
    _check_keys(cfg, family)
    s = _Spec()
    s.family = family
    s.vocab = _pos(cfg, "vocab_size")
    s.hidden = D = _pos(cfg, "hidden_size")
    s.tied = bool(cfg.get("tie_word_embeddings", _TIE_DEFAULT[family]))
    if family == "lfm2" and "tie_embedding" in cfg:
        s.tied = bool(cfg["tie_embedding"])
    if family == "nemotron_h":
        s.tied = False
    s.kinds = None
    if family in ("mamba", "mamba2"):
        s.n_layers = _pos(cfg, "num_hidden_layers")
        s.eps = float(cfg.get("layer_norm_epsilon", 1e-5))
        if family == "mamba":
            expand = _pos(cfg, "expand", 2)
            s.inner = _pos(cfg, "intermediate_size", expand * D)
            s.state = _pos(cfg, "state_size", 16)
            rank = cfg.get("time_step_rank", "auto")
            s.dt_rank = math.ceil(D / 16) if rank == "auto" else rank
            s.kernel = _pos(cfg, "conv_kernel", 4)
            s.act = cfg.get("hidden_act", "silu")
            _act(s.act)
            s.in_bias = s.out_bias = bool(cfg.get("use_bias", True))
            s.conv_bias = bool(cfg.get("use_conv_bias", True))
            s.dt_norm_eps = None
        else:
            heads, hd = _pos(cfg, "num_heads", 128), _pos(cfg, "head_dim", 64)
            inner = _pos(cfg, "expand", 2) * D
            lo, hi = _dt_limit(cfg)
            bias = bool(cfg.get("use_bias", False))
            s.m2 = _mamba2_opts(inner, heads, hd, _pos(cfg, "n_groups", 8), _pos(cfg, "state_size", 128),
                                _pos(cfg, "conv_kernel", 4), cfg.get("hidden_act", "silu"),
                                _pos(cfg, "chunk_size", 256), s.eps, bool(cfg.get("use_conv_bias", True)), bias,
                                bias, "full", dt_lo=lo, dt_hi=hi)
        return s
    if family == "lfm2":
        s.n_layers = L = _pos(cfg, "num_hidden_layers")
        s.n_heads = _pos(cfg, "num_attention_heads")
        s.n_kv = _pos(cfg, "num_key_value_heads")
        s.head_dim = D // s.n_heads
        s.eps = float(cfg.get("norm_eps", 1e-5))
        s.conv_bias = bool(cfg.get("conv_bias", False))
        s.kernel = _pos(cfg, "conv_L_cache", 3)
        if cfg.get("block_dim") not in (None, D):
            raise ValueError("lfm2: block_dim != hidden_size not supported")
        ff = cfg.get("block_ff_dim", cfg.get("intermediate_size", 12288))
        if cfg.get("block_auto_adjust_ff_dim", True):
            ff = int(2 * ff / 3)
            mult = cfg.get("block_ffn_dim_multiplier", 1.0)
            if mult is not None:
                ff = int(mult * ff)
            m = _pos(cfg, "block_multiple_of", 256)
            ff = m * ((ff + m - 1) // m)
        s.ff = ff
        types = cfg.get("layer_types")
        if types is None:
            idxs = cfg.get("full_attn_idxs")
            idxs = list(range(L)) if idxs is None else idxs
            types = ["full_attention" if i in idxs else "conv" for i in range(L)]
        if len(types) != L or any(t not in ("full_attention", "conv") for t in types):
            raise ValueError(f"lfm2: layer_types {types!r} invalid")
        s.kinds = ["attention" if t == "full_attention" else "conv" for t in types]
        s.rope = _rope(cfg, s.head_dim, 1000000.0)
        s.attn_bias = False
        s.scale = s.head_dim ** -0.5
        return s
    # hybrids with attention
    if family == "nemotron_h":
        s.kinds = _layer_kinds_nemotron(cfg)
        s.n_layers = len(s.kinds)
        s.eps = float(cfg.get("layer_norm_epsilon", 1e-5))
        s.head_dim = _pos(cfg, "head_dim", 128)
    else:
        s.n_layers = _pos(cfg, "num_hidden_layers")
        s.eps = float(cfg.get("rms_norm_eps", 1e-5 if family in ("bamba", "falcon_h1") else 1e-6))
        s.head_dim = cfg.get("head_dim") or D // _pos(cfg, "num_attention_heads")
        if family in ("jamba", "granitemoehybrid") and cfg.get("head_dim") is not None:
            raise ValueError(f"{family}: an explicit head_dim is not read by HF")
    s.n_heads = _pos(cfg, "num_attention_heads", 32)
    # BambaConfig, FalconH1Config, JambaConfig and NemotronHConfig default to 8 key/value heads (None: all heads).
    s.n_kv = cfg.get("num_key_value_heads", 8 if family in ("bamba", "falcon_h1", "jamba", "nemotron_h") else None) or s.n_heads
    if s.n_heads % s.n_kv:
        raise ValueError("num_attention_heads not divisible by num_key_value_heads")
    L = s.n_layers
    s.act = cfg.get("hidden_act", "silu")
    s.inter = cfg.get("intermediate_size")
    s.scale = s.head_dim ** -0.5
    s.rope = None
    s.attn_bias = False
    if family == "jamba":
        ap, ao = _pos(cfg, "attn_layer_period", 8), cfg.get("attn_layer_offset", 4)
        ep, eo = _pos(cfg, "expert_layer_period", 2), cfg.get("expert_layer_offset", 1)
        if ao >= ap or eo >= ep:
            raise ValueError("jamba: layer offset >= layer period")
        s.kinds = ["attention" if i % ap == ao else "mamba" for i in range(L)]
        E = _pos(cfg, "num_experts", 16)
        s.moe = [("jamba", E, _pos(cfg, "num_experts_per_tok", 2)) if E > 1 and i % ep == eo else None
                 for i in range(L)]
        s.inner = _pos(cfg, "mamba_expand", 2) * D
        s.state = _pos(cfg, "mamba_d_state", 16)
        rank = cfg.get("mamba_dt_rank", "auto")
        s.dt_rank = math.ceil(D / 16) if rank == "auto" else rank
        s.kernel = _pos(cfg, "mamba_d_conv", 4)
        s.in_bias = s.out_bias = bool(cfg.get("mamba_proj_bias", False))
        s.conv_bias = bool(cfg.get("mamba_conv_bias", True))
        s.dt_norm_eps = s.eps
        return s
    if family == "nemotron_h":
        # NemotronHConfig.__post_init__: the legacy mamba_* keys, when present, replace the current ones.
        cfg = dict(cfg)
        for old, new in (("mamba_n_groups", "n_groups"), ("mamba_d_conv", "conv_kernel"),
                         ("mamba_conv_bias", "use_conv_bias"), ("mamba_chunk_size", "chunk_size"),
                         ("mamba_dt_min", "time_step_min")):
            if old in cfg:
                cfg[new] = cfg.pop(old)
        if cfg.get("sliding_window") is not None:
            raise ValueError("nemotron_h: sliding_window is not run by the reference")
        s.attn_bias = bool(cfg.get("attention_bias", False))   # NemotronHAttention: q/k/v/o bias=attention_bias
        heads, hd = _pos(cfg, "mamba_num_heads", 128), _pos(cfg, "mamba_head_dim", 64)
        bias = bool(cfg.get("use_bias", False))
        s.m2 = _mamba2_opts(heads * hd, heads, hd, _pos(cfg, "n_groups", 8), _pos(cfg, "ssm_state_size", 128),
                            _pos(cfg, "conv_kernel", 4), cfg.get("mamba_hidden_act", "silu"),
                            _pos(cfg, "chunk_size", 128), s.eps, bool(cfg.get("use_conv_bias", True)), bias, bias,
                            "group", dt_lo=float(cfg.get("time_step_min", 0.001)))
        s.mlp_act = cfg.get("mlp_hidden_act", "relu2")
        _act(s.mlp_act)
        s.mlp_bias = bool(cfg.get("mlp_bias", False))
        s.inter = cfg.get("intermediate_size", 21504)
        E = _pos(cfg, "n_routed_experts", 8)
        s.n_group, s.topk_group = _pos(cfg, "n_group", 1), _pos(cfg, "topk_group", 1)
        if E % s.n_group:
            raise ValueError("nemotron_h: n_routed_experts not divisible by n_group")
        s.nem = dict(E=E, k=_pos(cfg, "num_experts_per_tok", 2), I=_pos(cfg, "moe_intermediate_size", 7688),
                     shared=_pos(cfg, "moe_shared_expert_intermediate_size", 7688),
                     latent=cfg.get("moe_latent_size"), scale=float(cfg.get("routed_scaling_factor", 1.0)),
                     norm=bool(cfg.get("norm_topk_prob", True)))
        return s
    # bamba, falcon_h1, granitemoehybrid: Mamba-2 mixers with mamba_* fields
    heads = _pos(cfg, "mamba_n_heads", 128)
    if family == "falcon_h1":
        d_ssm = cfg.get("mamba_d_ssm", 1024)
        inner = _pos(cfg, "mamba_expand", 2) * D if d_ssm is None else d_ssm
    else:
        inner = _pos(cfg, "mamba_expand", 2) * D
    hd = cfg.get("mamba_d_head", "auto")
    hd = inner // heads if hd == "auto" else hd
    lo, hi = _dt_limit(cfg)
    groups = _pos(cfg, "mamba_n_groups", 1)
    common = (inner, heads, hd, groups, _pos(cfg, "mamba_d_state", 256), _pos(cfg, "mamba_d_conv", 4), s.act,
              _pos(cfg, "mamba_chunk_size", 256), s.eps, bool(cfg.get("mamba_conv_bias", True)),
              bool(cfg.get("mamba_proj_bias", False)))
    if family == "bamba":
        s.m2 = _mamba2_opts(*common, bool(cfg.get("mamba_proj_bias", False)), "full", dt_lo=lo, dt_hi=hi)
        idx = cfg.get("attn_layer_indices") or []
        s.kinds = ["attention" if i in idx else "mamba" for i in range(L)]
        s.rope = _rope(cfg, s.head_dim, 10000.0, bamba=True)
        s.inter = _pos(cfg, "intermediate_size", 14336)
        # BambaConfig fields (transformers 5; 4.x hard-coded both False): q/k/v/o and BambaMLP biases.
        s.attn_bias = bool(cfg.get("attention_bias", False))
        s.mlp_bias = bool(cfg.get("mlp_bias", False))
        return s
    if family == "falcon_h1":
        mult = cfg.get("ssm_multipliers") or [1.0] * 5
        s.m2 = _mamba2_opts(*common, bool(cfg.get("projectors_bias", False)),
                            "group" if cfg.get("mamba_rms_norm", False) else "none",
                            norm_before_gate=bool(cfg.get("mamba_norm_before_gate", True)), dt_lo=lo, dt_hi=hi,
                            in_mult=float(cfg.get("ssm_in_multiplier", 1.0)), mup=[float(v) for v in mult])
        s.kinds = ["hybrid"] * L
        s.rope = _rope(cfg, s.head_dim, 10000.0)
        s.inter = _pos(cfg, "intermediate_size", 14336)
        s.attn_bias = bool(cfg.get("attention_bias", False))
        s.mlp_bias = bool(cfg.get("mlp_bias", False))
        g = {k: float(cfg.get(k, 1.0)) for k in (
            "lm_head_multiplier", "embedding_multiplier", "key_multiplier", "attention_out_multiplier",
            "attention_in_multiplier", "ssm_out_multiplier")}
        s.mult = g
        s.mlp_mult = [float(v) for v in (cfg.get("mlp_multipliers") or [1.0, 1.0])]
        return s
    # granitemoehybrid: GraniteMoeHybridMambaLayer clamps dt to config.time_step_limit as Bamba's mixer does.
    s.m2 = _mamba2_opts(*common, bool(cfg.get("mamba_proj_bias", False)), "full", dt_lo=lo, dt_hi=hi)
    types = cfg.get("layer_types", cfg.get("layers_block_type")) or ["mamba"] * L
    if len(types) != L or any(t not in ("mamba", "attention") for t in types):
        raise ValueError(f"granitemoehybrid: layer_types {types!r} invalid")
    s.kinds = list(types)
    if cfg.get("position_embedding_type") == "rope":
        s.rope = _rope(cfg, s.head_dim, 10000.0)
    s.attn_bias = bool(cfg.get("attention_bias", False))
    s.scale = float(cfg.get("attention_multiplier", 1.0))
    s.inter = _pos(cfg, "intermediate_size", 11008)
    s.E = cfg.get("num_local_experts", 8)
    # With 0 experts the MoE is never built (num_experts_per_tok, 0 in such configs, is not read).
    s.k = _pos(cfg, "num_experts_per_tok", 2) if s.E > 0 else None
    s.shared = _pos(cfg, "shared_intermediate_size", 1024)
    s.gmult = {k: float(cfg.get(k, 1.0)) for k in ("embedding_multiplier", "residual_multiplier",
                                                    "logits_scaling")}
    return s


# ---------------------------------------------------------------------------
# weight names and shapes (HF hub layout)
# ---------------------------------------------------------------------------
def _mamba1_shapes(w, p, D, I, N, R, K, in_bias, conv_bias, dt_norm):
    w[p + "in_proj.weight"] = (2 * I, D)
    if in_bias:
        w[p + "in_proj.bias"] = (2 * I,)
        w[p + "out_proj.bias"] = (D,)
    w[p + "conv1d.weight"] = (I, 1, K)
    if conv_bias:
        w[p + "conv1d.bias"] = (I,)
    w[p + "x_proj.weight"] = (R + 2 * N, I)
    w[p + "dt_proj.weight"] = (I, R)
    w[p + "dt_proj.bias"] = (I,)
    w[p + "A_log"] = (I, N)
    w[p + "D"] = (I,)
    w[p + "out_proj.weight"] = (D, I)
    if dt_norm:
        w[p + "dt_layernorm.weight"] = (R,)
        w[p + "b_layernorm.weight"] = (N,)
        w[p + "c_layernorm.weight"] = (N,)


def _mamba2_shapes(w, p, D, m):
    I, H = m.inner, m.heads
    w[p + "in_proj.weight"] = (I + m.conv_dim + H, D)
    if m.in_bias:
        w[p + "in_proj.bias"] = (I + m.conv_dim + H,)
    w[p + "conv1d.weight"] = (m.conv_dim, 1, m.kernel)
    if m.conv_bias:
        w[p + "conv1d.bias"] = (m.conv_dim,)
    w[p + "dt_bias"] = (H,)
    w[p + "A_log"] = (H,)
    w[p + "D"] = (H,)
    if m.norm != "none":
        w[p + "norm.weight"] = (I,)
    w[p + "out_proj.weight"] = (D, I)
    if m.out_bias:
        w[p + "out_proj.bias"] = (D,)


def _attn_shapes(w, p, s, qk_norm=False, out="o_proj"):
    D, H, KV, hd = s.hidden, s.n_heads, s.n_kv, s.head_dim
    for n, rows in (("q_proj", H * hd), ("k_proj", KV * hd), ("v_proj", KV * hd)):
        w[p + n + ".weight"] = (rows, D)
        if s.attn_bias:
            w[p + n + ".bias"] = (rows,)
    w[p + out + ".weight"] = (D, H * hd)
    if s.attn_bias:
        w[p + out + ".bias"] = (D,)
    if qk_norm:
        w[p + "q_layernorm.weight"] = (hd,)
        w[p + "k_layernorm.weight"] = (hd,)


def _glu_shapes(w, p, D, I, bias=False):
    w[p + "gate_proj.weight"] = (I, D)
    w[p + "up_proj.weight"] = (I, D)
    w[p + "down_proj.weight"] = (D, I)
    if bias:
        w[p + "gate_proj.bias"] = (I,)
        w[p + "up_proj.bias"] = (I,)
        w[p + "down_proj.bias"] = (D,)


def _weight_shapes(s):
    w = {}
    D, V = s.hidden, s.vocab
    f = s.family
    if f in ("mamba", "mamba2", "nemotron_h"):
        w["backbone.embedding.weight" if f == "nemotron_h" else "backbone.embeddings.weight"] = (V, D)
        w["backbone.norm_f.weight"] = (D,)
        for i in range(s.n_layers):
            p = f"backbone.layers.{i}."
            w[p + "norm.weight"] = (D,)
            m = p + "mixer."
            if f == "mamba":
                _mamba1_shapes(w, m, D, s.inner, s.state, s.dt_rank, s.kernel, s.in_bias, s.conv_bias, False)
                continue
            kind = "mamba" if f == "mamba2" else s.kinds[i]
            if kind == "mamba":
                _mamba2_shapes(w, m, D, s.m2)
            elif kind == "attention":
                _attn_shapes(w, m, s)
            elif kind == "mlp":
                w[m + "up_proj.weight"] = (s.inter, D)
                w[m + "down_proj.weight"] = (D, s.inter)
                if s.mlp_bias:
                    w[m + "up_proj.bias"] = (s.inter,)
                    w[m + "down_proj.bias"] = (D,)
            else:
                n = s.nem
                W = n["latent"] or D
                w[m + "gate.weight"] = (n["E"], D)
                w[m + "gate.e_score_correction_bias"] = (n["E"],)
                for e in range(n["E"]):
                    w[m + f"experts.{e}.up_proj.weight"] = (n["I"], W)
                    w[m + f"experts.{e}.down_proj.weight"] = (W, n["I"])
                w[m + "shared_experts.up_proj.weight"] = (n["shared"], D)
                w[m + "shared_experts.down_proj.weight"] = (D, n["shared"])
                if s.mlp_bias:
                    w[m + "shared_experts.up_proj.bias"] = (n["shared"],)
                    w[m + "shared_experts.down_proj.bias"] = (D,)
                    for e in range(n["E"]):
                        w[m + f"experts.{e}.up_proj.bias"] = (n["I"],)
                        w[m + f"experts.{e}.down_proj.bias"] = (W,)
                if n["latent"]:
                    w[m + "fc1_latent_proj.weight"] = (W, D)
                    w[m + "fc2_latent_proj.weight"] = (D, W)
                    if s.mlp_bias:
                        w[m + "fc1_latent_proj.bias"] = (W,)
                        w[m + "fc2_latent_proj.bias"] = (D,)
        if not s.tied:
            w["lm_head.weight"] = (V, D)
        return w
    w["model.embed_tokens.weight"] = (V, D)
    if not s.tied:
        w["lm_head.weight"] = (V, D)
    final = {"lfm2": "model.embedding_norm", "granitemoehybrid": "model.norm"}.get(f, "model.final_layernorm")
    w[final + ".weight"] = (D,)
    for i in range(s.n_layers):
        p = f"model.layers.{i}."
        kind = s.kinds[i]
        if f == "lfm2":
            w[p + "operator_norm.weight"] = (D,)
            w[p + "ffn_norm.weight"] = (D,)
            if kind == "attention":
                _attn_shapes(w, p + "self_attn.", s, qk_norm=True, out="out_proj")
            else:
                c = p + "conv."
                w[c + "in_proj.weight"] = (3 * D, D)
                w[c + "conv.weight"] = (D, 1, s.kernel)
                w[c + "out_proj.weight"] = (D, D)
                if s.conv_bias:
                    w[c + "in_proj.bias"] = (3 * D,)
                    w[c + "conv.bias"] = (D,)
                    w[c + "out_proj.bias"] = (D,)
            for n, shape in (("w1", (s.ff, D)), ("w3", (s.ff, D)), ("w2", (D, s.ff))):
                w[p + f"feed_forward.{n}.weight"] = shape
            continue
        w[p + "input_layernorm.weight"] = (D,)
        if f == "granitemoehybrid":
            w[p + "post_attention_layernorm.weight"] = (D,)
        else:
            w[p + "pre_ff_layernorm.weight"] = (D,)
        if kind in ("attention", "hybrid"):
            _attn_shapes(w, p + "self_attn.", s)
        if kind in ("mamba", "hybrid"):
            if f == "jamba":
                _mamba1_shapes(w, p + "mamba.", D, s.inner, s.state, s.dt_rank, s.kernel, s.in_bias, s.conv_bias,
                               True)
            else:
                _mamba2_shapes(w, p + "mamba.", D, s.m2)
        if f == "jamba":
            moe = s.moe[i]
            if moe is None:
                _glu_shapes(w, p + "feed_forward.", D, s.inter)
            else:
                w[p + "feed_forward.router.weight"] = (moe[1], D)
                for e in range(moe[1]):
                    _glu_shapes(w, p + f"feed_forward.experts.{e}.", D, s.inter)
        elif f in ("bamba", "falcon_h1"):
            _glu_shapes(w, p + "feed_forward.", D, s.inter, s.mlp_bias)
        else:  # granite
            w[p + "shared_mlp.input_linear.weight"] = (2 * s.shared, D)
            w[p + "shared_mlp.output_linear.weight"] = (D, s.shared)
            if s.E > 0:
                m = p + "block_sparse_moe."
                w[m + "router.layer.weight"] = (s.E, D)
                w[m + "input_linear.weight"] = (s.E, 2 * s.inter, D)
                w[m + "output_linear.weight"] = (s.E, D, s.inter)
    return w


def expected_weight_shapes(cfg, family):
    return _weight_shapes(_spec(cfg, family))


def weight_init(name, shape):
    """Scales that keep the recurrences and logits well spread (make_case's defaults cover the rest)."""
    last = name.split(".")[-1]
    if last == "A_log":
        return ("uniform", (0.0, 1.5))          # A = -exp(A_log) in [-4.5, -1]
    if last == "D":
        return ("uniform", (0.5, 1.5))
    if last == "dt_bias" or name.endswith("dt_proj.bias"):
        return ("uniform", (-3.0, -1.0))        # dt = softplus(. + bias) ~ 0.05 .. 0.5
    if last == "e_score_correction_bias":
        return ("normal", 0.1)
    if last == "weight" and len(shape) == 1:
        return ("norm", None)                   # every 1-D weight here is a norm's
    if name.endswith("conv1d.weight") or name.endswith("conv.conv.weight"):
        return ("normal", 1.0 / math.sqrt(shape[2]))
    if len(shape) == 3:                         # stacked experts [E, out, in]
        return ("normal", 1.0 / math.sqrt(shape[2]))
    if name.endswith(("embeddings.weight", "embedding.weight")):
        return ("normal", 0.5)
    if name.endswith(("router.weight", "router.layer.weight")):
        return ("normal", 2.0 / math.sqrt(shape[1]))
    return None


# ---------------------------------------------------------------------------
# forward
# ---------------------------------------------------------------------------
def _lin(x, w, p, bias=None):
    y = x @ w[p + ".weight"].T
    b = w.get(p + ".bias")
    return y if b is None else y + b


def _conv(x, weight, bias):
    """Depthwise causal conv over the sequence: x [B, S, C], weight [C, 1, K] (PyTorch Conv1d with K - 1 left
    padding, first S outputs)."""
    B, S, C = x.shape
    K = weight.shape[2]
    xp = np.concatenate([np.zeros((B, K - 1, C)), x], axis=1)
    y = np.zeros_like(x)
    for k in range(K):
        y = y + xp[:, k:k + S, :] * weight[:, 0, k]
    return y if bias is None else y + bias


def _attend(q, k, v, scale):
    B, S, H, hd = q.shape
    rep = H // k.shape[2]
    k = np.repeat(k, rep, axis=2)
    v = np.repeat(v, rep, axis=2)
    sc = np.einsum("bqhd,bkhd->bhqk", q, k) * scale
    vis = np.arange(S)[None, :] <= np.arange(S)[:, None]
    p = ref._softmax(np.where(vis[None, None], sc, -np.inf), axis=-1)
    return np.einsum("bhqk,bkhd->bqhd", p, v).reshape(B, S, H * hd)


def _topk(scores, k):
    order = np.argsort(-scores, axis=-1, kind="stable")
    gaps = []
    if k < scores.shape[-1]:
        gaps = (np.take_along_axis(scores, order[:, k - 1:k], -1) -
                np.take_along_axis(scores, order[:, k:k + 1], -1))[:, 0].tolist()
    return order[:, :k], gaps


def _combine(t, top, weights, fn, E):
    out = np.zeros((t.shape[0],) + fn(0, t[:1]).shape[1:])
    for e in range(E):
        rows, slot = np.nonzero(top == e)
        if rows.size:
            np.add.at(out, rows, fn(e, t[rows]) * weights[rows, slot][:, None])
    return out


class Model(ref.GreedyMixin):
    def __init__(self, cfg, weights, family):
        self.spec = _spec(cfg, family)
        shapes = _weight_shapes(self.spec)
        missing = sorted(set(shapes) - set(weights))
        unexpected = sorted(set(weights) - set(shapes))
        bad = sorted(k for k in set(shapes) & set(weights) if tuple(weights[k].shape) != tuple(shapes[k]))
        if missing or unexpected or bad:
            raise ValueError(f"checkpoint does not match {FAMILIES[family]}: missing {missing[:8]}, "
                             f"unexpected {unexpected[:8]}, bad shapes {bad[:8]}")
        self.w = {k: np.asarray(v, dtype=np.float64) for k, v in weights.items()}
        self.router_gaps = []

    # ---- mixers ------------------------------------------------------------
    def _mamba1(self, x, p, dt_norm_eps):
        s, w = self.spec, self.w
        I, N, R = s.inner, s.state, s.dt_rank
        act = _act(s.act)
        proj = _lin(x, w, p + "in_proj")
        xs, z = proj[..., :I], proj[..., I:]
        xs = act(_conv(xs, w[p + "conv1d.weight"], w.get(p + "conv1d.bias")))
        ssm = xs @ w[p + "x_proj.weight"].T
        ts, Bm, Cm = ssm[..., :R], ssm[..., R:R + N], ssm[..., R + N:]
        if dt_norm_eps is not None:
            ts = _rms(ts, w[p + "dt_layernorm.weight"], dt_norm_eps)
            Bm = _rms(Bm, w[p + "b_layernorm.weight"], dt_norm_eps)
            Cm = _rms(Cm, w[p + "c_layernorm.weight"], dt_norm_eps)
        dt = _softplus(_lin(ts, w, p + "dt_proj"))
        A = -np.exp(w[p + "A_log"])
        B_, S = x.shape[:2]
        h = np.zeros((B_, I, N))
        ys = []
        for t in range(S):
            h = np.exp(dt[:, t, :, None] * A) * h + (dt[:, t] * xs[:, t])[:, :, None] * Bm[:, t, None, :]
            ys.append(h @ Cm[:, t, :, None])
        y = np.concatenate(ys, axis=-1).transpose(0, 2, 1)
        y = (y + xs * w[p + "D"]) * act(z)
        return _lin(y, w, p + "out_proj")

    def _mamba2(self, x, p, m):
        w = self.w
        I, H, P, G, N = m.inner, m.heads, m.head_dim, m.groups, m.state
        act = _act(m.act)
        proj = _lin(x * m.in_mult, w, p + "in_proj")
        if m.mup is not None:
            GN = G * N
            vec = np.concatenate([np.full(I, m.mup[0]), np.full(I, m.mup[1]), np.full(GN, m.mup[2]),
                                  np.full(GN, m.mup[3]), np.full(H, m.mup[4])])
            proj = proj * vec
        gate, xbc, dt = proj[..., :I], proj[..., I:I + m.conv_dim], proj[..., I + m.conv_dim:]
        xbc = act(_conv(xbc, w[p + "conv1d.weight"], w.get(p + "conv1d.bias")))
        xs, Bm, Cm = xbc[..., :I], xbc[..., I:I + G * N], xbc[..., I + G * N:]
        dt = _softplus(dt + w[p + "dt_bias"])
        if m.dt_lo is not None or m.dt_hi is not None:
            dt = np.clip(dt, m.dt_lo if m.dt_lo is not None else -np.inf, m.dt_hi if m.dt_hi is not None else np.inf)
        A = -np.exp(w[p + "A_log"])
        B_, S = x.shape[:2]
        xh = xs.reshape(B_, S, H, P)
        Bh = np.repeat(Bm.reshape(B_, S, G, N), H // G, axis=2)  # head h -> group h // (H / G)
        Ch = np.repeat(Cm.reshape(B_, S, G, N), H // G, axis=2)
        st = np.zeros((B_, H, P, N))
        ys = []
        for t in range(S):
            st = np.exp(dt[:, t] * A)[:, :, None, None] * st + \
                (dt[:, t, :, None] * xh[:, t])[..., None] * Bh[:, t, :, None, :]
            ys.append(np.einsum("bhpn,bhn->bhp", st, Ch[:, t]))
        y = np.stack(ys, axis=1) + xh * w[p + "D"][:, None]
        y = y.reshape(B_, S, I)
        if m.norm == "none":
            y = y * _silu(gate)
        else:
            nw = w[p + "norm.weight"]
            if not m.norm_before_gate:
                y = y * _silu(gate)
            groups = G if m.norm == "group" else 1
            y = _rms(y.reshape(B_, S, groups, I // groups), None, m.eps).reshape(B_, S, I) * nw
            if m.norm_before_gate:
                y = y * _silu(gate)
        return _lin(y, w, p + "out_proj")

    def _attention(self, x, p, positions, out="o_proj", qk_norm=False, key_mult=1.0):
        s, w = self.spec, self.w
        B_, S = x.shape[:2]
        H, KV, hd = s.n_heads, s.n_kv, s.head_dim
        q = _lin(x, w, p + "q_proj").reshape(B_, S, H, hd)
        k = _lin(x, w, p + "k_proj").reshape(B_, S, KV, hd) * key_mult
        v = _lin(x, w, p + "v_proj").reshape(B_, S, KV, hd)
        if qk_norm:
            q = _rms(q, w[p + "q_layernorm.weight"], s.eps)
            k = _rms(k, w[p + "k_layernorm.weight"], s.eps)
        if s.rope is not None:
            cos, sin = s.rope.cos_sin(positions)
            q = ref.Rope.apply(q, cos, sin)
            k = ref.Rope.apply(k, cos, sin)
        return _lin(_attend(q, k, v, s.scale), w, p + out)

    def _glu(self, x, p, act, gate_mult=1.0):
        w = self.w
        return _lin(act(_lin(x, w, p + "gate_proj") * gate_mult) * _lin(x, w, p + "up_proj"), w, p + "down_proj")

    def _jamba_moe(self, x, p, E, k):
        w, act = self.w, _act(self.spec.act)
        shp = x.shape
        t = x.reshape(-1, shp[-1])
        probs = ref._softmax(t @ w[p + "router.weight"].T, axis=-1)
        top, gaps = _topk(probs, k)
        self.router_gaps += gaps
        wts = np.take_along_axis(probs, top, -1)   # not renormalised
        y = _combine(t, top, wts, lambda e, r: self._glu(r, p + f"experts.{e}.", act), E)
        return y.reshape(shp)

    def _nemotron_moe(self, x, p):
        s, w = self.spec, self.w
        n = s.nem
        act = _act(s.mlp_act)
        shp = x.shape
        t = x.reshape(-1, shp[-1])
        sc = _sigmoid(t @ w[p + "gate.weight"].T)
        choice = sc + w[p + "gate.e_score_correction_bias"]
        E, G = n["E"], s.n_group
        if G > 1:
            grp = np.sort(choice.reshape(-1, G, E // G), axis=-1)[..., -2:].sum(-1)
            gtop, gaps = _topk(grp, s.topk_group)
            self.router_gaps += gaps
            keep = np.zeros_like(grp, dtype=bool)
            np.put_along_axis(keep, gtop, True, -1)
            choice = np.where(np.repeat(keep, E // G, axis=-1), choice, 0.0)
        top, gaps = _topk(choice, n["k"])
        self.router_gaps += gaps
        wts = np.take_along_axis(sc, top, -1)
        if n["norm"]:
            wts = wts / (wts.sum(-1, keepdims=True) + 1e-20)
        wts = wts * n["scale"]

        def mlp(r, q):
            return _lin(act(_lin(r, w, q + "up_proj")), w, q + "down_proj")
        u = _lin(t, w, p + "fc1_latent_proj") if n["latent"] else t
        y = _combine(u, top, wts, lambda e, r: mlp(r, p + f"experts.{e}."), E)
        if n["latent"]:
            y = _lin(y, w, p + "fc2_latent_proj")
        return y.reshape(shp) + mlp(x, p + "shared_experts.")

    def _granite_ffn(self, x, p):
        s, w = self.spec, self.w
        act = _act(s.act)
        S_ = s.shared
        gu = _lin(x, w, p + "shared_mlp.input_linear")
        y = _lin(act(gu[..., :S_]) * gu[..., S_:], w, p + "shared_mlp.output_linear")
        if s.E > 0:
            shp = x.shape
            t = x.reshape(-1, shp[-1])
            m = p + "block_sparse_moe."
            logits = t @ w[m + "router.layer.weight"].T
            top, gaps = _topk(logits, s.k)
            self.router_gaps += gaps
            wts = ref._softmax(np.take_along_axis(logits, top, -1), axis=-1)
            I = s.inter
            wi, wo = w[m + "input_linear.weight"], w[m + "output_linear.weight"]

            def expert(e, r):
                h = r @ wi[e].T
                return (act(h[:, :I]) * h[:, I:]) @ wo[e].T
            y = y + _combine(t, top, wts, expert, s.E).reshape(shp)
        return y

    # ---- models ------------------------------------------------------------
    def forward(self, ids, positions=None):
        s, w = self.spec, self.w
        ids, positions = ref.prepare_inputs(ids, positions, s.vocab)
        f = s.family
        if f in ("mamba", "mamba2", "nemotron_h"):
            emb = w["backbone.embedding.weight" if f == "nemotron_h" else "backbone.embeddings.weight"]
            x = emb[ids]
            for i in range(s.n_layers):
                p = f"backbone.layers.{i}."
                h = _rms(x, w[p + "norm.weight"], s.eps)
                m = p + "mixer."
                kind = {"mamba": "mamba1", "mamba2": "mamba"}.get(f) or s.kinds[i]
                if kind == "mamba1":
                    x = x + self._mamba1(h, m, None)
                elif kind == "mamba":
                    x = x + self._mamba2(h, m, s.m2)
                elif kind == "attention":
                    x = x + self._attention(h, m, positions)
                elif kind == "moe":
                    x = x + self._nemotron_moe(h, m)
                else:
                    x = x + _lin(_act(s.mlp_act)(_lin(h, w, m + "up_proj")), w, m + "down_proj")
            x = _rms(x, w["backbone.norm_f.weight"], s.eps)
            head = emb if s.tied else w["lm_head.weight"]
            return x @ head.T
        emb = w["model.embed_tokens.weight"]
        x = emb[ids]
        if f == "falcon_h1":
            x = x * s.mult["embedding_multiplier"]
        if f == "granitemoehybrid":
            x = x * s.gmult["embedding_multiplier"]
        for i in range(s.n_layers):
            p = f"model.layers.{i}."
            kind = s.kinds[i]
            if f == "lfm2":
                h = _rms(x, w[p + "operator_norm.weight"], s.eps)
                if kind == "attention":
                    x = x + self._attention(h, p + "self_attn.", positions, out="out_proj", qk_norm=True)
                else:
                    c = p + "conv."
                    bcx = _lin(h, w, c + "in_proj")
                    D = s.hidden
                    b, cc, xs = bcx[..., :D], bcx[..., D:2 * D], bcx[..., 2 * D:]
                    y = cc * _conv(b * xs, w[c + "conv.weight"], w.get(c + "conv.bias"))
                    x = x + _lin(y, w, c + "out_proj")
                h = _rms(x, w[p + "ffn_norm.weight"], s.eps)
                ff = p + "feed_forward."
                x = x + _lin(_silu(_lin(h, w, ff + "w1")) * _lin(h, w, ff + "w3"), w, ff + "w2")
                continue
            h = _rms(x, w[p + "input_layernorm.weight"], s.eps)
            if f == "falcon_h1":
                g = s.mult
                mix = self._mamba2(h, p + "mamba.", s.m2) * g["ssm_out_multiplier"]
                att = self._attention(h * g["attention_in_multiplier"], p + "self_attn.", positions,
                                      key_mult=g["key_multiplier"]) * g["attention_out_multiplier"]
                x = x + mix + att
                h = _rms(x, w[p + "pre_ff_layernorm.weight"], s.eps)
                x = x + self._glu(h, p + "feed_forward.", _act(s.act), s.mlp_mult[0]) * s.mlp_mult[1]
                continue
            if kind == "attention":
                y = self._attention(h, p + "self_attn.", positions)
            elif f == "jamba":
                y = self._mamba1(h, p + "mamba.", s.dt_norm_eps)
            else:
                y = self._mamba2(h, p + "mamba.", s.m2)
            if f == "granitemoehybrid":
                r = s.gmult["residual_multiplier"]
                x = x + y * r
                h = _rms(x, w[p + "post_attention_layernorm.weight"], s.eps)
                x = x + self._granite_ffn(h, p) * r
                continue
            x = x + y
            h = _rms(x, w[p + "pre_ff_layernorm.weight"], s.eps)
            if f == "jamba" and s.moe[i] is not None:
                x = x + self._jamba_moe(h, p + "feed_forward.", s.moe[i][1], s.moe[i][2])
            else:
                x = x + self._glu(h, p + "feed_forward.", _act(s.act))
        final = {"lfm2": "model.embedding_norm", "granitemoehybrid": "model.norm"}.get(f, "model.final_layernorm")
        x = _rms(x, w[final + ".weight"], s.eps)
        head = emb if s.tied else w["lm_head.weight"]
        logits = x @ head.T
        if f == "falcon_h1":
            logits = logits * s.mult["lm_head_multiplier"]
        if f == "granitemoehybrid":
            logits = logits / s.gmult["logits_scaling"]
        return logits
