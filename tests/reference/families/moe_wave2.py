"""Plugin families of the numpy reference: the MoE families of issue 9.

qwen2_moe, olmoe, granitemoe, dbrx, ernie4_5_moe, glm4_moe, deepseek_v2, llama4_text. Written from Hugging
Face transformers' modeling and configuration code of each family (modeling_*.py / modular_*.py,
configuration_*.py, masking_utils.py, modeling_rope_utils.py), NOT from archc's sources. Checkpoint names and
shapes follow the HF hub layout (as in the shared hf-golden fixtures). Everything is computed in float64;
positions are 0..S-1 (no padding), so cache positions equal positions.

Decoder: pre-norm (x += attn(norm1(x)); x += mlp(norm2(x))), final norm, LM head.

qwen2_moe    q/k/v biases (qkv_bias), no o bias; sliding window on layer_types' sliding layers (default:
             use_sliding_window and i even and i < max_window_layers); MoE layer iff i not in mlp_only_layers
             and num_experts > 0 and (i + 1) % decoder_sparse_step == 0. Router: softmax, top-k, / sum with
             norm_topk_prob. Shared expert (shared_expert_intermediate_size) times
             sigmoid(shared_expert_gate(x)), always added.
olmoe        q_norm over hidden_size and k_norm over kv_heads * head_dim applied to the projections before
             the head split; clip_qkv clamps q, k, v after the norms; attention_bias on q/k/v/o; every layer
             MoE with intermediate_size experts; softmax, top-k, / sum only with norm_topk_prob.
granitemoe   embedding * embedding_multiplier, residual branches * residual_multiplier, score scale
             attention_multiplier, logits / logits_scaling; every layer MoE: top-k of the router logits,
             softmax over those k; experts input_linear [E, 2I, D] (gate rows, then up), output_linear
             [E, D, I].
dbrx         names transformer.*; LayerNorm without bias (eps 1e-5); Wqkv [q | k | v] clamped to
             [-clip_qkv, clip_qkv]; softmax, top-k, divided by the p-norm (p =
             moe_normalize_expert_weights, none: not divided); experts w1, v1, w2 [E * I, D]:
             silu(x w1_e^T) * (x v1_e^T) @ w2_e.
ernie4_5_moe RoPE on interleaved pairs; use_bias on q/k/v/o, the dense and shared MLPs (not the routed
             experts) and the LM head; MoE layer iff (i + 1) % moe_layer_interval == 0 and start <= i <= end
             (end -1: last layer);
             softmax p, top-k of p + moe_statics bias [1, E], weights p[top] / max(sum, moe_norm_min);
             moe_num_shared_experts shared experts (width moe_intermediate_size * n).
glm4_moe     q/k/v biases (attention_bias), no o bias; optional per-head q/k RMSNorm (use_qk_norm) before
             RoPE; partial rotary (rotate_half on the first head_dim * partial_rotary_factor dims); layers
             >= first_k_dense_replace MoE: sigmoid s, choice = s + e_score_correction_bias, groups ranked
             by the sum of their top-2 choices, topk_group kept (others 0.0), top-k of the choices,
             weights s[top] (/ (sum + 1e-20) with norm_topk_prob) * routed_scaling_factor; shared experts.
deepseek_v2  MLA (q_proj, or q_a_proj + RMSNorm + q_b_proj; kv_a_proj_with_mqa = [latent | k_rope]; latent
             RMSNorms with eps 1e-6; q_proj and q_b_proj without bias, q_a / kv_a / o with attention_bias),
             RoPE on (2i, 2i+1) pairs (complex multiplication), scale qk_head_dim^-1/2 times yarn's
             mscale(factor, mscale_all_dim)^2 when rope scaling is set; layers >= first_k_dense_replace
             MoE: softmax scores; greedy: top-k; group_limited_greedy: groups ranked by their best score,
             topk_group kept (others 0.0), top-k (HF's V2 has no other topk_method, scores with softmax
             whatever scoring_func says and never renormalises: norm_topk_prob is not read);
             weights times routed_scaling_factor; shared experts.
llama4_text  RoPE layers (no_rope_layers[i] = 1, default (i + 1) % no_rope_layer_interval != 0) rotate
             (2i, 2i+1) pairs (llama3 scaling when rope_scaling is set) and, with use_qk_norm, L2-normalise
             q and k per head after RoPE (x / sqrt(mean(x^2) + rms_norm_eps)); layer_types
             chunked_attention (default: the RoPE layers) attend within chunks of attention_chunk_size
             (k // C == q // C); NoPE layers scale q by log(floor((pos + 1) / floor_scale) + 1) *
             attn_scale + 1 when attn_temperature_tuning. MoE layers (moe_layers, default every
             interleave_moe_layer_step-th from step - 1): sigmoid of the top-k router logits multiplies
             each selected expert's input; experts gate_up_proj [E, D, 2I] (x @ W, gate half first),
             down_proj [E, I, D]; a shared expert (intermediate_size) always added; dense layers use
             intermediate_size_mlp.

Anything else raises ValueError.
"""
import math

import numpy as np

import hf_reference as ref

FAMILIES = {
    "qwen2_moe": "Qwen2MoeForCausalLM",
    "olmoe": "OlmoeForCausalLM",
    "granitemoe": "GraniteMoeForCausalLM",
    "dbrx": "DbrxForCausalLM",
    "ernie4_5_moe": "Ernie4_5_MoeForCausalLM",
    "glm4_moe": "Glm4MoeForCausalLM",
    "deepseek_v2": "DeepseekV2ForCausalLM",
    "llama4_text": "Llama4ForCausalLM",
}

_COMMON = {"hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
           "hidden_act", "rms_norm_eps", "vocab_size", "rope_theta", "rope_scaling", "rope_parameters",
           "head_dim", "router_aux_loss_coef", "output_router_logits"}
