"""Plugin families of the numpy reference: DeepSeek-V3, gpt-oss, MiniMax-M2, PhiMoE.

Written from Hugging Face transformers' modeling code (modeling_deepseek_v3.py, modeling_gpt_oss.py,
modeling_minimax_m2.py, modeling_phimoe.py / modular_phimoe.py and their configuration files,
modeling_rope_utils.py), NOT from archc's sources. Checkpoint names/shapes follow the HF hub layout (as in
the shared hf-golden fixtures). Everything is computed in float64; positions are 0..S-1, no padding.

deepseek_v3  MLA: q = q_b(RMSNorm(q_a(x))) (or q_proj when q_lora_rank is null), per head [nope | rope];
             kv_a_proj_with_mqa(x) = [latent c | k_rope (one shared head)], k_nope|v = kv_b(RMSNorm(c));
             the RMSNorms of the two latents use eps 1e-6 (DeepseekV3RMSNorm default, not rms_norm_eps);
             RoPE on the rope dims, rope_interleave (default true) first de-interleaves them
             (view(d/2, 2).transpose) and then applies rotate_half; softmax scale qk_head_dim^-0.5 times
             yarn_get_mscale(factor, mscale_all_dim)^2 when rope scaling is on and mscale_all_dim != 0.
             Router: s = sigmoid(x W^T) (float32 in HF), choice = s + e_score_correction_bias; group score =
             sum of the top-2 choices per group, keep topk_group groups, the others' choices become 0.0
             (masked_fill 0.0, as HF does), top-k of the choices; weights s[top] (unbiased), / (sum + 1e-20)
             when norm_topk_prob, times routed_scaling_factor. Shared experts = SwiGLU of width
             n_shared_experts * moe_intermediate_size, always added. Layers i < first_k_dense_replace are dense.
gpt_oss      q/k/v/o biases (attention_bias), per-head sink logits in the softmax denominator, RoPE half-split
             over the full head (yarn: cos/sin times the attention factor), layer_types sliding/full
             (default: even layers slide). Router: logits = x W^T + b, top-k, softmax over the k logits.
             Experts: gate_up = x @ gate_up_proj[e] + bias ([E, D, 2I], gate = even columns, up = odd);
             gate = min(gate, limit), up = clamp(up, -limit, limit), glu = gate * sigmoid(alpha * gate),
             y = ((up + 1) * glu) @ down_proj[e] + down_proj_bias[e]; limit = swiglu_limit (7.0),
             alpha = swiglu_alpha (1.702) as in the current HF GptOssConfig.
minimax_m2   q_norm / k_norm are RMSNorms over the whole projected vector (heads * head_dim) before the
             head split; partial rotary (partial_rotary_factor, rotate_half on the first dims); router
             s = sigmoid(x W^T), top-k of s + e_score_correction_bias, weights s[top] / sum(s[top]).
phimoe       LayerNorm (eps = rms_norm_eps) everywhere, q/k/v/o biases (attention_bias), lm_head bias
             (lm_head_bias), optional sliding window on every layer; sparsemixer routing in eval mode:
             top-1 = argmax, weight = softmax over the experts with (max - s) / max(|s|, max) <= 2 * jitter;
             top-2 = argmax with the top-1 removed, weight = softmax over the same rule (threshold from the
             second max, top-1 excluded). head_dim (getattr, else hidden // heads). RoPE default, or
             longrope as transformers 5.16's PhimoeRotaryEmbedding: inv_freq from rope_init_fn(config) called
             without seq_len (the short factors on every forward), cos/sin times long_mscale when
             max(position) + 1 > original_max_position_embeddings (a top-level key has priority over the
             dict's, else max_position_embeddings), else short_mscale. Earlier 4.x/5.x versions passed
             seq_len (long factors past that length): forwards past it with long_factor != short_factor
             are refused as ambiguous across HF versions.

Anything else raises ValueError.
"""
import math

import numpy as np

import hf_reference as ref

FAMILIES = {
    "deepseek_v3": "DeepseekV3ForCausalLM",
    "gpt_oss": "GptOssForCausalLM",
    "minimax_m2": "MiniMaxM2ForCausalLM",
    "phimoe": "PhimoeForCausalLM",
}

# Keys that never change inference (besides hf_reference._HARMLESS).
_COMMON_HARMLESS = {"initializer_range", "router_aux_loss_coef", "output_router_logits"}

