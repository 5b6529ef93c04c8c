"""Plugin families of the numpy reference: Gemma-2, Gemma-3 (text), GPT-J, Phi (1/1.5/2) and the Gated-DeltaNet
hybrids Qwen3.5 (dense), Qwen3.5-MoE and Qwen3-Next.

Written from Hugging Face transformers' modeling/configuration code of each family (modeling_gemma2.py,
configuration_gemma3.py / modeling_gemma3.py, modeling_gptj.py, modular_phi.py / configuration_phi.py,
modeling_qwen3_next.py / configuration_qwen3_next.py, modeling_qwen3_5.py / configuration_qwen3_5.py,
modeling_qwen3_5_moe.py / configuration_qwen3_5_moe.py), NOT from archc's sources. Checkpoint names and shapes
follow the HF hub layout (as in the shared hf-golden fixtures). Everything is computed in float64; the gated delta
rule is run recurrently, token by token (HF's chunked prefill is the same function).

Config options that are not implemented, or that HF would not run / would run ambiguously, raise ValueError.

Covered (HF semantics):
* gemma2 / gemma3: (1 + w) RMSNorms incl. pre/post feed-forward norms on the branch outputs, sqrt(hidden) input
  scale, attention scale query_pre_attn_scalar^-1/2, attention soft-capping before the mask and final-logit
  soft-capping (Gemma2 defaults 50 / 30 when the keys are absent, Gemma3 none), attention_bias, layer_types
  (Gemma2 default: even layers sliding; Gemma3: sliding_window_pattern, default 6), HF sliding mask
  (i - j < window), tied / untied head. Gemma2: one RoPE (standard rope types). Gemma3: per-layer-type RoPE
  (global: rope_theta + legacy rope_scaling; local: rope_local_base_freq, or rope_parameters keyed by layer type),
  per-head (1 + w) q_norm / k_norm before RoPE.
* gptj: parallel attention + MLP on one LayerNorm, interleaved (rotate_every_two) rotary on the first rotary_dim
  dims (rotary_dim null only with one head, as HF's table then spans n_embd), n_inner, lm_head bias, tied weight.
* phi: parallel attention + MLP, LayerNorm, partial_rotary_factor (rotate_half), q/k/v/dense/fc biases, GQA,
  qk_layernorm (per-head LayerNorm before RoPE), lm_head bias, tied weight, standard rope types.
* qwen3_5 / qwen3_5_moe / qwen3_next: Gated DeltaNet (causal depthwise conv + SiLU, l2-normalised q/k, q scaled by
  dk^-1/2, beta = sigmoid(b), g = -exp(A_log) softplus(a + dt_bias), recurrent delta rule per value head with
  repeat_interleave'd key heads, gated RMSNorm w * norm(o) * silu(z)); gated attention (q_proj per head
  [q | gate], (1 + w) q/k norms, partial RoPE, o * sigmoid(gate)); layer_types or full_attention_interval;
  Qwen3-Next grouped in_proj_qkvz / in_proj_ba; Qwen3.5 contiguous in_proj_qkv / z / b / a under
  model.language_model.; MoE softmax top-k (+ renormalisation: always for Qwen3.5-MoE, norm_topk_prob for
  Qwen3-Next) with fused experts.gate_up_proj [E, 2I, D] / down_proj [E, D, I] (Qwen3.5-MoE) or per-expert
  names (Qwen3-Next: decoder_sparse_step, mlp_only_layers, dense layers with intermediate_size) plus the
  sigmoid-gated shared expert; attention_bias; tied head. M-RoPE sections are irrelevant for text positions.
"""
import math

import numpy as np

import hf_reference as ref

FAMILIES = {
    "gemma2": "Gemma2ForCausalLM",
    "gemma3": "Gemma3ForCausalLM",
    "gptj": "GPTJForCausalLM",
    "phi": "PhiForCausalLM",
    "qwen3_5": "Qwen3_5ForCausalLM",
    "qwen3_5_moe": "Qwen3_5MoeForCausalLM",
    "qwen3_next": "Qwen3NextForCausalLM",
}
MODEL_TYPE = {
    "gemma2": "gemma2",
    "gemma3": "gemma3_text",
    "gptj": "gptj",
    "phi": "phi",
    "qwen3_5": "qwen3_5_text",
    "qwen3_5_moe": "qwen3_5_moe_text",
    "qwen3_next": "qwen3_next",
}

# Keys that never change the inference computation.
_HARMLESS = {
    "architectures", "model_type", "bos_token_id", "eos_token_id", "pad_token_id", "torch_dtype", "dtype",
    "transformers_version", "use_cache", "initializer_range", "attention_dropout", "_name_or_path",
    "output_attentions", "output_hidden_states", "return_dict", "max_position_embeddings", "tie_word_embeddings",
    "resid_pdrop", "embd_pdrop", "attn_pdrop", "output_router_logits", "router_aux_loss_coef",
    "cache_implementation",
}
_ROPE_KEYS = {"rope_theta", "rope_scaling", "rope_parameters"}
_GEMMA = {"vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
          "num_key_value_heads", "head_dim", "hidden_activation", "hidden_act", "rms_norm_eps", "attention_bias",
          "query_pre_attn_scalar", "sliding_window", "sliding_window_size", "layer_types",
          "final_logit_softcapping", "attn_logit_softcapping", "use_bidirectional_attention"} | _ROPE_KEYS
_HYBRID = {"vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
           "hidden_act", "rms_norm_eps", "attention_bias", "head_dim", "partial_rotary_factor",
           "linear_conv_kernel_dim", "linear_key_head_dim", "linear_value_head_dim", "linear_num_key_heads",
           "linear_num_value_heads", "layer_types", "full_attention_interval"} | _ROPE_KEYS
_KNOWN = {
    "gemma2": _GEMMA,
    "gemma3": _GEMMA | {"rope_local_base_freq", "sliding_window_pattern"},
    "gptj": {"vocab_size", "n_positions", "n_embd", "n_layer", "n_head", "rotary_dim", "n_inner",
             "activation_function", "layer_norm_epsilon"},
    "phi": {"vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
            "num_key_value_heads", "hidden_act", "layer_norm_eps", "partial_rotary_factor", "qk_layernorm",
            "head_dim"} | _ROPE_KEYS,
    "qwen3_5": _HYBRID | {"intermediate_size", "attn_output_gate", "mamba_ssm_dtype"},
    "qwen3_5_moe": _HYBRID | {"intermediate_size", "attn_output_gate", "mamba_ssm_dtype", "moe_intermediate_size",
                              "shared_expert_intermediate_size", "num_experts_per_tok", "num_experts",
                              "mlp_only_layers", "decoder_sparse_step", "norm_topk_prob"},
    "qwen3_next": _HYBRID | {"intermediate_size", "decoder_sparse_step", "moe_intermediate_size",
                             "shared_expert_intermediate_size", "num_experts_per_tok", "num_experts",
                             "norm_topk_prob", "mlp_only_layers"},
}
# Options a family does not have, accepted only in their "off" state.
_OFF = {"use_sliding_window": (False,), "sliding_window": (None,), "max_window_layers": (None,),
        "use_bidirectional_attention": (None, False), "qk_layernorm": (False,)}