_KNOWN = {
    "qwen2_moe": _COMMON | {"decoder_sparse_step", "max_window_layers", "mlp_only_layers",
                            "moe_intermediate_size", "norm_topk_prob", "num_experts", "num_experts_per_tok",
                            "shared_expert_intermediate_size", "sliding_window", "use_sliding_window",
                            "qkv_bias", "layer_types"},
    "olmoe": _COMMON | {"attention_bias", "clip_qkv", "norm_topk_prob", "num_experts", "num_experts_per_tok"},
    "granitemoe": _COMMON | {"attention_bias", "attention_multiplier", "embedding_multiplier", "logits_scaling",
                             "residual_multiplier", "num_local_experts", "num_experts_per_tok"},
    "dbrx": {"d_model", "n_heads", "n_layers", "max_seq_len", "vocab_size", "resid_pdrop", "emb_pdrop",
             "attn_config", "ffn_config", "output_router_logits", "rope_theta", "rope_scaling", "rope_parameters",
             "partial_rotary_factor"},
    "ernie4_5_moe": _COMMON | {"use_bias", "moe_intermediate_size", "moe_k", "moe_num_experts",
                               "moe_num_shared_experts", "moe_layer_start_index", "moe_layer_end_index",
                               "moe_layer_interval", "moe_norm_min"},
    "glm4_moe": _COMMON | {"attention_bias", "first_k_dense_replace", "moe_intermediate_size", "n_group",
                           "n_routed_experts", "n_shared_experts", "norm_topk_prob", "num_experts_per_tok",
                           "partial_rotary_factor", "routed_scaling_factor", "topk_group", "use_qk_norm"},
    "deepseek_v2": _COMMON | {"attention_bias", "first_k_dense_replace", "kv_lora_rank", "q_lora_rank",
                              "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim", "moe_intermediate_size",
                              "n_group", "n_routed_experts", "n_shared_experts", "norm_topk_prob",
                              "num_experts_per_tok", "routed_scaling_factor", "topk_group", "topk_method",
                              "scoring_func", "aux_loss_alpha", "seq_aux", "mlp_bias"},
    "llama4_text": _COMMON | {"attention_bias", "attention_chunk_size", "attn_scale", "attn_temperature_tuning",
                              "floor_scale", "interleave_moe_layer_step", "intermediate_size_mlp",
                              "moe_layers", "no_rope_layers", "no_rope_layer_interval", "num_experts_per_tok",
                              "num_local_experts", "router_jitter_noise", "use_qk_norm", "layer_types",
                              "cache_implementation"},
}


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def _pos(v, what):
    if not isinstance(v, int) or isinstance(v, bool) or v < 1:
        raise ValueError(f"{what} = {v!r} must be a positive integer")
    return v


def _topk(scores, k):
    """Indices of the k largest per row (stable) and the k-th minus (k+1)-th gaps."""
    order = np.argsort(-scores, axis=-1, kind="stable")
    top = order[:, :k]
    gaps = None
    if k < scores.shape[-1]:
        kth = np.take_along_axis(scores, order[:, k - 1:k], axis=-1)[:, 0]
        nxt = np.take_along_axis(scores, order[:, k:k + 1], axis=-1)[:, 0]
        gaps = (kth - nxt).tolist()
    return top, gaps


class _Spec:
    pass


# ---------------------------------------------------------------------------
# config -> spec
# ---------------------------------------------------------------------------
def _rope(cfg, family, head_dim, allowed=("default", "linear", "llama3", "yarn")):
    if cfg.get("rope_scaling") and cfg.get("rope_parameters"):
        raise ValueError(f"{family}: both rope_scaling and rope_parameters given")
    rp = dict(cfg.get("rope_scaling") or cfg.get("rope_parameters") or {})
    rp.setdefault("rope_theta", ref._req(cfg, "rope_theta"))
    rtype = rp.get("rope_type", rp.get("type", "default"))
    rp["rope_type"] = rtype
    if rtype not in allowed:
        raise ValueError(f"{family}: rope_type {rtype!r} not supported (only {allowed})")
    if rtype in ("llama3", "yarn"):
        rp.setdefault("original_max_position_embeddings", ref._req(cfg, "max_position_embeddings"))
    keys = {"default": set(), "linear": {"factor"},
            "llama3": {"factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"},
            "yarn": {"factor", "original_max_position_embeddings", "attention_factor", "beta_fast", "beta_slow",
                     "mscale", "mscale_all_dim", "truncate"}}[rtype]
    extra = sorted(set(rp) - keys - {"rope_type", "type", "rope_theta", "partial_rotary_factor"})
    if extra:
        raise ValueError(f"{family}: rope keys not supported by the reference: {extra}")
    return ref.Rope(rp, head_dim, cfg.get("max_position_embeddings")), rp