_KNOWN = {
    "deepseek_v3": {
        "hidden_size", "intermediate_size", "moe_intermediate_size", "num_hidden_layers", "num_attention_heads",
        "num_key_value_heads", "n_shared_experts", "n_routed_experts", "routed_scaling_factor", "kv_lora_rank",
        "q_lora_rank", "qk_rope_head_dim", "v_head_dim", "qk_nope_head_dim", "n_group", "topk_group",
        "num_experts_per_tok", "first_k_dense_replace", "norm_topk_prob", "hidden_act", "rms_norm_eps",
        "vocab_size", "rope_theta", "rope_scaling", "rope_parameters", "rope_interleave", "attention_bias",
        "pretraining_tp", "scoring_func", "topk_method", "head_dim", "aux_loss_alpha", "seq_aux",
        "num_nextn_predict_layers", "moe_layer_freq", "ep_size",
    },
    "gpt_oss": {
        "num_hidden_layers", "num_local_experts", "vocab_size", "hidden_size", "intermediate_size", "head_dim",
        "num_attention_heads", "num_key_value_heads", "sliding_window", "rope_theta", "rope_scaling",
        "rope_parameters", "hidden_act", "rms_norm_eps", "num_experts_per_tok", "experts_per_token",
        "layer_types", "attention_bias", "swiglu_limit", "swiglu_alpha", "initial_context_length",
    },
    "minimax_m2": {
        "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
        "num_key_value_heads", "head_dim", "hidden_act", "rms_norm_eps", "num_experts_per_tok",
        "num_local_experts", "router_jitter_noise", "rope_theta", "rope_scaling", "rope_parameters",
        "partial_rotary_factor", "rotary_dim", "use_qk_norm", "qk_norm_type", "scoring_func", "use_routing_bias",
        "routed_scaling_factor", "attn_type_list", "shared_intermediate_size", "use_mtp", "num_mtp_modules",
        "mtp_transformer_layers",
    },
    "phimoe": {
        "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
        "num_key_value_heads", "hidden_act", "rms_norm_eps", "rope_theta", "rope_scaling", "sliding_window",
        "num_experts_per_tok", "num_local_experts", "router_jitter_noise", "input_jitter_noise",
        "attention_bias", "lm_head_bias", "head_dim", "rope_parameters", "original_max_position_embeddings",
    },
}

# Fixed values HF assumes (a config asking for anything else is not computed here).
_MUST = {
    "deepseek_v3": {"scoring_func": ("sigmoid",), "topk_method": ("noaux_tc",), "pretraining_tp": (1,),
                    "moe_layer_freq": (1,), "ep_size": (1,)},
    "gpt_oss": {"hidden_act": ("silu",)},
    "minimax_m2": {"use_qk_norm": (True,), "qk_norm_type": ("per_layer",), "scoring_func": ("sigmoid",),
                   "use_routing_bias": (True,), "routed_scaling_factor": (1, 1.0),
                   "shared_intermediate_size": (0,)},
}


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def _check_cfg(cfg, family):
    unknown = sorted(set(cfg) - ref._HARMLESS - _COMMON_HARMLESS - _KNOWN[family])
    if unknown:
        raise ValueError(f"{family}: config keys not supported by the reference: {unknown}")
    if cfg.get("model_type") != family:
        raise ValueError(f"config model_type {cfg.get('model_type')!r} does not match family {family!r}")
    archs = cfg.get("architectures") or []
    if archs and archs[0] != FAMILIES[family]:
        raise ValueError(f"architectures[0] {archs[0]!r} is not {FAMILIES[family]}")
    for k, allowed in _MUST.get(family, {}).items():
        if k in cfg and cfg[k] not in allowed:
            raise ValueError(f"{family}: {k} = {cfg[k]!r} not supported (only {allowed})")


def _rope_params(cfg, family, allowed_types):
    """HF 5 standardisation of rope_scaling / rope_parameters (+ top-level rope_theta)."""
    if cfg.get("rope_scaling") and cfg.get("rope_parameters"):
        raise ValueError(f"{family}: both rope_scaling and rope_parameters given")
    rp = dict(cfg.get("rope_scaling") or cfg.get("rope_parameters") or {})
    if "rope_theta" not in rp:
        rp["rope_theta"] = ref._req(cfg, "rope_theta")
    rtype = rp.get("rope_type", rp.get("type", "default"))
    rp["rope_type"] = rtype
    if rtype not in allowed_types:
        raise ValueError(f"{family}: rope_type {rtype!r} not supported (only {allowed_types})")
    allowed = {"rope_type", "type", "rope_theta", "partial_rotary_factor"}
    if rtype == "longrope" and family == "phimoe":
        allowed |= {"short_factor", "long_factor", "factor", "attention_factor", "original_max_position_embeddings",
                    "short_mscale", "long_mscale"}
        for m in ("short_mscale", "long_mscale"):  # PhimoeConfig.validate_rope
            if not isinstance(rp.get(m), (int, float)) or isinstance(rp.get(m), bool):
                raise ValueError(f"phimoe: rope {m} must be a number")
        # standardize_rope_params: a top-level original_max_position_embeddings (not a PhimoeConfig field,
        # set as an attribute) has priority; else the dict's; else max_position_embeddings.
        if cfg.get("original_max_position_embeddings") is not None:
            rp["original_max_position_embeddings"] = cfg["original_max_position_embeddings"]
        rp.setdefault("original_max_position_embeddings", ref._req(cfg, "max_position_embeddings"))
    if rtype == "yarn":
        allowed |= {"factor", "original_max_position_embeddings", "attention_factor", "beta_fast", "beta_slow",
                    "mscale", "mscale_all_dim", "truncate"}
        factor = float(ref._req(rp, "factor"))
        maxpos = cfg.get("max_position_embeddings")
        orig = rp.get("original_max_position_embeddings")
        if orig is None:
            orig = ref._req(cfg, "max_position_embeddings")
        elif maxpos is not None and abs(maxpos / orig - factor) > 1e-9:
            # Some HF versions replace `factor` by max_position_embeddings / original (DeepSeek convention).
            raise ValueError(f"{family}: yarn factor {factor} != max_position_embeddings / "
                             f"original_max_position_embeddings ({maxpos}/{orig}); ambiguous across HF versions")
        rp["original_max_position_embeddings"] = orig
    extra = sorted(set(rp) - allowed)
    if extra:
        raise ValueError(f"{family}: rope ({rtype}) keys not supported by the reference: {extra}")
    return rp