_req = ref._req


def _check_keys(cfg, family):
    if family not in FAMILIES:
        raise ValueError(f"unknown family {family!r}")
    unknown = sorted(k for k in set(cfg) - _HARMLESS - _KNOWN[family]
                     if not (k in _OFF and cfg[k] in _OFF[k]))
    if unknown:
        raise ValueError(f"{family}: config keys not supported by the reference: {unknown}")
    if cfg.get("model_type") != MODEL_TYPE[family]:
        raise ValueError(f"config model_type {cfg.get('model_type')!r} is not {MODEL_TYPE[family]!r} ({family})")
    archs = cfg.get("architectures") or []
    if archs and archs[0] != FAMILIES[family]:
        raise ValueError(f"architectures[0] {archs[0]!r} is not {FAMILIES[family]}")
    for k in ("use_bidirectional_attention",):
        if cfg.get(k):
            raise ValueError(f"{family}: {k} not supported by the reference")


def _pos_int(cfg, key, default=None):
    v = cfg.get(key, default)
    if v is None:
        raise ValueError(f"config key {key!r} is required by the reference")
    if not isinstance(v, int) or isinstance(v, bool) or v < 1:
        raise ValueError(f"config {key}={v!r} must be a positive integer")
    return v


# ---------------------------------------------------------------------------
# elementwise helpers
# ---------------------------------------------------------------------------
def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def _silu(x):
    return x * _sigmoid(x)


def _softplus(x):
    return np.logaddexp(0.0, x)


def _rms_1p(x, w, eps):
    """Gemma / Qwen3-Next / Qwen3.5 RMSNorm: x / rms(x) * (1 + w)."""
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * (1.0 + w)


def _attend(q, k, v, scale, window=None, softcap=None):
    """q [B,S,H,d], k/v [B,S,KV,d] -> [B,S,H*d]; query head h uses kv head h // (H/KV) (HF repeat_kv).
    Causal; sliding window (HF): key j visible to query i iff j <= i and i - j < window. Soft-capping of the
    scaled scores before the mask (Gemma): cap * tanh(s / cap)."""
    B, S, H, _ = q.shape
    rep = H // k.shape[2]
    k = np.repeat(k, rep, axis=2)
    v = np.repeat(v, rep, axis=2)
    s = np.einsum("bqhd,bkhd->bhqk", q, k) * scale
    if softcap is not None:
        s = softcap * np.tanh(s / softcap)
    qi = np.arange(S)[:, None]
    ki = np.arange(S)[None, :]
    vis = ki <= qi
    if window is not None:
        vis &= (qi - ki) < window
    s = np.where(vis[None, None], s, -np.inf)
    p = ref._softmax(s, axis=-1)
    return np.einsum("bhqk,bkhd->bqhd", p, v).reshape(B, S, H * v.shape[-1])


def _lin(x, w, w_all, bias_name=None):
    y = x @ w.T
    if bias_name is not None and bias_name in w_all:
        y = y + w_all[bias_name]
    return y


def _rope(params, head_dim, max_pos, allow_partial):
    """A hf_reference.Rope from a standardised parameter dict {rope_type, rope_theta, [partial_rotary_factor],
    type-specific keys}."""
    params = dict(params)
    prf = float(params.pop("partial_rotary_factor", 1.0))
    if prf != 1.0 and not allow_partial:
        raise ValueError("partial_rotary_factor != 1 not supported for this family")
    if not 0.0 < prf <= 1.0:
        raise ValueError(f"partial_rotary_factor {prf} out of range")
    rp = ref._rope_parameters({"rope_parameters": params, "max_position_embeddings": max_pos}, "llama")
    rp["partial_rotary_factor"] = prf
    rope = ref.Rope(rp, head_dim, max_pos)
    if rope.dim < 2 or rope.dim > head_dim:
        raise ValueError(f"rotary dim {rope.dim} invalid for head_dim {head_dim}")
    return rope


def _legacy_rope_params(cfg, default_theta):
    """transformers-5 standardisation of rope_parameters / rope_scaling + rope_theta (one set for all layers)."""
    rp = cfg.get("rope_parameters")
    rs = cfg.get("rope_scaling")
    if rp is not None and rs is not None:
        raise ValueError("both rope_parameters and rope_scaling given")
    src = dict(rp if rp is not None else (rs or {}))
    if "type" in src and "rope_type" not in src:
        src["rope_type"] = src.pop("type")
    src.setdefault("rope_type", "default")
    theta = cfg.get("rope_theta")
    if "rope_theta" not in src:
        src["rope_theta"] = default_theta if theta is None else theta
    elif theta is not None and float(theta) != float(src["rope_theta"]):
        raise ValueError("rope_theta given twice with different values")
    return src


# ---------------------------------------------------------------------------
# specs
# ---------------------------------------------------------------------------
class _Spec:
    pass