def _spec(cfg, family):
    if family not in FAMILIES:
        raise ValueError(f"unknown family {family!r}")
    unknown = sorted(set(cfg) - ref._HARMLESS - _KNOWN[family])
    if unknown:
        raise ValueError(f"{family}: config keys not supported by the reference: {unknown}")
    if cfg.get("model_type") != family:
        raise ValueError(f"config model_type {cfg.get('model_type')!r} does not match family {family!r}")
    archs = cfg.get("architectures") or []
    if archs and archs[0] != FAMILIES[family]:
        raise ValueError(f"architectures[0] {archs[0]!r} is not {FAMILIES[family]}")
    s = _Spec()
    s.family = family
    s.tied = bool(cfg.get("tie_word_embeddings", family == "ernie4_5_moe"))
    s.embed, s.layers, s.final, s.head = "model.embed_tokens", "model.layers", "model.norm", "lm_head"
    s.n1, s.n2, s.attn_at, s.mlp_at = "input_layernorm", "post_attention_layernorm", "self_attn", "mlp"
    s.layer_norm = False
    s.embed_mult = s.residual_mult = 1.0
    s.logit_div = 1.0
    s.head_bias = False
    s.attn = "mha"
    s.qkv_bias = s.o_bias = False
    s.fused = None
    s.clip, s.clip_after_norm = None, False
    s.qk_norm = None          # None | "head" | "full" | "l2"
    s.scale = None
    s.mlp_bias = False
    s.expert_bias = None      # routed experts' biases (None: as mlp_bias)
    s.shared, s.shared_gate = 0, False
    s.shared_at = "shared_experts"
    if family == "dbrx":
        _dbrx(s, cfg)
    else:
        s.vocab = _pos(ref._req(cfg, "vocab_size"), "vocab_size")
        s.hidden = _pos(ref._req(cfg, "hidden_size"), "hidden_size")
        s.n_layers = _pos(ref._req(cfg, "num_hidden_layers"), "num_hidden_layers")
        s.n_heads = _pos(ref._req(cfg, "num_attention_heads"), "num_attention_heads")
        s.n_kv = cfg.get("num_key_value_heads") or s.n_heads
        s.eps = float(ref._req(cfg, "rms_norm_eps"))
        s.act = cfg.get("hidden_act", "silu")
        s.head_dim = cfg.get("head_dim") or s.hidden // s.n_heads
        {"qwen2_moe": _qwen2_moe, "olmoe": _olmoe, "granitemoe": _granitemoe, "ernie4_5_moe": _ernie,
         "glm4_moe": _glm4_moe, "deepseek_v2": _deepseek_v2, "llama4_text": _llama4}[family](s, cfg)
    ref._act(s.act)
    if s.attn == "mha" and s.n_heads % s.n_kv:
        raise ValueError("num_attention_heads not divisible by num_key_value_heads")
    return s


def _rope_layers(s, rope, interleaved=False):
    s.rope = rope
    s.interleaved = interleaved
    s.use_rope = [True] * s.n_layers
    s.windows = [None] * s.n_layers
    s.chunks = [None] * s.n_layers
    s.temperature = [False] * s.n_layers


def _qwen2_moe(s, cfg):
    s.qkv_bias = bool(cfg.get("qkv_bias", True))
    s.inter = ref._req(cfg, "intermediate_size")
    s.moe_inter = ref._req(cfg, "moe_intermediate_size")
    s.n_experts = ref._req(cfg, "num_experts")
    s.top_k = ref._req(cfg, "num_experts_per_tok")
    s.norm_topk = bool(cfg.get("norm_topk_prob", False))
    step = cfg.get("decoder_sparse_step", 1)
    only = cfg.get("mlp_only_layers") or []
    s.sparse = [i not in only and s.n_experts > 0 and (i + 1) % step == 0 for i in range(s.n_layers)]
    s.shared, s.shared_gate, s.shared_at = ref._req(cfg, "shared_expert_intermediate_size"), True, "shared_expert"
    s.router = "softmax"
    _rope_layers(s, _rope(cfg, "qwen2_moe", s.head_dim)[0])
    use_sw = bool(cfg.get("use_sliding_window", False))
    types = cfg.get("layer_types")
    if types is None:
        types = ["sliding_attention" if use_sw and (i + 1) % 2 == 1 and i < cfg.get("max_window_layers", 28)
                 else "full_attention" for i in range(s.n_layers)]
    if "sliding_attention" in types:
        if not use_sw:
            raise ValueError("qwen2_moe: sliding layers without use_sliding_window (HF uses window 0)")
        s.windows = [_pos(cfg.get("sliding_window", 4096), "sliding_window") if t == "sliding_attention" else None
                     for t in types]


def _olmoe(s, cfg):
    s.qkv_bias = s.o_bias = bool(cfg.get("attention_bias", False))
    if s.head_dim * s.n_heads != s.hidden:
        raise ValueError("olmoe: heads * head_dim must equal hidden_size")
    s.qk_norm = "full"
    s.clip, s.clip_after_norm = cfg.get("clip_qkv"), True
    s.moe_inter = ref._req(cfg, "intermediate_size")
    s.n_experts = ref._req(cfg, "num_experts")
    s.top_k = ref._req(cfg, "num_experts_per_tok")
    s.norm_topk = bool(cfg.get("norm_topk_prob", False))
    s.sparse = [True] * s.n_layers
    s.router = "softmax"
    _rope_layers(s, _rope(cfg, "olmoe", s.head_dim)[0])


def _granitemoe(s, cfg):
    s.qkv_bias = s.o_bias = bool(cfg.get("attention_bias", False))
    s.embed_mult = float(cfg.get("embedding_multiplier", 1.0))
    s.residual_mult = float(cfg.get("residual_multiplier", 1.0))
    s.logit_div = float(cfg.get("logits_scaling", 1.0))
    s.scale = float(cfg.get("attention_multiplier", 1.0))
    s.moe_inter = ref._req(cfg, "intermediate_size")
    s.n_experts = ref._req(cfg, "num_local_experts")
    s.top_k = ref._req(cfg, "num_experts_per_tok")
    s.sparse = [True] * s.n_layers
    s.router = "topk_softmax"
    s.mlp_at = "block_sparse_moe"
    _rope_layers(s, _rope(cfg, "granitemoe", s.head_dim)[0])