def _attend(q, k, v, scale, window=None, sinks=None):
    """q/k [B,S,H,d], v [B,S,H,dv] (kv heads already repeated) -> [B,S,H*dv]. Causal, HF sliding window
    (key k visible to query q iff k <= q and q - k < window), optional per-head sink logits that only enter
    the softmax denominator (gpt-oss)."""
    B, S, H, _ = q.shape
    scores = np.einsum("bqhd,bkhd->bhqk", q, k) * scale
    qi = np.arange(S)[:, None]
    ki = np.arange(S)[None, :]
    vis = ki <= qi
    if window is not None:
        vis &= (qi - ki) < window
    scores = np.where(vis[None, None], scores, -np.inf)
    if sinks is None:
        p = ref._softmax(scores, axis=-1)
    else:
        s = np.broadcast_to(sinks[None, :, None, None], (B, H, S, 1))
        p = ref._softmax(np.concatenate([scores, s], axis=-1), axis=-1)[..., :-1]
    return np.einsum("bhqk,bkhd->bqhd", p, v).reshape(B, S, H * v.shape[-1])


def _combine(t, top, weights, expert_fn, E):
    """sum_j weights[:, j] * expert_fn(e = top[:, j], rows); t [T, D], top/weights [T, k]."""
    out = np.zeros_like(t)
    for e in range(E):
        rows, slot = np.nonzero(top == e)
        if rows.size == 0:
            continue
        y = expert_fn(e, t[rows])
        np.add.at(out, rows, y * weights[rows, slot][:, None])
    return out


def _topk(scores, k):
    """Indices of the k largest per row (stable: lower index first on ties) and the k-th minus (k+1)-th gap."""
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