def _spec_gemma(cfg, family):
    s = _Spec()
    s.family = family
    s.hidden = _pos_int(cfg, "hidden_size")
    s.inter = _pos_int(cfg, "intermediate_size")
    s.n_layers = _pos_int(cfg, "num_hidden_layers")
    s.n_heads = _pos_int(cfg, "num_attention_heads")
    s.n_kv = _pos_int(cfg, "num_key_value_heads")
    s.head_dim = _pos_int(cfg, "head_dim")
    s.vocab = _pos_int(cfg, "vocab_size")
    if s.n_heads % s.n_kv:
        raise ValueError("num_attention_heads not divisible by num_key_value_heads")
    if family == "gemma2" and s.hidden % s.n_heads:
        raise ValueError("gemma2: hidden_size not divisible by num_attention_heads (HF validate_architecture)")
    s.eps = float(cfg.get("rms_norm_eps", 1e-6))
    # Gemma2MLP / Gemma3MLP use config.hidden_activation; a differing legacy hidden_act is ambiguous.
    act = cfg.get("hidden_activation") or "gelu_pytorch_tanh"
    if cfg.get("hidden_act") is not None and cfg["hidden_act"] != act:
        raise ValueError(f"hidden_act {cfg['hidden_act']!r} != hidden_activation {act!r}")
    s.act = ref._act(act)
    s.bias = bool(cfg.get("attention_bias", False))
    s.tied = bool(cfg.get("tie_word_embeddings", True))
    s.scale = float(cfg.get("query_pre_attn_scalar", 256)) ** -0.5
    # HF defaults: Gemma2 caps 50 (attention) / 30 (final), Gemma3 none.
    dflt_attn, dflt_final = (50.0, 30.0) if family == "gemma2" else (None, None)
    s.attn_cap = cfg.get("attn_logit_softcapping", dflt_attn)
    s.final_cap = cfg.get("final_logit_softcapping", dflt_final)
    for c in (s.attn_cap, s.final_cap):
        if c is not None and not float(c) > 0:
            raise ValueError(f"soft-capping value {c!r} invalid")
    window = cfg.get("sliding_window", 4096)
    if cfg.get("sliding_window_size") is not None and cfg["sliding_window_size"] != window:
        raise ValueError("sliding_window_size differs from sliding_window")
    types = cfg.get("layer_types")
    if types is None:
        if family == "gemma2":
            pattern = 2
        else:
            pattern = cfg.get("sliding_window_pattern", 6)
            if not isinstance(pattern, int) or pattern < 1:
                raise ValueError(f"sliding_window_pattern {pattern!r} invalid")
        types = ["sliding_attention" if (i + 1) % pattern else "full_attention" for i in range(s.n_layers)]
    elif family == "gemma3" and cfg.get("sliding_window_pattern") is not None:
        pattern = cfg["sliding_window_pattern"]
        implied = ["sliding_attention" if (i + 1) % pattern else "full_attention" for i in range(s.n_layers)]
        if implied != list(types):
            raise ValueError("layer_types and sliding_window_pattern disagree")
    if len(types) != s.n_layers or any(t not in ("sliding_attention", "full_attention") for t in types):
        raise ValueError(f"layer_types {types} invalid for {s.n_layers} layers")
    if "sliding_attention" in types and (not isinstance(window, int) or window < 1):
        raise ValueError(f"sliding_window {window!r} invalid")
    s.types = list(types)
    s.windows = [window if t == "sliding_attention" else None for t in types]
    mpe = cfg.get("max_position_embeddings")
    if family == "gemma2":
        r = _rope(_legacy_rope_params(cfg, 10000.0), s.head_dim, mpe, allow_partial=False)
        s.ropes = {"sliding_attention": r, "full_attention": r}
    else:
        # Gemma3TextConfig.convert_rope_params_to_dict: per-layer-type parameters; legacy rope_scaling applies to
        # the global (full) layers with rope_theta (default 1e6); local layers use rope_local_base_freq (1e4).
        rp = cfg.get("rope_parameters")
        if rp is not None:
            if cfg.get("rope_scaling") is not None:
                raise ValueError("gemma3: both rope_parameters and rope_scaling given")
            if not isinstance(rp, dict) or not set(rp) <= {"sliding_attention", "full_attention"}:
                raise ValueError("gemma3: rope_parameters must be keyed by layer type")
            per = {t: dict(rp.get(t) or {"rope_type": "default"}) for t in ("sliding_attention", "full_attention")}
        else:
            per = {"sliding_attention": {"rope_type": "default"}, "full_attention": {"rope_type": "default"}}
            rs = cfg.get("rope_scaling")
            if rs is not None:
                rs = dict(rs)
                if "type" in rs and "rope_type" not in rs:
                    rs["rope_type"] = rs.pop("type")
                per["full_attention"].update(rs)
        per["full_attention"].setdefault("rope_theta", cfg.get("rope_theta", 1e6) or 1e6)
        per["sliding_attention"].setdefault("rope_theta", cfg.get("rope_local_base_freq", 1e4) or 1e4)
        s.ropes = {t: _rope(p, s.head_dim, mpe, allow_partial=False) for t, p in per.items()}
    return s


def _spec_gptj(cfg):
    s = _Spec()
    s.family = "gptj"
    s.hidden = _pos_int(cfg, "n_embd")
    s.n_layers = _pos_int(cfg, "n_layer")
    s.n_heads = _pos_int(cfg, "n_head")
    s.vocab = _pos_int(cfg, "vocab_size")
    s.n_positions = _pos_int(cfg, "n_positions")
    if cfg.get("max_position_embeddings") is not None and cfg["max_position_embeddings"] != s.n_positions:
        raise ValueError("gptj: max_position_embeddings (alias of n_positions) differs from n_positions")
    if s.hidden % s.n_heads:
        raise ValueError("gptj: n_embd not divisible by n_head")
    s.head_dim = s.hidden // s.n_heads
    s.inner = cfg.get("n_inner") or 4 * s.hidden
    s.act = ref._act(cfg.get("activation_function", "gelu_new"))
    s.eps = float(cfg.get("layer_norm_epsilon", 1e-5))
    s.tied = bool(cfg.get("tie_word_embeddings", False))
    rd = cfg.get("rotary_dim")
    # HF builds the sin/cos table over `rotary_dim or n_embd` and, with rotary_dim None, rotates the whole head:
    # that only broadcasts when n_embd == head_dim (one head).
    s.rot = rd if rd is not None else s.hidden
    if not isinstance(s.rot, int) or s.rot < 2 or s.rot % 2 or s.rot > s.head_dim:
        raise ValueError(f"gptj: rotary_dim {rd!r} invalid for head_dim {s.head_dim} (HF would fail)")
    return s