def _dbrx(s, cfg):
    s.vocab = _pos(ref._req(cfg, "vocab_size"), "vocab_size")
    s.hidden = _pos(ref._req(cfg, "d_model"), "d_model")
    s.n_layers = _pos(ref._req(cfg, "n_layers"), "n_layers")
    s.n_heads = _pos(ref._req(cfg, "n_heads"), "n_heads")
    if s.tied:
        raise ValueError("dbrx: tie_word_embeddings not supported (HF raises)")
    ac, fc = dict(cfg.get("attn_config") or {}), dict(cfg.get("ffn_config") or {})
    bad = sorted(set(ac) - {"attn_pdrop", "clip_qkv", "kv_n_heads", "rope_theta", "model_type"})
    bad += sorted(set(fc) - {"ffn_act_fn", "ffn_hidden_size", "moe_num_experts", "moe_top_k", "moe_jitter_eps",
                            "moe_loss_weight", "moe_normalize_expert_weights", "model_type"})
    if bad:
        raise ValueError(f"dbrx: attn_config/ffn_config keys not supported: {bad}")
    s.n_kv = ac.get("kv_n_heads", 1)
    s.head_dim = s.hidden // s.n_heads
    s.clip = ac.get("clip_qkv")
    s.fused = "Wqkv"
    s.act = (fc.get("ffn_act_fn") or {"name": "silu"}).get("name", "silu")
    s.moe_inter = fc.get("ffn_hidden_size", 3584)
    s.n_experts = fc.get("moe_num_experts", 4)
    s.top_k = fc.get("moe_top_k", 1)
    s.norm_p = fc.get("moe_normalize_expert_weights", 1.0)
    s.sparse = [True] * s.n_layers
    s.router = "dbrx"
    s.layer_norm = True
    s.eps = 1e-5
    s.embed, s.layers, s.final = "transformer.wte", "transformer.blocks", "transformer.norm_f"
    s.n1, s.n2, s.attn_at, s.mlp_at = "norm_attn_norm.norm_1", "norm_attn_norm.norm_2", "norm_attn_norm.attn", "ffn"
    # DbrxRotaryEmbedding is LlamaRotaryEmbedding over the v5 standardised rope_parameters (rope_scaling
    # if truthy, else rope_parameters; rope_theta setdefault'ed from the top-level key; a top-level
    # partial_rotary_factor written into the dict). Without any theta transformers 5 uses
    # default_theta 10000 where the released models (and transformers 4) use attn_config.rope_theta:
    # the reference takes the latter, as the fixtures do. The default RoPE rotates whole heads whatever
    # partial_rotary_factor says; a scaled type sizes cos/sin by it and fails in apply_rotary_pos_emb.
    rp = dict(cfg.get("rope_scaling") or cfg.get("rope_parameters") or {})
    if "rope_theta" not in rp:
        rp["rope_theta"] = cfg["rope_theta"] if cfg.get("rope_theta") is not None else ac.get("rope_theta", 10000.0)
    if cfg.get("partial_rotary_factor") is not None:
        rp["partial_rotary_factor"] = cfg["partial_rotary_factor"]
    rtype = rp.get("rope_type", rp.get("type", "default"))
    if rtype == "default":
        rp.pop("partial_rotary_factor", None)
    elif float(rp.get("partial_rotary_factor", 1.0)) != 1.0:
        raise ValueError("dbrx: partial_rotary_factor with a scaled RoPE fails in HF (cos/sin narrower than q)")
    cfg2 = {"rope_parameters": rp, "rope_theta": rp["rope_theta"], "max_position_embeddings": cfg.get("max_seq_len", 2048)}
    _rope_layers(s, _rope(cfg2, "dbrx", s.head_dim)[0])


def _expert_bias(s):
    return s.mlp_bias if s.expert_bias is None else s.expert_bias


def _ernie(s, cfg):
    b = bool(cfg.get("use_bias", False))
    s.qkv_bias = s.o_bias = s.mlp_bias = s.head_bias = b
    s.expert_bias = False     # HF's fused routed experts (gate_up_proj / down_proj) have no bias
    s.inter = ref._req(cfg, "intermediate_size")
    s.moe_inter = ref._req(cfg, "moe_intermediate_size")
    s.n_experts = ref._req(cfg, "moe_num_experts")
    s.top_k = ref._req(cfg, "moe_k")
    s.norm_min = float(cfg.get("moe_norm_min", 1e-12))
    start, end = cfg.get("moe_layer_start_index", 1), cfg.get("moe_layer_end_index", -1)
    end = s.n_layers - 1 if end == -1 else end
    iv = _pos(cfg.get("moe_layer_interval", 1), "moe_layer_interval")
    s.sparse = [(i + 1) % iv == 0 and start <= i <= end for i in range(s.n_layers)]
    s.shared = s.moe_inter * cfg.get("moe_num_shared_experts", 2)
    s.router = "ernie"
    _rope_layers(s, _rope(cfg, "ernie4_5_moe", s.head_dim)[0], interleaved=True)


def _glm4_moe(s, cfg):
    s.qkv_bias = bool(cfg.get("attention_bias", False))
    s.qk_norm = "head" if cfg.get("use_qk_norm", False) else None
    s.inter = ref._req(cfg, "intermediate_size")
    s.moe_inter = ref._req(cfg, "moe_intermediate_size")
    s.n_experts = ref._req(cfg, "n_routed_experts")
    s.top_k = ref._req(cfg, "num_experts_per_tok")
    s.norm_topk = bool(cfg.get("norm_topk_prob", True))
    s.n_group, s.topk_group = cfg.get("n_group", 1), cfg.get("topk_group", 1)
    s.scaling = float(cfg.get("routed_scaling_factor", 1.0))
    first = cfg.get("first_k_dense_replace", 1)
    s.sparse = [i >= first for i in range(s.n_layers)]
    s.shared = s.moe_inter * cfg.get("n_shared_experts", 1)
    s.router = "noaux"
    s.scoring = "sigmoid"
    rp_cfg = dict(cfg)
    rope, rp = _rope(rp_cfg, "glm4_moe", s.head_dim)
    prf = cfg.get("partial_rotary_factor", rp.get("partial_rotary_factor", 0.5))
    rp["partial_rotary_factor"] = prf
    _rope_layers(s, ref.Rope(rp, s.head_dim, cfg.get("max_position_embeddings")))