class Model(ref.GreedyMixin):
    def __init__(self, cfg, weights, family):
        if family not in FAMILIES:
            raise ValueError(f"unknown family {family!r}")
        self.family = family
        self.spec = _spec(cfg, family)
        shapes = _weight_shapes(self.spec)
        missing = sorted(set(shapes) - set(weights))
        unexpected = sorted(set(weights) - set(shapes))
        bad = sorted(k for k in set(shapes) & set(weights) if tuple(weights[k].shape) != tuple(shapes[k]))
        if missing or unexpected or bad:
            raise ValueError(f"checkpoint does not match {FAMILIES[family]}: missing {missing[:8]}, "
                             f"unexpected {unexpected[:8]}, bad shapes "
                             f"{[(k, weights[k].shape, shapes[k]) for k in bad[:8]]}")
        self.w = {k: np.asarray(v, dtype=np.float64) for k, v in weights.items()}
        self.router_gaps = []

    # ---- routers -----------------------------------------------------------
    def _route_deepseek(self, t, p):
        s, w = self.spec, self.w
        scores = _sigmoid(t @ w[p + "gate.weight"].T)
        choice = scores + w[p + "gate.e_score_correction_bias"][None, :]
        T, E, G = t.shape[0], s.n_experts, s.n_group
        group_scores = np.sort(choice.reshape(T, G, E // G), axis=-1)[..., -2:].sum(axis=-1)
        keep, ggaps = _topk(group_scores, s.topk_group)
        if ggaps is not None:
            self.router_gaps.extend(ggaps)
        gmask = np.zeros((T, G), dtype=bool)
        np.put_along_axis(gmask, keep, True, axis=-1)
        emask = np.repeat(gmask, E // G, axis=-1)
        choice = np.where(emask, choice, 0.0)   # HF: masked_fill(~score_mask, 0.0)
        top, gaps = _topk(choice, s.top_k)
        if gaps is not None:
            self.router_gaps.extend(gaps)
        wts = np.take_along_axis(scores, top, axis=-1)
        if s.norm_topk_prob:
            wts = wts / (wts.sum(axis=-1, keepdims=True) + 1e-20)
        return top, wts * s.routed_scaling_factor

    def _route_gpt_oss(self, t, p):
        s, w = self.spec, self.w
        logits = t @ w[p + "router.weight"].T + w[p + "router.bias"]
        top, gaps = _topk(logits, s.top_k)
        if gaps is not None:
            self.router_gaps.extend(gaps)
        return top, ref._softmax(np.take_along_axis(logits, top, axis=-1), axis=-1)

    def _route_minimax(self, t, p):
        s, w = self.spec, self.w
        scores = _sigmoid(t @ w[p + "gate.weight"].T)
        choice = scores + w[p + "e_score_correction_bias"][None, :]
        top, gaps = _topk(choice, s.top_k)
        if gaps is not None:
            self.router_gaps.extend(gaps)
        wts = np.take_along_axis(scores, top, axis=-1)
        return top, wts / wts.sum(axis=-1, keepdims=True)

    def _route_sparsemixer(self, t, p):
        """PhiMoE sparsemixer, eval mode (top-2)."""
        eps = self.spec.jitter
        scores = t @ self.w[p + "gate.weight"].T
        T = scores.shape[0]
        rows = np.arange(T)
        tops, wts = [], []
        masked = scores.copy()
        for _ in range(2):
            order = np.argsort(-masked, axis=-1, kind="stable")
            i1 = order[:, 0]
            m = masked[rows, i1][:, None]
            # argmax tie gap (the next candidate of this stage)
            self.router_gaps.extend((m[:, 0] - masked[rows, order[:, 1]]).tolist())
            factor = np.maximum(np.abs(scores), m)
            rel = (m - scores) / factor
            drop = rel > 2 * eps
            # distance (in logit units) of every other still-candidate expert to the threshold
            cand = np.isfinite(masked)
            cand[rows, i1] = False
            d = np.abs(rel - 2 * eps) * factor
            self.router_gaps.extend(d[cand].tolist())
            g = np.where(drop, -np.inf, masked)
            prob = ref._softmax(g, axis=-1)
            tops.append(i1)
            wts.append(prob[rows, i1])
            masked = masked.copy()
            masked[rows, i1] = -np.inf
        return np.stack(tops, axis=-1), np.stack(wts, axis=-1)

    # ---- experts -------------------------------------------------------------
    def _swiglu(self, x, p):
        w = self.w
        act = ref._act(self.spec.act)
        h = act(x @ w[p + "gate_proj.weight"].T) * (x @ w[p + "up_proj.weight"].T)
        return h @ w[p + "down_proj.weight"].T

    def _w123(self, x, p):
        w = self.w
        act = ref._act(self.spec.act)
        return (act(x @ w[p + "w1.weight"].T) * (x @ w[p + "w3.weight"].T)) @ w[p + "w2.weight"].T

    def _gpt_oss_expert(self, e, x, p):
        s, w = self.spec, self.w
        gu = x @ w[p + "experts.gate_up_proj"][e] + w[p + "experts.gate_up_proj_bias"][e]
        gate, up = gu[..., 0::2], gu[..., 1::2]
        gate = np.minimum(gate, s.limit)
        up = np.clip(up, -s.limit, s.limit)
        glu = gate * _sigmoid(gate * s.alpha)
        return ((up + 1.0) * glu) @ w[p + "experts.down_proj"][e] + w[p + "experts.down_proj_bias"][e]

    def _ffn(self, x, i):
        s = self.spec
        shp = x.shape
        t = x.reshape(-1, shp[-1])
        p = f"model.layers.{i}."
        if s.family == "deepseek_v3":
            m = p + "mlp."
            if i < s.first_dense:
                return self._swiglu(x, m)
            top, wts = self._route_deepseek(t, m)
            out = _combine(t, top, wts, lambda e, r: self._swiglu(r, m + f"experts.{e}."), s.n_experts)
            out = out + self._swiglu(t, m + "shared_experts.")
        elif s.family == "gpt_oss":
            m = p + "mlp."
            top, wts = self._route_gpt_oss(t, m)
            out = _combine(t, top, wts, lambda e, r: self._gpt_oss_expert(e, r, m), s.n_experts)
        elif s.family == "minimax_m2":
            m = p + "block_sparse_moe."
            top, wts = self._route_minimax(t, m)
            out = _combine(t, top, wts, lambda e, r: self._w123(r, m + f"experts.{e}."), s.n_experts)
        else:
            m = p + "block_sparse_moe."
            top, wts = self._route_sparsemixer(t, m)
            out = _combine(t, top, wts, lambda e, r: self._w123(r, m + f"experts.{e}."), s.n_experts)
        return out.reshape(shp)

    # ---- attention -----------------------------------------------------------
    def _attn_mla(self, h, i, cos, sin):
        s, w = self.spec, self.w
        a = f"model.layers.{i}.self_attn."
        B, S, _ = h.shape
        H, dn, dr, dv, c = s.n_heads, s.qk_nope, s.qk_rope, s.v_dim, s.kv_lora
        if s.q_lora is None:
            q = h @ w[a + "q_proj.weight"].T
        else:
            qa = ref._linear(h, w[a + "q_a_proj.weight"], w.get(a + "q_a_proj.bias"))
            q = ref._rms_norm(qa, w[a + "q_a_layernorm.weight"], 1e-6) @ w[a + "q_b_proj.weight"].T
        q = q.reshape(B, S, H, dn + dr)
        q_pass, q_rot = q[..., :dn], q[..., dn:]
        ckv = ref._linear(h, w[a + "kv_a_proj_with_mqa.weight"], w.get(a + "kv_a_proj_with_mqa.bias"))
        k_pass, k_rot = ckv[..., :c], ckv[..., c:]
        kv = (ref._rms_norm(k_pass, w[a + "kv_a_layernorm.weight"], 1e-6) @ w[a + "kv_b_proj.weight"].T)
        kv = kv.reshape(B, S, H, dn + dv)
        k_pass, v = kv[..., :dn], kv[..., dn:]
        k_rot = k_rot.reshape(B, S, 1, dr)
        if s.rope_interleave:  # HF apply_rotary_pos_emb_interleave: [x0, x2, ..., x1, x3, ...] then rotate_half
            q_rot = q_rot.reshape(B, S, H, dr // 2, 2).swapaxes(-1, -2).reshape(B, S, H, dr)
            k_rot = k_rot.reshape(B, S, 1, dr // 2, 2).swapaxes(-1, -2).reshape(B, S, 1, dr)
        q_rot = ref.Rope.apply(q_rot, cos, sin)
        k_rot = np.broadcast_to(ref.Rope.apply(k_rot, cos, sin), (B, S, H, dr))
        qs = np.concatenate([q_pass, q_rot], axis=-1)
        ks = np.concatenate([k_pass, k_rot], axis=-1)
        o = _attend(qs, ks, v, s.scale)
        return ref._linear(o, w[a + "o_proj.weight"], w.get(a + "o_proj.bias"))

    def _attn_mha(self, h, i, cos, sin):
        s, w = self.spec, self.w
        a = f"model.layers.{i}.self_attn."
        B, S, _ = h.shape
        H, KV, hd = s.n_heads, s.n_kv, s.head_dim
        q = ref._linear(h, w[a + "q_proj.weight"], w.get(a + "q_proj.bias"))
        k = ref._linear(h, w[a + "k_proj.weight"], w.get(a + "k_proj.bias"))
        v = ref._linear(h, w[a + "v_proj.weight"], w.get(a + "v_proj.bias"))
        if s.family == "minimax_m2":  # RMSNorm over all heads together, before the head split
            q = ref._rms_norm(q, w[a + "q_norm.weight"], s.eps)
            k = ref._rms_norm(k, w[a + "k_norm.weight"], s.eps)
        q = ref.Rope.apply(q.reshape(B, S, H, hd), cos, sin)
        k = ref.Rope.apply(k.reshape(B, S, KV, hd), cos, sin)
        v = v.reshape(B, S, KV, hd)
        rep = H // KV
        k = np.repeat(k, rep, axis=2)   # query head h uses kv head h // rep
        v = np.repeat(v, rep, axis=2)
        sinks = w[a + "sinks"] if s.family == "gpt_oss" else None
        o = _attend(q, k, v, hd ** -0.5, s.windows[i], sinks)
        return ref._linear(o, w[a + "o_proj.weight"], w.get(a + "o_proj.bias"))

    # ---- model ---------------------------------------------------------------
    def _norm(self, x, name):
        s, w = self.spec, self.w
        if s.family == "phimoe":
            return ref._layer_norm(x, w[name + ".weight"], w[name + ".bias"], s.eps)
        return ref._rms_norm(x, w[name + ".weight"], s.eps)

    def forward(self, ids, positions=None):
        s, w = self.spec, self.w
        ids, positions = ref.prepare_inputs(ids, positions, s.vocab)
        x = w["model.embed_tokens.weight"][ids]
        cos, sin = s.rope.cos_sin(positions)
        for i in range(s.n_layers):
            p = f"model.layers.{i}."
            h = self._norm(x, p + "input_layernorm")
            if s.family == "deepseek_v3":
                x = x + self._attn_mla(h, i, cos, sin)
            else:
                x = x + self._attn_mha(h, i, cos, sin)
            h = self._norm(x, p + "post_attention_layernorm")
            x = x + self._ffn(h, i)
        x = self._norm(x, "model.norm")
        head = w["model.embed_tokens.weight"] if s.tied else w["lm_head.weight"]
        return ref._linear(x, head, w.get("lm_head.bias"))


# ---------------------------------------------------------------------------
# config -> spec
# ---------------------------------------------------------------------------
def _pos_int(v, what):
    if not isinstance(v, int) or isinstance(v, bool) or v < 1:
        raise ValueError(f"{what} = {v!r} must be a positive integer")
    return v


def _spec(cfg, family):
    _check_cfg(cfg, family)
    s = _Spec()
    s.family = family
    s.cfg = cfg
    s.tied = bool(cfg.get("tie_word_embeddings", False))
    s.hidden = _pos_int(ref._req(cfg, "hidden_size"), "hidden_size")
    s.n_layers = _pos_int(ref._req(cfg, "num_hidden_layers"), "num_hidden_layers")
    s.n_heads = _pos_int(ref._req(cfg, "num_attention_heads"), "num_attention_heads")
    s.n_kv = cfg.get("num_key_value_heads") or s.n_heads
    s.vocab = _pos_int(ref._req(cfg, "vocab_size"), "vocab_size")
    s.eps = float(ref._req(cfg, "rms_norm_eps"))
    s.act = cfg.get("hidden_act", "silu")
    ref._act(s.act)
    if s.n_heads % s.n_kv:
        raise ValueError("num_attention_heads not divisible by num_key_value_heads")
    s.windows = [None] * s.n_layers
    maxpos = cfg.get("max_position_embeddings")
    if family == "deepseek_v3":
        _deepseek_spec(s, cfg, maxpos)
    elif family == "gpt_oss":
        _gpt_oss_spec(s, cfg, maxpos)
    elif family == "minimax_m2":
        _minimax_spec(s, cfg, maxpos)
    else:
        _phimoe_spec(s, cfg, maxpos)
    return s


def _deepseek_spec(s, cfg, maxpos):
    if s.n_kv != s.n_heads:
        raise ValueError("deepseek_v3: num_key_value_heads != num_attention_heads (HF repeat_kv would break MLA)")
    s.q_lora = cfg.get("q_lora_rank")
    if s.q_lora is not None:
        _pos_int(s.q_lora, "q_lora_rank")
    s.kv_lora = _pos_int(ref._req(cfg, "kv_lora_rank"), "kv_lora_rank")
    s.qk_nope = _pos_int(ref._req(cfg, "qk_nope_head_dim"), "qk_nope_head_dim")
    s.qk_rope = _pos_int(ref._req(cfg, "qk_rope_head_dim"), "qk_rope_head_dim")
    s.v_dim = _pos_int(ref._req(cfg, "v_head_dim"), "v_head_dim")
    if s.qk_rope % 2:
        raise ValueError("qk_rope_head_dim must be even")
    if cfg.get("head_dim") is not None and cfg["head_dim"] != s.qk_rope:
        raise ValueError("deepseek_v3: head_dim must equal qk_rope_head_dim (HF sets it so)")
    s.rope_interleave = bool(cfg.get("rope_interleave", True))
    s.attn_bias = bool(cfg.get("attention_bias", False))
    s.inter = _pos_int(ref._req(cfg, "intermediate_size"), "intermediate_size")
    s.moe_inter = _pos_int(ref._req(cfg, "moe_intermediate_size"), "moe_intermediate_size")
    s.n_experts = _pos_int(ref._req(cfg, "n_routed_experts"), "n_routed_experts")
    s.n_shared = _pos_int(ref._req(cfg, "n_shared_experts"), "n_shared_experts")
    s.top_k = _pos_int(ref._req(cfg, "num_experts_per_tok"), "num_experts_per_tok")
    s.n_group = _pos_int(ref._req(cfg, "n_group"), "n_group")
    s.topk_group = _pos_int(ref._req(cfg, "topk_group"), "topk_group")
    s.norm_topk_prob = bool(ref._req(cfg, "norm_topk_prob"))
    s.routed_scaling_factor = float(ref._req(cfg, "routed_scaling_factor"))
    s.first_dense = cfg.get("first_k_dense_replace", 0) or 0
    if s.n_experts % s.n_group or s.n_experts // s.n_group < 2:
        raise ValueError("deepseek_v3: n_routed_experts must split into n_group groups of >= 2 experts")
    if s.topk_group > s.n_group:
        raise ValueError("deepseek_v3: topk_group > n_group")
    if s.top_k > s.topk_group * (s.n_experts // s.n_group):
        raise ValueError("deepseek_v3: num_experts_per_tok exceeds the experts of the kept groups")
    rp = _rope_params(cfg, "deepseek_v3", ("default", "yarn"))
    s.rope = ref.Rope(rp, s.qk_rope, maxpos)
    s.scale = (s.qk_nope + s.qk_rope) ** -0.5
    if rp["rope_type"] != "default":
        msa = rp.get("mscale_all_dim", 0)
        if msa:
            f = float(rp["factor"])
            m = 1.0 if f <= 1 else 0.1 * float(msa) * math.log(f) + 1.0
            s.scale *= m * m


def _gpt_oss_spec(s, cfg, maxpos):
    s.head_dim = cfg.get("head_dim") or s.hidden // s.n_heads
    s.inter = _pos_int(ref._req(cfg, "intermediate_size"), "intermediate_size")
    s.n_experts = _pos_int(ref._req(cfg, "num_local_experts"), "num_local_experts")
    s.top_k = _pos_int(ref._req(cfg, "num_experts_per_tok"), "num_experts_per_tok")
    if cfg.get("experts_per_token") not in (None, s.top_k):
        raise ValueError("gpt_oss: experts_per_token != num_experts_per_tok")
    if s.top_k > s.n_experts:
        raise ValueError("num_experts_per_tok > num_local_experts")
    s.attn_bias = bool(cfg.get("attention_bias", True))
    s.limit = float(cfg.get("swiglu_limit", 7.0))
    s.alpha = float(cfg.get("swiglu_alpha", 1.702))
    L = s.n_layers
    types = cfg.get("layer_types")
    if types is None:
        types = ["sliding_attention" if (i + 1) % 2 else "full_attention" for i in range(L)]
    if len(types) != L or any(t not in ("sliding_attention", "full_attention") for t in types):
        raise ValueError(f"gpt_oss: layer_types {types} invalid for {L} layers")
    win = cfg.get("sliding_window")
    if "sliding_attention" in types:
        _pos_int(win, "sliding_window")
    s.windows = [win if t == "sliding_attention" else None for t in types]
    if not (cfg.get("rope_scaling") or cfg.get("rope_parameters")):
        raise ValueError("gpt_oss: rope_scaling required by the reference (HF would use its yarn default)")
    rp = _rope_params(cfg, "gpt_oss", ("default", "yarn"))
    s.rope = ref.Rope(rp, s.head_dim, maxpos)


def _minimax_spec(s, cfg, maxpos):
    s.head_dim = cfg.get("head_dim") or s.hidden // s.n_heads
    s.inter = _pos_int(ref._req(cfg, "intermediate_size"), "intermediate_size")
    s.n_experts = _pos_int(ref._req(cfg, "num_local_experts"), "num_local_experts")
    s.top_k = _pos_int(ref._req(cfg, "num_experts_per_tok"), "num_experts_per_tok")
    if s.top_k > s.n_experts:
        raise ValueError("num_experts_per_tok > num_local_experts")
    atl = cfg.get("attn_type_list")
    if atl is not None and any(t != 1 for t in atl):
        raise ValueError("minimax_m2: attn_type_list entries other than 1 (linear attention) not supported")
    rp = _rope_params(cfg, "minimax_m2", ("default",))
    if cfg.get("partial_rotary_factor") is not None:
        rp.setdefault("partial_rotary_factor", cfg["partial_rotary_factor"])
    prf = float(rp.get("partial_rotary_factor", 1.0))
    rd = cfg.get("rotary_dim")
    if rd is not None and rd != int(s.head_dim * prf):
        raise ValueError(f"minimax_m2: rotary_dim {rd} != head_dim * partial_rotary_factor "
                         f"({s.head_dim} * {prf}); HF only reads partial_rotary_factor")
    s.rope = ref.Rope(rp, s.head_dim, maxpos)
    if not 0 < s.rope.dim <= s.head_dim:
        raise ValueError("rotary dim out of range")


class _PhimoeLongRope(ref.Rope):
    """transformers 5.16 PhimoeRotaryEmbedding.forward with rope_type longrope."""

    def inv_freq(self, seq_len):
        rp = self.rp
        orig = int(rp["original_max_position_embeddings"])
        if seq_len > orig and list(rp["long_factor"]) != list(rp["short_factor"]):
            raise ValueError("phimoe: a forward past original_max_position_embeddings uses the short factors in "
                             "transformers 5.16 (rope_init_fn(config) without seq_len), the long ones before: "
                             "ambiguous across HF versions")
        ext = np.asarray(rp["short_factor"], dtype=np.float64)
        if ext.shape != (self.dim // 2,):
            raise ValueError(f"longrope factors must have length {self.dim // 2}, got {ext.shape}")
        mscale = rp["long_mscale"] if seq_len > orig else rp["short_mscale"]
        return 1.0 / (ext * self.base ** self.exponents), float(mscale)


def _phimoe_spec(s, cfg, maxpos):
    if "head_dim" in cfg and cfg["head_dim"] is None:
        raise ValueError("phimoe: head_dim null (getattr would return None)")
    if s.hidden % s.n_heads and cfg.get("head_dim") is None:
        raise ValueError("phimoe: hidden_size not divisible by num_attention_heads")
    # PhimoeAttention: getattr(config, "head_dim", hidden_size // num_attention_heads).
    s.head_dim = s.hidden // s.n_heads if cfg.get("head_dim") is None else _pos_int(cfg["head_dim"], "head_dim")
    s.inter = _pos_int(ref._req(cfg, "intermediate_size"), "intermediate_size")
    s.n_experts = _pos_int(ref._req(cfg, "num_local_experts"), "num_local_experts")
    s.top_k = ref._req(cfg, "num_experts_per_tok")
    if s.top_k != 2:
        raise ValueError("phimoe: sparsemixer routes exactly 2 experts (HF raises for other top_k)")
    if s.n_experts < 3:
        raise ValueError("phimoe: need at least 3 experts")
    s.jitter = float(cfg.get("router_jitter_noise", 0.01))
    if s.jitter < 0:
        raise ValueError("phimoe: router_jitter_noise < 0")
    s.attn_bias = bool(cfg.get("attention_bias", False))
    s.lm_head_bias = bool(cfg.get("lm_head_bias", False))
    win = cfg.get("sliding_window")
    if win is not None:
        _pos_int(win, "sliding_window")
    s.windows = [win] * s.n_layers
    rp = _rope_params(cfg, "phimoe", ("default", "longrope"))
    if rp["rope_type"] == "longrope":
        s.rope = _PhimoeLongRope(rp, s.head_dim, maxpos)
    else:
        if cfg.get("original_max_position_embeddings") is not None:
            raise ValueError("phimoe: original_max_position_embeddings without longrope is not exercised")
        s.rope = ref.Rope(rp, s.head_dim, maxpos)


# ---------------------------------------------------------------------------
# checkpoint layout
# ---------------------------------------------------------------------------
def expected_weight_shapes(cfg, family):
    return _weight_shapes(_spec(cfg, family))


def _weight_shapes(s):
    D, V = s.hidden, s.vocab
    w = {"model.embed_tokens.weight": (V, D)}
    if not s.tied:
        w["lm_head.weight"] = (V, D)
    nb = (".weight", ".bias") if s.family == "phimoe" else (".weight",)
    for n in nb:
        w["model.norm" + n] = (D,)
    if s.family == "phimoe" and s.lm_head_bias:
        w["lm_head.bias"] = (V,)
    for i in range(s.n_layers):
        p = f"model.layers.{i}."
        for n in nb:
            w[p + "input_layernorm" + n] = (D,)
            w[p + "post_attention_layernorm" + n] = (D,)
        a = p + "self_attn."
        if s.family == "deepseek_v3":
            H, qk = s.n_heads, s.qk_nope + s.qk_rope
            if s.q_lora is None:
                w[a + "q_proj.weight"] = (H * qk, D)
            else:
                w[a + "q_a_proj.weight"] = (s.q_lora, D)
                if s.attn_bias:
                    w[a + "q_a_proj.bias"] = (s.q_lora,)
                w[a + "q_a_layernorm.weight"] = (s.q_lora,)
                w[a + "q_b_proj.weight"] = (H * qk, s.q_lora)
            w[a + "kv_a_proj_with_mqa.weight"] = (s.kv_lora + s.qk_rope, D)
            if s.attn_bias:
                w[a + "kv_a_proj_with_mqa.bias"] = (s.kv_lora + s.qk_rope,)
            w[a + "kv_a_layernorm.weight"] = (s.kv_lora,)
            w[a + "kv_b_proj.weight"] = (H * (s.qk_nope + s.v_dim), s.kv_lora)
            w[a + "o_proj.weight"] = (D, H * s.v_dim)
            if s.attn_bias:
                w[a + "o_proj.bias"] = (D,)
            m = p + "mlp."
            if i < s.first_dense:
                _swiglu_shapes(w, m, D, s.inter)
            else:
                w[m + "gate.weight"] = (s.n_experts, D)
                w[m + "gate.e_score_correction_bias"] = (s.n_experts,)
                for e in range(s.n_experts):
                    _swiglu_shapes(w, m + f"experts.{e}.", D, s.moe_inter)
                _swiglu_shapes(w, m + "shared_experts.", D, s.moe_inter * s.n_shared)
            continue
        H, KV, hd = s.n_heads, s.n_kv, s.head_dim
        w[a + "q_proj.weight"] = (H * hd, D)
        w[a + "k_proj.weight"] = (KV * hd, D)
        w[a + "v_proj.weight"] = (KV * hd, D)
        w[a + "o_proj.weight"] = (D, H * hd)
        if s.family in ("gpt_oss", "phimoe") and s.attn_bias:
            w[a + "q_proj.bias"] = (H * hd,)
            w[a + "k_proj.bias"] = (KV * hd,)
            w[a + "v_proj.bias"] = (KV * hd,)
            w[a + "o_proj.bias"] = (D,)
        E, I = s.n_experts, s.inter
        if s.family == "gpt_oss":
            w[a + "sinks"] = (H,)
            m = p + "mlp."
            w[m + "router.weight"] = (E, D)
            w[m + "router.bias"] = (E,)
            w[m + "experts.gate_up_proj"] = (E, D, 2 * I)      # x @ W, gate/up interleaved columns
            w[m + "experts.gate_up_proj_bias"] = (E, 2 * I)
            w[m + "experts.down_proj"] = (E, I, D)
            w[m + "experts.down_proj_bias"] = (E, D)
            continue
        if s.family == "minimax_m2":
            w[a + "q_norm.weight"] = (H * hd,)
            w[a + "k_norm.weight"] = (KV * hd,)
        m = p + "block_sparse_moe."
        w[m + "gate.weight"] = (E, D)
        if s.family == "minimax_m2":
            w[m + "e_score_correction_bias"] = (E,)
        for e in range(E):
            w[m + f"experts.{e}.w1.weight"] = (I, D)
            w[m + f"experts.{e}.w2.weight"] = (D, I)
            w[m + f"experts.{e}.w3.weight"] = (I, D)
    return w


def _swiglu_shapes(w, p, D, I):
    w[p + "gate_proj.weight"] = (I, D)
    w[p + "up_proj.weight"] = (I, D)
    w[p + "down_proj.weight"] = (D, I)


def weight_init(name, shape):
    """Random-weight scheme for make_case (None = make_case's default)."""
    last = name.split(".")[-1]
    if last == "e_score_correction_bias":
        return ("normal", 0.1)
    if last == "sinks":
        return ("normal", 1.0)
    if name.endswith("router.weight"):                       # gpt-oss router [E, D]
        return ("normal", 2.0 / np.sqrt(shape[1]))
    if last == "gate_up_proj":                               # gpt-oss [E, D, 2I]: x @ W; large so clamps bind
        return ("normal", 3.0 / np.sqrt(shape[1]))
    if last == "down_proj" and len(shape) == 3:              # gpt-oss [E, I, D]
        return ("normal", 1.0 / np.sqrt(shape[1]))
    if last in ("gate_up_proj_bias", "down_proj_bias"):
        return ("normal", 0.1)
    return None