def _spec_phi(cfg):
    s = _Spec()
    s.family = "phi"
    s.hidden = _pos_int(cfg, "hidden_size")
    s.inter = _pos_int(cfg, "intermediate_size")
    s.n_layers = _pos_int(cfg, "num_hidden_layers")
    s.n_heads = _pos_int(cfg, "num_attention_heads")
    s.n_kv = cfg.get("num_key_value_heads") or s.n_heads
    s.vocab = _pos_int(cfg, "vocab_size")
    if s.hidden % s.n_heads or s.n_heads % s.n_kv:
        raise ValueError("phi: hidden_size / heads / kv heads not divisible")
    s.head_dim = s.hidden // s.n_heads
    if cfg.get("head_dim") is not None and cfg["head_dim"] != s.head_dim:
        raise ValueError("phi: head_dim != hidden_size / num_attention_heads not supported")
    s.act = ref._act(cfg.get("hidden_act", "gelu_new"))
    s.eps = float(cfg.get("layer_norm_eps", 1e-5))
    s.tied = bool(cfg.get("tie_word_embeddings", False))
    s.qk_ln = bool(cfg.get("qk_layernorm", False))
    rp = _legacy_rope_params(cfg, 10000.0)
    prf = cfg.get("partial_rotary_factor", 0.5)
    if "partial_rotary_factor" in rp and cfg.get("partial_rotary_factor") is not None \
            and float(rp["partial_rotary_factor"]) != float(cfg["partial_rotary_factor"]):
        raise ValueError("phi: partial_rotary_factor given twice with different values")
    rp.setdefault("partial_rotary_factor", prf)
    s.rope = _rope(rp, s.head_dim, cfg.get("max_position_embeddings"), allow_partial=True)
    if s.rope.dim != int(s.head_dim * float(rp["partial_rotary_factor"])):
        raise AssertionError("rotary dim")
    return s


def _spec_hybrid(cfg, family):
    s = _Spec()
    s.family = family
    s.prefix = "model.language_model." if family.startswith("qwen3_5") else "model."
    s.hidden = _pos_int(cfg, "hidden_size")
    s.n_layers = _pos_int(cfg, "num_hidden_layers")
    s.n_heads = _pos_int(cfg, "num_attention_heads")
    s.n_kv = _pos_int(cfg, "num_key_value_heads")
    s.head_dim = _pos_int(cfg, "head_dim")
    s.vocab = _pos_int(cfg, "vocab_size")
    if s.n_heads % s.n_kv:
        raise ValueError("num_attention_heads not divisible by num_key_value_heads")
    s.eps = float(cfg.get("rms_norm_eps", 1e-6))
    act = cfg.get("hidden_act", "silu")
    # The torch fallback path HF runs (no causal-conv1d / fla kernels) hard-codes SiLU after the conv and in the
    # gated norm while the fast kernels use hidden_act: anything but SiLU is ambiguous.
    if act not in ("silu", "swish"):
        raise ValueError(f"{family}: hidden_act {act!r} not supported (only silu)")
    s.act = ref._act(act)
    s.bias = bool(cfg.get("attention_bias", False))
    s.tied = bool(cfg.get("tie_word_embeddings", False))
    if family.startswith("qwen3_5") and cfg.get("attn_output_gate", True) is not True:
        raise ValueError(f"{family}: attn_output_gate false not supported (HF always gates)")
    # linear attention
    s.nk = _pos_int(cfg, "linear_num_key_heads")
    s.nv = _pos_int(cfg, "linear_num_value_heads")
    s.dk = _pos_int(cfg, "linear_key_head_dim")
    s.dv = _pos_int(cfg, "linear_value_head_dim")
    s.kconv = _pos_int(cfg, "linear_conv_kernel_dim", 4)
    if s.nv % s.nk:
        raise ValueError("linear_num_value_heads not divisible by linear_num_key_heads")
    s.conv_dim = 2 * s.nk * s.dk + s.nv * s.dv
    types = cfg.get("layer_types")
    if types is None:
        interval = _pos_int(cfg, "full_attention_interval", 4)
        types = ["linear_attention" if (i + 1) % interval else "full_attention" for i in range(s.n_layers)]
    if len(types) != s.n_layers or any(t not in ("linear_attention", "full_attention") for t in types):
        raise ValueError(f"layer_types {types} invalid for {s.n_layers} layers")
    # HF's hybrid cache indexes the first full and the last linear layer: both kinds must exist.
    if "linear_attention" not in types or "full_attention" not in types:
        raise ValueError(f"{family}: layer_types needs both linear_attention and full_attention layers")
    s.types = list(types)
    # rope (partial, default 0.25)
    rp = _legacy_rope_params(cfg, 10000.0)
    if family.startswith("qwen3_5"):
        # M-RoPE: text-only positions are equal on the T/H/W axes, so any section layout equals plain RoPE.
        for k in ("mrope_section", "mrope_interleaved"):
            rp.pop(k, None)
    if cfg.get("partial_rotary_factor") is not None and "partial_rotary_factor" in rp \
            and float(rp["partial_rotary_factor"]) != float(cfg["partial_rotary_factor"]):
        raise ValueError("partial_rotary_factor given twice with different values")
    rp.setdefault("partial_rotary_factor", cfg.get("partial_rotary_factor", 0.25))
    s.rope = _rope(rp, s.head_dim, cfg.get("max_position_embeddings"), allow_partial=True)
    # MLP / MoE per layer: None = dense (intermediate_size), else (E, k, I, norm_topk)
    L = s.n_layers
    if family == "qwen3_5":
        s.inter = _pos_int(cfg, "intermediate_size")
        s.moe = [None] * L
    elif family == "qwen3_5_moe":
        if cfg.get("mlp_only_layers") or cfg.get("decoder_sparse_step", 1) != 1 \
                or cfg.get("norm_topk_prob", True) is not True:
            raise ValueError("qwen3_5_moe: mlp_only_layers / decoder_sparse_step / norm_topk_prob=false do not "
                             "exist in HF Qwen3.5-MoE (every layer is MoE, top-k always renormalised)")
        E, k = _pos_int(cfg, "num_experts"), _pos_int(cfg, "num_experts_per_tok")
        s.moe = [(E, k, _pos_int(cfg, "moe_intermediate_size"), True)] * L
        s.shared_inter = _pos_int(cfg, "shared_expert_intermediate_size")
    else:  # qwen3_next
        E = cfg.get("num_experts", 512)
        step = _pos_int(cfg, "decoder_sparse_step", 1)
        only = cfg.get("mlp_only_layers") or []
        if any(not isinstance(i, int) or not 0 <= i < L for i in only):
            raise ValueError(f"mlp_only_layers {only} invalid")
        s.moe = []
        for i in range(L):
            if i not in only and E > 0 and (i + 1) % step == 0:
                s.moe.append((E, _pos_int(cfg, "num_experts_per_tok"), _pos_int(cfg, "moe_intermediate_size"),
                              bool(cfg.get("norm_topk_prob", True))))
            else:
                s.moe.append(None)
        if None in s.moe:
            s.inter = _pos_int(cfg, "intermediate_size")
        if any(m is not None for m in s.moe):
            s.shared_inter = _pos_int(cfg, "shared_expert_intermediate_size")
    for m in s.moe:
        if m is not None and not 1 <= m[1] <= m[0]:
            raise ValueError("num_experts_per_tok out of range")
    return s