def _deepseek_v2(s, cfg):
    s.attn = "mla"
    if s.n_kv != s.n_heads:
        raise ValueError("deepseek_v2: num_key_value_heads != num_attention_heads")
    # DeepseekV2MLP is LlamaMLP (bias=mlp_bias) for the dense layers and the shared experts; the routed
    # experts (Qwen2MoeExperts' stacked gate_up_proj / down_proj) have no bias.
    s.mlp_bias = bool(cfg.get("mlp_bias", False))
    s.expert_bias = False
    s.q_lora = cfg.get("q_lora_rank", 1536)
    s.kv_lora = ref._req(cfg, "kv_lora_rank")
    s.nope, s.rdim, s.vdim = (ref._req(cfg, k) for k in ("qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"))
    if cfg.get("head_dim") is not None and cfg["head_dim"] != s.rdim:
        raise ValueError("deepseek_v2: head_dim must equal qk_rope_head_dim")
    s.bias = bool(cfg.get("attention_bias", False))
    s.inter = ref._req(cfg, "intermediate_size")
    s.moe_inter = ref._req(cfg, "moe_intermediate_size")
    s.n_experts = ref._req(cfg, "n_routed_experts")
    s.top_k = ref._req(cfg, "num_experts_per_tok")
    # HF's DeepseekV2TopkRouter: softmax scores (scoring_func is not read), greedy or
    # group_limited_greedy (any other topk_method leaves its weights unset), never renormalised
    # (norm_topk_prob is not read).
    s.norm_topk = False
    s.scaling = float(cfg.get("routed_scaling_factor", 1.0))
    s.method = cfg.get("topk_method", "greedy")
    s.scoring = "softmax"
    if s.method not in ("greedy", "group_limited_greedy"):
        raise ValueError(f"deepseek_v2: topk_method {s.method!r} not supported by HF's DeepSeek-V2")
    s.n_group, s.topk_group = cfg.get("n_group") or 1, cfg.get("topk_group") or 1
    first = cfg.get("first_k_dense_replace", 0)
    s.sparse = [i >= first for i in range(s.n_layers)]
    s.shared = s.moe_inter * cfg["n_shared_experts"] if cfg.get("n_shared_experts") else 0
    s.router = "deepseek_v2"
    rope, rp = _rope(cfg, "deepseek_v2", s.rdim, ("default", "yarn"))
    _rope_layers(s, rope, interleaved=True)
    s.scale = (s.nope + s.rdim) ** -0.5
    if rp["rope_type"] == "yarn" and rp.get("mscale_all_dim"):
        f = float(rp["factor"])
        m = 1.0 if f <= 1 else 0.1 * float(rp["mscale_all_dim"]) * math.log(f) + 1.0
        s.scale *= m * m


def _llama4(s, cfg):
    s.head_dim = cfg.get("head_dim") or s.hidden // s.n_heads
    s.qkv_bias = s.o_bias = bool(cfg.get("attention_bias", False))   # q/k/v/o_proj bias=config.attention_bias
    s.inter = ref._req(cfg, "intermediate_size_mlp")
    s.moe_inter = ref._req(cfg, "intermediate_size")
    s.n_experts = ref._req(cfg, "num_local_experts")
    s.top_k = cfg.get("num_experts_per_tok", 1)
    L = s.n_layers
    step = cfg.get("interleave_moe_layer_step", 1)
    moe_layers = cfg.get("moe_layers")
    if moe_layers is None:
        moe_layers = list(range(step - 1, L, step))
    s.sparse = [i in moe_layers for i in range(L)]
    s.shared, s.shared_at = s.moe_inter, "shared_expert"
    s.router = "llama4"
    s.mlp_at = "feed_forward"
    rs = cfg.get("rope_scaling")
    if rs is not None and rs.get("rope_type", rs.get("type")) != "llama3":
        raise ValueError("llama4_text: rope_scaling must be llama3 (HF forces it)")
    _rope_layers(s, _rope(cfg, "llama4_text", s.head_dim, ("default", "llama3"))[0], interleaved=True)
    nr = cfg.get("no_rope_layers") or [int((i + 1) % cfg.get("no_rope_layer_interval", 4) != 0) for i in range(L)]
    s.use_rope = [bool(x) for x in nr]
    types = cfg.get("layer_types") or ["chunked_attention" if r else "full_attention" for r in nr]
    if len(types) != L or any(t not in ("chunked_attention", "full_attention") for t in types):
        raise ValueError(f"llama4_text: layer_types {types} invalid for {L} layers")
    C = cfg.get("attention_chunk_size", 8192)
    s.chunks = [C if t == "chunked_attention" else None for t in types]
    s.qk_norm = "l2" if cfg.get("use_qk_norm", True) else None
    tt = cfg.get("attn_temperature_tuning", 4)
    s.temperature = [bool(tt) and not r for r in s.use_rope]
    s.floor_scale = float(cfg.get("floor_scale", 8192))
    s.attn_scale = float(cfg.get("attn_scale", 0.1))


# ---------------------------------------------------------------------------
# checkpoint layout
# ---------------------------------------------------------------------------
def expected_weight_shapes(cfg, family):
    return _weight_shapes(_spec(cfg, family))


def _weight_shapes(s):
    D, V = s.hidden, s.vocab
    w = {s.embed + ".weight": (V, D), s.final + ".weight": (D,)}
    if not s.tied:
        w[s.head + ".weight"] = (V, D)
    if s.head_bias:
        w[s.head + ".bias"] = (V,)
    for i in range(s.n_layers):
        p = f"{s.layers}.{i}."
        w[p + s.n1 + ".weight"] = (D,)
        w[p + s.n2 + ".weight"] = (D,)
        a = p + s.attn_at + "."
        if s.attn == "mla":
            H, qk = s.n_heads, s.nope + s.rdim
            if s.q_lora is None:
                w[a + "q_proj.weight"] = (H * qk, D)
            else:
                w[a + "q_a_proj.weight"] = (s.q_lora, D)
                w[a + "q_a_layernorm.weight"] = (s.q_lora,)
                w[a + "q_b_proj.weight"] = (H * qk, s.q_lora)
                if s.bias:
                    w[a + "q_a_proj.bias"] = (s.q_lora,)
            w[a + "kv_a_proj_with_mqa.weight"] = (s.kv_lora + s.rdim, D)
            w[a + "kv_a_layernorm.weight"] = (s.kv_lora,)
            w[a + "kv_b_proj.weight"] = (H * (s.nope + s.vdim), s.kv_lora)
            w[a + "o_proj.weight"] = (D, H * s.vdim)
            if s.bias:
                w[a + "kv_a_proj_with_mqa.bias"] = (s.kv_lora + s.rdim,)
                w[a + "o_proj.bias"] = (D,)
        else:
            H, KV, hd = s.n_heads, s.n_kv, s.head_dim
            if s.fused:
                w[a + s.fused + ".weight"] = ((H + 2 * KV) * hd, D)
                w[a + "out_proj.weight"] = (D, H * hd)
            else:
                for n, rows in (("q_proj", H * hd), ("k_proj", KV * hd), ("v_proj", KV * hd)):
                    w[a + n + ".weight"] = (rows, D)
                    if s.qkv_bias:
                        w[a + n + ".bias"] = (rows,)
                w[a + "o_proj.weight"] = (D, H * hd)
                if s.o_bias:
                    w[a + "o_proj.bias"] = (D,)
            if s.qk_norm == "full":
                w[a + "q_norm.weight"] = (H * hd,)
                w[a + "k_norm.weight"] = (KV * hd,)
            elif s.qk_norm == "head":
                w[a + "q_norm.weight"] = (hd,)
                w[a + "k_norm.weight"] = (hd,)
        m = p + s.mlp_at + "."
        if not s.sparse[i]:
            _mlp_shapes(w, m, D, s.inter, s.mlp_bias)
            continue
        E, I = s.n_experts, s.moe_inter
        if s.family == "granitemoe":
            w[m + "router.layer.weight"] = (E, D)
            w[m + "input_linear.weight"] = (E, 2 * I, D)
            w[m + "output_linear.weight"] = (E, D, I)
        elif s.family == "dbrx":
            w[m + "router.layer.weight"] = (E, D)
            for n in ("w1", "v1", "w2"):
                w[m + "experts.mlp." + n] = (E * I, D)
        elif s.family == "llama4_text":
            w[m + "router.weight"] = (E, D)
            w[m + "experts.gate_up_proj"] = (E, D, 2 * I)
            w[m + "experts.down_proj"] = (E, I, D)
        else:
            w[m + "gate.weight"] = (E, D)
            for e in range(E):
                _mlp_shapes(w, m + f"experts.{e}.", D, I, _expert_bias(s))
        if s.family == "ernie4_5_moe":
            w[m + "moe_statics.e_score_correction_bias"] = (1, E)
        if s.family == "glm4_moe" or (s.family == "deepseek_v2" and s.method == "noaux_tc"):
            w[m + "gate.e_score_correction_bias"] = (E,)
        if s.shared:
            _mlp_shapes(w, m + s.shared_at + ".", D, s.shared, s.mlp_bias)
        if s.shared_gate:
            w[m + "shared_expert_gate.weight"] = (1, D)
    return w


def _mlp_shapes(w, p, D, I, bias):
    for n, shape in (("gate_proj", (I, D)), ("up_proj", (I, D)), ("down_proj", (D, I))):
        w[p + n + ".weight"] = shape
        if bias:
            w[p + n + ".bias"] = (shape[0],)


def weight_init(name, shape):
    """Random-weight scheme for make_case (None = make_case's default)."""
    last = name.split(".")[-1]
    if last == "e_score_correction_bias":
        return ("normal", 0.1)
    if name.endswith((".norm_1.weight", ".norm_2.weight", "norm_f.weight")):
        return ("norm", None)
    if name.endswith(("router.layer.weight", "router.weight")):
        return ("normal", 2.0 / np.sqrt(shape[1]))
    if name.endswith(("input_linear.weight", "output_linear.weight")):
        return ("normal", 1.0 / np.sqrt(shape[2]))          # granite [E, 2I, D] / [E, D, I]: fan-in last
    if name.endswith("shared_expert_gate.weight"):
        return ("normal", 1.0 / np.sqrt(shape[1]))
    return None