def _spec(cfg, family):
    _check_keys(cfg, family)
    if family in ("gemma2", "gemma3"):
        return _spec_gemma(cfg, family)
    if family == "gptj":
        return _spec_gptj(cfg)
    if family == "phi":
        return _spec_phi(cfg)
    return _spec_hybrid(cfg, family)


# ---------------------------------------------------------------------------
# checkpoint layout
# ---------------------------------------------------------------------------
def _shapes(s):
    w = {}
    f = s.family
    if f in ("gemma2", "gemma3"):
        D, H, KV, hd, I = s.hidden, s.n_heads, s.n_kv, s.head_dim, s.inter
        w["model.embed_tokens.weight"] = (s.vocab, D)
        w["model.norm.weight"] = (D,)
        if not s.tied:
            w["lm_head.weight"] = (s.vocab, D)
        for i in range(s.n_layers):
            p = f"model.layers.{i}."
            for n in ("input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm",
                      "post_feedforward_layernorm"):
                w[p + n + ".weight"] = (D,)
            a = p + "self_attn."
            w[a + "q_proj.weight"] = (H * hd, D)
            w[a + "k_proj.weight"] = (KV * hd, D)
            w[a + "v_proj.weight"] = (KV * hd, D)
            w[a + "o_proj.weight"] = (D, H * hd)
            if s.bias:
                w[a + "q_proj.bias"] = (H * hd,)
                w[a + "k_proj.bias"] = (KV * hd,)
                w[a + "v_proj.bias"] = (KV * hd,)
                w[a + "o_proj.bias"] = (D,)
            if f == "gemma3":
                w[a + "q_norm.weight"] = (hd,)
                w[a + "k_norm.weight"] = (hd,)
            w[p + "mlp.gate_proj.weight"] = (I, D)
            w[p + "mlp.up_proj.weight"] = (I, D)
            w[p + "mlp.down_proj.weight"] = (D, I)
        return w
    if f == "gptj":
        D, I = s.hidden, s.inner
        w["transformer.wte.weight"] = (s.vocab, D)
        w["transformer.ln_f.weight"] = (D,)
        w["transformer.ln_f.bias"] = (D,)
        if not s.tied:
            w["lm_head.weight"] = (s.vocab, D)
        w["lm_head.bias"] = (s.vocab,)
        for i in range(s.n_layers):
            p = f"transformer.h.{i}."
            w[p + "ln_1.weight"] = (D,)
            w[p + "ln_1.bias"] = (D,)
            for n in ("q_proj", "k_proj", "v_proj", "out_proj"):
                w[p + f"attn.{n}.weight"] = (D, D)
            w[p + "mlp.fc_in.weight"] = (I, D)
            w[p + "mlp.fc_in.bias"] = (I,)
            w[p + "mlp.fc_out.weight"] = (D, I)
            w[p + "mlp.fc_out.bias"] = (D,)
        return w
    if f == "phi":
        D, H, KV, hd, I = s.hidden, s.n_heads, s.n_kv, s.head_dim, s.inter
        w["model.embed_tokens.weight"] = (s.vocab, D)
        w["model.final_layernorm.weight"] = (D,)
        w["model.final_layernorm.bias"] = (D,)
        if not s.tied:
            w["lm_head.weight"] = (s.vocab, D)
        w["lm_head.bias"] = (s.vocab,)
        for i in range(s.n_layers):
            p = f"model.layers.{i}."
            w[p + "input_layernorm.weight"] = (D,)
            w[p + "input_layernorm.bias"] = (D,)
            a = p + "self_attn."
            for n, o in (("q_proj", H * hd), ("k_proj", KV * hd), ("v_proj", KV * hd)):
                w[a + n + ".weight"] = (o, D)
                w[a + n + ".bias"] = (o,)
            w[a + "dense.weight"] = (D, H * hd)
            w[a + "dense.bias"] = (D,)
            if s.qk_ln:
                for n in ("q_layernorm", "k_layernorm"):
                    w[a + n + ".weight"] = (hd,)
                    w[a + n + ".bias"] = (hd,)
            w[p + "mlp.fc1.weight"] = (I, D)
            w[p + "mlp.fc1.bias"] = (I,)
            w[p + "mlp.fc2.weight"] = (D, I)
            w[p + "mlp.fc2.bias"] = (D,)
        return w
    # hybrids
    P = s.prefix
    D, H, KV, hd = s.hidden, s.n_heads, s.n_kv, s.head_dim
    Kd, Vd = s.nk * s.dk, s.nv * s.dv
    w[P + "embed_tokens.weight"] = (s.vocab, D)
    w[P + "norm.weight"] = (D,)
    if not s.tied:
        w["lm_head.weight"] = (s.vocab, D)
    for i in range(s.n_layers):
        p = P + f"layers.{i}."
        w[p + "input_layernorm.weight"] = (D,)
        w[p + "post_attention_layernorm.weight"] = (D,)
        if s.types[i] == "linear_attention":
            a = p + "linear_attn."
            if f == "qwen3_next":
                w[a + "in_proj_qkvz.weight"] = (2 * Kd + 2 * Vd, D)
                w[a + "in_proj_ba.weight"] = (2 * s.nv, D)
            else:
                w[a + "in_proj_qkv.weight"] = (2 * Kd + Vd, D)
                w[a + "in_proj_z.weight"] = (Vd, D)
                w[a + "in_proj_b.weight"] = (s.nv, D)
                w[a + "in_proj_a.weight"] = (s.nv, D)
            w[a + "conv1d.weight"] = (s.conv_dim, 1, s.kconv)
            w[a + "dt_bias"] = (s.nv,)
            w[a + "A_log"] = (s.nv,)
            w[a + "norm.weight"] = (s.dv,)
            w[a + "out_proj.weight"] = (D, Vd)
        else:
            a = p + "self_attn."
            w[a + "q_proj.weight"] = (2 * H * hd, D)
            w[a + "k_proj.weight"] = (KV * hd, D)
            w[a + "v_proj.weight"] = (KV * hd, D)
            w[a + "o_proj.weight"] = (D, H * hd)
            if s.bias:
                w[a + "q_proj.bias"] = (2 * H * hd,)
                w[a + "k_proj.bias"] = (KV * hd,)
                w[a + "v_proj.bias"] = (KV * hd,)
                w[a + "o_proj.bias"] = (D,)
            w[a + "q_norm.weight"] = (hd,)
            w[a + "k_norm.weight"] = (hd,)
        m = p + "mlp."
        moe = s.moe[i]
        if moe is None:
            w[m + "gate_proj.weight"] = (s.inter, D)
            w[m + "up_proj.weight"] = (s.inter, D)
            w[m + "down_proj.weight"] = (D, s.inter)
            continue
        E, _, I, _ = moe
        w[m + "gate.weight"] = (E, D)
        if f == "qwen3_5_moe":
            w[m + "experts.gate_up_proj"] = (E, 2 * I, D)
            w[m + "experts.down_proj"] = (E, D, I)
        else:
            for e in range(E):
                w[m + f"experts.{e}.gate_proj.weight"] = (I, D)
                w[m + f"experts.{e}.up_proj.weight"] = (I, D)
                w[m + f"experts.{e}.down_proj.weight"] = (D, I)
        w[m + "shared_expert.gate_proj.weight"] = (s.shared_inter, D)
        w[m + "shared_expert.up_proj.weight"] = (s.shared_inter, D)
        w[m + "shared_expert.down_proj.weight"] = (D, s.shared_inter)
        w[m + "shared_expert_gate.weight"] = (1, D)
    return w


# Checkpoint entries HF ignores on load (_keys_to_ignore_on_load_unexpected).
_IGNORED_PREFIXES = {"qwen3_5": ("mtp.", "model.visual."), "qwen3_5_moe": ("mtp.", "model.visual."),
                     "qwen3_next": ("mtp.",)}

_INIT_FAMILY = [None]   # family of the last expected_weight_shapes call (make_case: shapes, then weight_init)


def expected_weight_shapes(cfg, family):
    """HF checkpoint names and shapes (what from_pretrained loads with nothing missing)."""
    _INIT_FAMILY[0] = family
    return _shapes(_spec(cfg, family))


_ONE_PLUS_W = ("input_layernorm.weight", "post_attention_layernorm.weight", "pre_feedforward_layernorm.weight",
               "post_feedforward_layernorm.weight", "q_norm.weight", "k_norm.weight")


def weight_init(name, shape):
    """Random-weight scheme for make_case: (1 + w) norm weights near 0, plausible decay parameters."""
    fam = _INIT_FAMILY[0]
    if fam in ("gemma2", "gemma3", "phi") and name == "model.embed_tokens.weight":
        # Gemma multiplies by sqrt(hidden) at the input (unit-RMS residual); for tied heads it keeps a token's
        # own embedding from dominating its logits.
        return ("normal", 1.0 / math.sqrt(shape[1]))
    if fam in ("gemma2", "gemma3", "qwen3_5", "qwen3_5_moe", "qwen3_next"):
        if name.endswith(_ONE_PLUS_W) or name in ("model.norm.weight", "model.language_model.norm.weight"):
            return ("uniform", (-0.2, 0.2))          # effective scale 1 + w in [0.8, 1.2]
    if fam in ("qwen3_5", "qwen3_5_moe", "qwen3_next"):
        if name.endswith("linear_attn.norm.weight"):
            return ("norm", None)                    # plain-scale gated norm
        if name.endswith("linear_attn.A_log"):
            return ("uniform", (-1.5, 0.5))          # A = exp(A_log) in [0.22, 1.65]
        if name.endswith("linear_attn.dt_bias"):
            return ("uniform", (0.5, 1.5))
        if name.endswith("conv1d.weight"):
            return ("normal", 1.0 / math.sqrt(shape[-1]))
        if name.endswith(("experts.gate_up_proj", "experts.down_proj")):
            return ("normal", 1.0 / math.sqrt(shape[-1]))   # [E, out, in]
    return None