# ---------------------------------------------------------------------------
# forward
# ---------------------------------------------------------------------------
class Model(ref.GreedyMixin):
    def __init__(self, cfg, weights, family):
        self.spec = _spec(cfg, family)
        shapes = _weight_shapes(self.spec)
        missing = sorted(set(shapes) - set(weights))
        unexpected = sorted(set(weights) - set(shapes))
        bad = sorted(k for k in set(shapes) & set(weights) if tuple(weights[k].shape) != tuple(shapes[k]))
        if missing or unexpected or bad:
            raise ValueError(f"checkpoint does not match {FAMILIES[family]}: missing {missing[:8]}, unexpected "
                             f"{unexpected[:8]}, bad shapes {[(k, weights[k].shape, shapes[k]) for k in bad[:8]]}")
        self.w = {k: np.asarray(v, dtype=np.float64) for k, v in weights.items()}
        self.router_gaps = []

    # ---- norms, rope ---------------------------------------------------------
    def _norm(self, x, name):
        s, w = self.spec, self.w
        if s.layer_norm:
            return ref._layer_norm(x, w[name + ".weight"], 0.0, s.eps)
        return ref._rms_norm(x, w[name + ".weight"], s.eps)

    @staticmethod
    def _rope_pairs(x, cos, sin):
        """Rotate (2i, 2i+1) pairs of the first rotary dims: cos/sin [B, S, dim] (cat(freqs, freqs))."""
        d = cos.shape[-1]
        half = d // 2
        c, sn = cos[:, :, None, :half], sin[:, :, None, :half]
        x1, x2 = x[..., 0:d:2], x[..., 1:d:2]
        out = np.empty_like(x[..., :d])
        out[..., 0::2] = x1 * c - x2 * sn
        out[..., 1::2] = x2 * c + x1 * sn
        return np.concatenate([out, x[..., d:]], axis=-1)

    def _rotate(self, x, cos, sin):
        return self._rope_pairs(x, cos, sin) if self.spec.interleaved else ref.Rope.apply(x, cos, sin)

    # ---- attention -----------------------------------------------------------
    @staticmethod
    def _attend(q, k, v, scale, window=None, chunk=None):
        """q/k [B, S, H, d], v [B, S, H, dv] -> [B, S, H * dv]; causal, HF sliding window (q - k < w),
        chunks (k // C == q // C)."""
        B, S, H, _ = q.shape
        scores = np.einsum("bqhd,bkhd->bhqk", q, k) * scale
        qi, ki = np.arange(S)[:, None], np.arange(S)[None, :]
        vis = ki <= qi
        if window is not None:
            vis &= (qi - ki) < window
        if chunk is not None:
            vis &= (ki // chunk) == (qi // chunk)
        p = ref._softmax(np.where(vis[None, None], scores, -np.inf), axis=-1)
        return np.einsum("bhqk,bkhd->bqhd", p, v).reshape(B, S, H * v.shape[-1])

    def _mha(self, h, i, positions, cos, sin):
        s, w = self.spec, self.w
        a = f"{s.layers}.{i}.{s.attn_at}."
        B, S, _ = h.shape
        H, KV, hd = s.n_heads, s.n_kv, s.head_dim
        if s.fused:
            qkv = ref._linear(h, w[a + s.fused + ".weight"])
            if s.clip is not None:
                qkv = np.clip(qkv, -s.clip, s.clip)
            q, k, v = np.split(qkv, [H * hd, H * hd + KV * hd], axis=-1)
        else:
            q = ref._linear(h, w[a + "q_proj.weight"], w.get(a + "q_proj.bias"))
            k = ref._linear(h, w[a + "k_proj.weight"], w.get(a + "k_proj.bias"))
            v = ref._linear(h, w[a + "v_proj.weight"], w.get(a + "v_proj.bias"))
        if s.qk_norm == "full":
            q = ref._rms_norm(q, w[a + "q_norm.weight"], s.eps)
            k = ref._rms_norm(k, w[a + "k_norm.weight"], s.eps)
        if s.clip is not None and s.clip_after_norm:
            q, k, v = (np.clip(t, -s.clip, s.clip) for t in (q, k, v))
        q, k, v = q.reshape(B, S, H, hd), k.reshape(B, S, KV, hd), v.reshape(B, S, KV, hd)
        if s.qk_norm == "head":
            q = ref._rms_norm(q, w[a + "q_norm.weight"], s.eps)
            k = ref._rms_norm(k, w[a + "k_norm.weight"], s.eps)
        if s.use_rope[i]:
            q, k = self._rotate(q, cos, sin), self._rotate(k, cos, sin)
            if s.qk_norm == "l2":
                q = q / np.sqrt(np.mean(q * q, axis=-1, keepdims=True) + s.eps)
                k = k / np.sqrt(np.mean(k * k, axis=-1, keepdims=True) + s.eps)
        if s.temperature[i]:
            t = np.log(np.floor((positions.astype(np.float64) + 1.0) / s.floor_scale) + 1.0) * s.attn_scale + 1.0
            q = q * t[:, :, None, None]
        rep = H // KV
        k, v = np.repeat(k, rep, axis=2), np.repeat(v, rep, axis=2)
        scale = s.scale if s.scale is not None else hd ** -0.5
        o = self._attend(q, k, v, scale, s.windows[i], s.chunks[i])
        return ref._linear(o, w[a + ("out_proj" if s.fused else "o_proj") + ".weight"], w.get(a + "o_proj.bias"))

    def _mla(self, h, i, cos, sin):
        s, w = self.spec, self.w
        a = f"{s.layers}.{i}.{s.attn_at}."
        B, S, _ = h.shape
        H, nope, rd, vd = s.n_heads, s.nope, s.rdim, s.vdim
        if s.q_lora is None:
            q = ref._linear(h, w[a + "q_proj.weight"])
        else:
            c = ref._rms_norm(ref._linear(h, w[a + "q_a_proj.weight"], w.get(a + "q_a_proj.bias")),
                              w[a + "q_a_layernorm.weight"], 1e-6)
            q = ref._linear(c, w[a + "q_b_proj.weight"])
        q = q.reshape(B, S, H, nope + rd)
        q_nope, q_pe = q[..., :nope], q[..., nope:]
        kv = ref._linear(h, w[a + "kv_a_proj_with_mqa.weight"], w.get(a + "kv_a_proj_with_mqa.bias"))
        latent, k_pe = kv[..., :s.kv_lora], kv[..., s.kv_lora:]
        latent = ref._rms_norm(latent, w[a + "kv_a_layernorm.weight"], 1e-6)
        kvb = ref._linear(latent, w[a + "kv_b_proj.weight"]).reshape(B, S, H, nope + vd)
        k_nope, v = kvb[..., :nope], kvb[..., nope:]
        q_pe = self._rope_pairs(q_pe, cos, sin)
        k_pe = self._rope_pairs(k_pe.reshape(B, S, 1, rd), cos, sin)
        qf = np.concatenate([q_nope, q_pe], axis=-1)
        kf = np.concatenate([k_nope, np.broadcast_to(k_pe, (B, S, H, rd))], axis=-1)
        o = self._attend(qf, kf, v, s.scale)
        return ref._linear(o, w[a + "o_proj.weight"], w.get(a + "o_proj.bias"))

    # ---- MLPs ------------------------------------------------------------------
    def _gated(self, x, p, bias):
        w = self.w
        act = ref._act(self.spec.act)
        g = ref._linear(x, w[p + "gate_proj.weight"], w.get(p + "gate_proj.bias") if bias else None)
        u = ref._linear(x, w[p + "up_proj.weight"], w.get(p + "up_proj.bias") if bias else None)
        return ref._linear(act(g) * u, w[p + "down_proj.weight"], w.get(p + "down_proj.bias") if bias else None)

    def _gap(self, gaps):
        if gaps is not None:
            self.router_gaps.extend(gaps)

    def _route(self, t, m):
        """-> (top [T, k], weights [T, k], weights scale the input?)."""
        s, w = self.spec, self.w
        k, E = s.top_k, s.n_experts
        if s.router in ("softmax", "dbrx", "ernie"):
            logits = t @ w[m + ("router.layer.weight" if s.router == "dbrx" else "gate.weight")].T
            p = ref._softmax(logits, axis=-1)
            choice = p
            if s.router == "ernie":
                choice = p + w[m + "moe_statics.e_score_correction_bias"][0][None, :]
            top, gaps = _topk(choice, k)
            self._gap(gaps)
            wts = np.take_along_axis(p, top, axis=-1)
            if s.router == "softmax" and s.norm_topk:
                wts = wts / wts.sum(axis=-1, keepdims=True)
            elif s.router == "dbrx" and s.norm_p is not None:
                wts = wts / np.sum(np.abs(wts) ** s.norm_p, axis=-1, keepdims=True) ** (1.0 / s.norm_p)
            elif s.router == "ernie":
                wts = wts / np.maximum(wts.sum(axis=-1, keepdims=True), s.norm_min)
            return top, wts, False
        if s.router in ("topk_softmax", "llama4"):
            logits = t @ w[m + ("router.layer.weight" if s.router == "topk_softmax" else "router.weight")].T
            top, gaps = _topk(logits, k)
            self._gap(gaps)
            vals = np.take_along_axis(logits, top, axis=-1)
            if s.router == "llama4":
                return top, _sigmoid(vals), True
            return top, ref._softmax(vals, axis=-1), False
        # deepseek-style: noaux (glm4_moe, deepseek_v2 noaux_tc) or deepseek_v2 greedy / group_limited_greedy
        logits = t @ w[m + "gate.weight"].T
        scores = _sigmoid(logits) if s.scoring == "sigmoid" else ref._softmax(logits, axis=-1)
        T, G = t.shape[0], s.n_group
        noaux = s.router == "noaux" or s.method == "noaux_tc"
        choice = scores + w[m + "gate.e_score_correction_bias"][None, :] if noaux else scores
        if noaux or s.method == "group_limited_greedy":
            grouped = choice.reshape(T, G, E // G)
            if noaux:
                gscore = np.sort(grouped, axis=-1)[..., -2:].sum(axis=-1)
            else:
                gscore = grouped.max(axis=-1)
            keep, ggaps = _topk(gscore, s.topk_group)
            self._gap(ggaps)
            gmask = np.zeros((T, G), dtype=bool)
            np.put_along_axis(gmask, keep, True, axis=-1)
            choice = np.where(np.repeat(gmask, E // G, axis=-1), choice, 0.0)
        top, gaps = _topk(choice, k)
        self._gap(gaps)
        wts = np.take_along_axis(scores, top, axis=-1)
        if s.norm_topk and (s.router == "noaux" or k > 1):
            wts = wts / (wts.sum(axis=-1, keepdims=True) + 1e-20)
        return top, wts * s.scaling, False

    def _expert(self, e, x, m):
        s, w = self.spec, self.w
        act = ref._act(s.act)
        I = s.moe_inter
        if s.family == "granitemoe":
            gu = x @ w[m + "input_linear.weight"][e].T
            return (act(gu[:, :I]) * gu[:, I:]) @ w[m + "output_linear.weight"][e].T
        if s.family == "dbrx":
            blk = slice(e * I, (e + 1) * I)
            w1, v1, w2 = (w[m + "experts.mlp." + n][blk] for n in ("w1", "v1", "w2"))
            return (act(x @ w1.T) * (x @ v1.T)) @ w2
        if s.family == "llama4_text":
            gu = x @ w[m + "experts.gate_up_proj"][e]
            return (gu[:, I:] * act(gu[:, :I])) @ w[m + "experts.down_proj"][e]
        return self._gated(x, m + f"experts.{e}.", _expert_bias(s))

    def _moe(self, x, i):
        s, w = self.spec, self.w
        m = f"{s.layers}.{i}.{s.mlp_at}."
        B, S, D = x.shape
        t = x.reshape(-1, D)
        top, wts, scale_input = self._route(t, m)
        out = np.zeros_like(t)
        for e in range(s.n_experts):
            rows, slot = np.nonzero(top == e)
            if rows.size == 0:
                continue
            we = wts[rows, slot][:, None]
            if scale_input:
                np.add.at(out, rows, self._expert(e, t[rows] * we, m))
            else:
                np.add.at(out, rows, self._expert(e, t[rows], m) * we)
        if s.shared:
            sh = self._gated(t, m + s.shared_at + ".", s.mlp_bias)
            if s.shared_gate:
                sh = _sigmoid(t @ w[m + "shared_expert_gate.weight"].T) * sh
            out = out + sh
        return out.reshape(B, S, D)

    def forward(self, ids, positions=None):
        s, w = self.spec, self.w
        ids, positions = ref.prepare_inputs(ids, positions, s.vocab)
        x = w[s.embed + ".weight"][ids] * s.embed_mult
        cos, sin = s.rope.cos_sin(positions)
        for i in range(s.n_layers):
            p = f"{s.layers}.{i}."
            h = self._norm(x, p + s.n1)
            a = self._mla(h, i, cos, sin) if s.attn == "mla" else self._mha(h, i, positions, cos, sin)
            x = x + a * s.residual_mult
            h = self._norm(x, p + s.n2)
            f = self._moe(h, i) if s.sparse[i] else self._gated(h, p + s.mlp_at + ".", s.mlp_bias)
            x = x + f * s.residual_mult
        x = self._norm(x, s.final)
        head = w[s.embed + ".weight"] if s.tied else w[s.head + ".weight"]
        return ref._linear(x, head, w.get(s.head + ".bias")) / s.logit_div