# ---------------------------------------------------------------------------
# model
# ---------------------------------------------------------------------------
class Model(ref.GreedyMixin):
    def __init__(self, cfg, weights, family):
        self.family = family
        self.spec = _spec(cfg, family)
        shapes = _shapes(self.spec)
        ign = _IGNORED_PREFIXES.get(family, ())
        got = {k: v for k, v in weights.items() if not k.startswith(ign)} if ign else dict(weights)
        missing = sorted(set(shapes) - set(got))
        unexpected = sorted(set(got) - set(shapes))
        bad = sorted(k for k in set(shapes) & set(got) if tuple(got[k].shape) != tuple(shapes[k]))
        if missing or unexpected or bad:
            raise ValueError(f"checkpoint does not match {FAMILIES[family]}: missing {missing[:8]}, "
                             f"unexpected {unexpected[:8]}, bad shapes "
                             f"{[(k, got[k].shape, shapes[k]) for k in bad[:8]]}")
        self.w = {k: np.asarray(v, dtype=np.float64) for k, v in got.items()}
        self.router_gaps = []

    # ---- gemma2 / gemma3 ---------------------------------------------------
    def _forward_gemma(self, ids, positions):
        s, w = self.spec, self.w
        B, S = ids.shape
        H, KV, hd = s.n_heads, s.n_kv, s.head_dim
        x = w["model.embed_tokens.weight"][ids] * math.sqrt(s.hidden)
        cs = {t: r.cos_sin(positions) for t, r in s.ropes.items()}
        for i in range(s.n_layers):
            p = f"model.layers.{i}."
            a = p + "self_attn."
            h = _rms_1p(x, w[p + "input_layernorm.weight"], s.eps)
            q = _lin(h, w[a + "q_proj.weight"], w, a + "q_proj.bias").reshape(B, S, H, hd)
            k = _lin(h, w[a + "k_proj.weight"], w, a + "k_proj.bias").reshape(B, S, KV, hd)
            v = _lin(h, w[a + "v_proj.weight"], w, a + "v_proj.bias").reshape(B, S, KV, hd)
            if s.family == "gemma3":
                q = _rms_1p(q, w[a + "q_norm.weight"], s.eps)
                k = _rms_1p(k, w[a + "k_norm.weight"], s.eps)
            cos, sin = cs[s.types[i]]
            q = ref.Rope.apply(q, cos, sin)
            k = ref.Rope.apply(k, cos, sin)
            o = _attend(q, k, v, s.scale, s.windows[i], s.attn_cap)
            o = _lin(o, w[a + "o_proj.weight"], w, a + "o_proj.bias")
            x = x + _rms_1p(o, w[p + "post_attention_layernorm.weight"], s.eps)
            h = _rms_1p(x, w[p + "pre_feedforward_layernorm.weight"], s.eps)
            m = (s.act(h @ w[p + "mlp.gate_proj.weight"].T) * (h @ w[p + "mlp.up_proj.weight"].T)) \
                @ w[p + "mlp.down_proj.weight"].T
            x = x + _rms_1p(m, w[p + "post_feedforward_layernorm.weight"], s.eps)
        x = _rms_1p(x, w["model.norm.weight"], s.eps)
        logits = x @ (w["model.embed_tokens.weight"] if s.tied else w["lm_head.weight"]).T
        if s.final_cap is not None:
            logits = s.final_cap * np.tanh(logits / s.final_cap)
        return logits

    # ---- gpt-j ---------------------------------------------------------------
    def _forward_gptj(self, ids, positions):
        s, w = self.spec, self.w
        B, S = ids.shape
        if int(np.max(positions)) >= s.n_positions:
            raise ValueError("position beyond n_positions")
        H, hd, r = s.n_heads, s.head_dim, s.rot
        # create_sinusoidal_positions(n_positions, rot): inv_freq = 1 / 10000^(2i / rot); interleaved pairs
        inv = 1.0 / 10000.0 ** (np.arange(0, r, 2, dtype=np.float64) / r)
        ang = positions[..., None].astype(np.float64) * inv                 # [B, S, r/2]
        cos = np.repeat(np.cos(ang), 2, axis=-1)[:, :, None, :]             # repeat_interleave
        sin = np.repeat(np.sin(ang), 2, axis=-1)[:, :, None, :]

        def rot(t):
            tr, tp = t[..., :r], t[..., r:]
            x1, x2 = tr[..., 0::2], tr[..., 1::2]
            every_two = np.stack([-x2, x1], axis=-1).reshape(tr.shape)     # rotate_every_two
            return np.concatenate([tr * cos + every_two * sin, tp], axis=-1)

        x = w["transformer.wte.weight"][ids]
        for i in range(s.n_layers):
            p = f"transformer.h.{i}."
            h = ref._layer_norm(x, w[p + "ln_1.weight"], w[p + "ln_1.bias"], s.eps)
            q = rot((h @ w[p + "attn.q_proj.weight"].T).reshape(B, S, H, hd))
            k = rot((h @ w[p + "attn.k_proj.weight"].T).reshape(B, S, H, hd))
            v = (h @ w[p + "attn.v_proj.weight"].T).reshape(B, S, H, hd)
            o = _attend(q, k, v, 1.0 / math.sqrt(hd))
            attn = o @ w[p + "attn.out_proj.weight"].T
            m = s.act(h @ w[p + "mlp.fc_in.weight"].T + w[p + "mlp.fc_in.bias"])
            m = m @ w[p + "mlp.fc_out.weight"].T + w[p + "mlp.fc_out.bias"]
            x = x + attn + m
        x = ref._layer_norm(x, w["transformer.ln_f.weight"], w["transformer.ln_f.bias"], s.eps)
        head = w["transformer.wte.weight"] if s.tied else w["lm_head.weight"]
        return x @ head.T + w["lm_head.bias"]

    # ---- phi -------------------------------------------------------------------
    def _forward_phi(self, ids, positions):
        s, w = self.spec, self.w
        B, S = ids.shape
        H, KV, hd = s.n_heads, s.n_kv, s.head_dim
        cos, sin = s.rope.cos_sin(positions)
        x = w["model.embed_tokens.weight"][ids]
        for i in range(s.n_layers):
            p = f"model.layers.{i}."
            a = p + "self_attn."
            h = ref._layer_norm(x, w[p + "input_layernorm.weight"], w[p + "input_layernorm.bias"], s.eps)
            q = _lin(h, w[a + "q_proj.weight"], w, a + "q_proj.bias").reshape(B, S, H, hd)
            k = _lin(h, w[a + "k_proj.weight"], w, a + "k_proj.bias").reshape(B, S, KV, hd)
            v = _lin(h, w[a + "v_proj.weight"], w, a + "v_proj.bias").reshape(B, S, KV, hd)
            if s.qk_ln:
                q = ref._layer_norm(q, w[a + "q_layernorm.weight"], w[a + "q_layernorm.bias"], s.eps)
                k = ref._layer_norm(k, w[a + "k_layernorm.weight"], w[a + "k_layernorm.bias"], s.eps)
            q = ref.Rope.apply(q, cos, sin)
            k = ref.Rope.apply(k, cos, sin)
            o = _attend(q, k, v, hd ** -0.5)
            attn = o @ w[a + "dense.weight"].T + w[a + "dense.bias"]
            m = s.act(h @ w[p + "mlp.fc1.weight"].T + w[p + "mlp.fc1.bias"])
            m = m @ w[p + "mlp.fc2.weight"].T + w[p + "mlp.fc2.bias"]
            x = x + attn + m
        x = ref._layer_norm(x, w["model.final_layernorm.weight"], w["model.final_layernorm.bias"], s.eps)
        head = w["model.embed_tokens.weight"] if s.tied else w["lm_head.weight"]
        return x @ head.T + w["lm_head.bias"]

    # ---- hybrids: Gated DeltaNet -------------------------------------------------
    def _gated_deltanet(self, h, a):
        s, w = self.spec, self.w
        B, S, _ = h.shape
        nk, nv, dk, dv = s.nk, s.nv, s.dk, s.dv
        r = nv // nk
        if s.family == "qwen3_next":
            # in_proj_qkvz rows grouped per key head g: [q_g (dk) | k_g (dk) | v_g (r dv) | z_g (r dv)];
            # in_proj_ba rows per key head: [b_g (r) | a_g (r)]; value head index = g * r + j.
            qkvz = (h @ w[a + "in_proj_qkvz.weight"].T).reshape(B, S, nk, 2 * dk + 2 * r * dv)
            q = qkvz[..., :dk]
            k = qkvz[..., dk:2 * dk]
            v = qkvz[..., 2 * dk:2 * dk + r * dv].reshape(B, S, nv, dv)
            z = qkvz[..., 2 * dk + r * dv:].reshape(B, S, nv, dv)
            ba = (h @ w[a + "in_proj_ba.weight"].T).reshape(B, S, nk, 2 * r)
            b = ba[..., :r].reshape(B, S, nv)
            av = ba[..., r:].reshape(B, S, nv)
            mixed = np.concatenate([q.reshape(B, S, nk * dk), k.reshape(B, S, nk * dk),
                                    v.reshape(B, S, nv * dv)], axis=-1)
        else:
            # in_proj_qkv rows contiguous: [q (all key heads) | k (all) | v (all value heads)]
            mixed = h @ w[a + "in_proj_qkv.weight"].T
            z = (h @ w[a + "in_proj_z.weight"].T).reshape(B, S, nv, dv)
            b = h @ w[a + "in_proj_b.weight"].T
            av = h @ w[a + "in_proj_a.weight"].T
        # causal depthwise conv (kernel K, left zero padding K-1, no bias) then SiLU
        cw = w[a + "conv1d.weight"][:, 0, :]                                 # [C, K]
        K = cw.shape[1]
        padded = np.concatenate([np.zeros((B, K - 1, mixed.shape[-1])), mixed], axis=1)
        conv = np.zeros_like(mixed)
        for j in range(K):
            conv += padded[:, j:j + S, :] * cw[:, j]
        mixed = _silu(conv)
        q = mixed[..., :nk * dk].reshape(B, S, nk, dk)
        k = mixed[..., nk * dk:2 * nk * dk].reshape(B, S, nk, dk)
        v = mixed[..., 2 * nk * dk:].reshape(B, S, nv, dv)
        beta = _sigmoid(b)                                                   # [B, S, nv]
        g = -np.exp(w[a + "A_log"]) * _softplus(av + w[a + "dt_bias"])      # log decay <= 0
        # value head i reads key/query head i // r (repeat_interleave)
        q = np.repeat(q, r, axis=2)
        k = np.repeat(k, r, axis=2)
        q = q / np.sqrt(np.sum(q * q, axis=-1, keepdims=True) + 1e-6) * dk ** -0.5
        k = k / np.sqrt(np.sum(k * k, axis=-1, keepdims=True) + 1e-6)
        state = np.zeros((B, nv, dk, dv))
        out = np.zeros((B, S, nv, dv))
        for t in range(S):
            state = state * np.exp(g[:, t])[:, :, None, None]
            kt = k[:, t]
            mem = np.einsum("bhkv,bhk->bhv", state, kt)
            delta = (v[:, t] - mem) * beta[:, t][:, :, None]
            state = state + kt[:, :, :, None] * delta[:, :, None, :]
            out[:, t] = np.einsum("bhkv,bhk->bhv", state, q[:, t])
        # gated RMSNorm per value head: w * norm(o) * silu(z)   (plain w)
        o = out / np.sqrt(np.mean(out * out, axis=-1, keepdims=True) + s.eps) * w[a + "norm.weight"] * _silu(z)
        return o.reshape(B, S, nv * dv) @ w[a + "out_proj.weight"].T

    def _gated_attention(self, h, a, cos, sin):
        s, w = self.spec, self.w
        B, S, _ = h.shape
        H, KV, hd = s.n_heads, s.n_kv, s.head_dim
        qg = _lin(h, w[a + "q_proj.weight"], w, a + "q_proj.bias").reshape(B, S, H, 2 * hd)
        q, gate = qg[..., :hd], qg[..., hd:].reshape(B, S, H * hd)           # per head [q_h | gate_h]
        q = _rms_1p(q, w[a + "q_norm.weight"], s.eps)
        k = _rms_1p(_lin(h, w[a + "k_proj.weight"], w, a + "k_proj.bias").reshape(B, S, KV, hd),
                    w[a + "k_norm.weight"], s.eps)
        v = _lin(h, w[a + "v_proj.weight"], w, a + "v_proj.bias").reshape(B, S, KV, hd)
        q = ref.Rope.apply(q, cos, sin)
        k = ref.Rope.apply(k, cos, sin)
        o = _attend(q, k, v, hd ** -0.5) * _sigmoid(gate)
        return _lin(o, w[a + "o_proj.weight"], w, a + "o_proj.bias")

    def _mlp(self, x, p):
        w = self.w
        return (self.spec.act(x @ w[p + "gate_proj.weight"].T) * (x @ w[p + "up_proj.weight"].T)) \
            @ w[p + "down_proj.weight"].T

    def _moe(self, x, m, moe):
        s, w = self.spec, self.w
        E, k, I, norm = moe
        shp = x.shape
        t = x.reshape(-1, shp[-1])
        probs = ref._softmax(t @ w[m + "gate.weight"].T, axis=-1)
        order = np.argsort(-probs, axis=-1, kind="stable")
        top = order[:, :k]
        topw = np.take_along_axis(probs, top, axis=-1)
        if k < E:
            nxt = np.take_along_axis(probs, order[:, k:k + 1], axis=-1)
            self.router_gaps.extend((topw[:, -1] - nxt[:, 0]).tolist())
        if norm:
            topw = topw / np.sum(topw, axis=-1, keepdims=True)
        out = np.zeros_like(t)
        for e in range(E):
            rows, slot = np.nonzero(top == e)
            if rows.size == 0:
                continue
            xe = t[rows]
            if s.family == "qwen3_5_moe":
                gu = xe @ w[m + "experts.gate_up_proj"][e].T                   # [gate (I) | up (I)]
                y = (s.act(gu[:, :I]) * gu[:, I:]) @ w[m + "experts.down_proj"][e].T
            else:
                y = self._mlp(xe, m + f"experts.{e}.")
            np.add.at(out, rows, y * topw[rows, slot][:, None])
        shared = self._mlp(t, m + "shared_expert.") * _sigmoid(t @ w[m + "shared_expert_gate.weight"].T)
        return (out + shared).reshape(shp)

    def _forward_hybrid(self, ids, positions):
        s, w = self.spec, self.w
        P = s.prefix
        x = w[P + "embed_tokens.weight"][ids]
        cos, sin = s.rope.cos_sin(positions)
        for i in range(s.n_layers):
            p = P + f"layers.{i}."
            h = _rms_1p(x, w[p + "input_layernorm.weight"], s.eps)
            if s.types[i] == "linear_attention":
                x = x + self._gated_deltanet(h, p + "linear_attn.")
            else:
                x = x + self._gated_attention(h, p + "self_attn.", cos, sin)
            h = _rms_1p(x, w[p + "post_attention_layernorm.weight"], s.eps)
            x = x + (self._mlp(h, p + "mlp.") if s.moe[i] is None else self._moe(h, p + "mlp.", s.moe[i]))
        x = _rms_1p(x, w[P + "norm.weight"], s.eps)
        return x @ (w[P + "embed_tokens.weight"] if s.tied else w["lm_head.weight"]).T

    # ---- public ------------------------------------------------------------------
    def forward(self, ids, positions=None):
        """One uncached forward: ids [B, S] -> logits [B, S, V] (float64). No padding; positions 0..S-1."""
        ids, positions = ref.prepare_inputs(ids, positions, self.spec.vocab)
        f = self.family
        if f in ("gemma2", "gemma3"):
            return self._forward_gemma(ids, positions)
        if f == "gptj":
            return self._forward_gptj(ids, positions)
        if f == "phi":
            return self._forward_phi(ids, positions)
        return self._forward_hybrid(ids, positions)
