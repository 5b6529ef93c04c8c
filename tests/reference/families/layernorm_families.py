"""Plugin families of the numpy reference: the LayerNorm decoders GPT-NeoX (Pythia), Falcon, StableLM, Nemotron,
StarCoder2, Cohere and Cohere2.

Written from Hugging Face transformers' modeling/configuration code of each family (modeling_gpt_neox.py /
configuration_gpt_neox.py, modeling_falcon.py / configuration_falcon.py, modeling_stablelm.py /
configuration_stablelm.py, modeling_nemotron.py / configuration_nemotron.py, modular_starcoder2.py /
configuration_starcoder2.py, modular_cohere.py / configuration_cohere.py, modular_cohere2.py), NOT from archc's
sources. Checkpoint names and shapes follow the HF hub layout (as in the shared hf-golden fixtures). Everything is
computed in float64, except Falcon's ALiBi tensor, which HF builds in bfloat16 and which is rounded the same way
here.

Config options that are not implemented, or that HF would not run, raise ValueError.

Covered (HF semantics):
* gpt_neox: fused query_key_value viewed per head [heads, 3, head_dim], rotary on the first int(head_dim *
  partial_rotary_factor) dims (the rope dict's, else rotary_pct, default 0.25: transformers 5 folds the legacy
  key into rope_parameters; base from the rope dict, else rotary_emb_base), rotate_half,
  attention_bias on query_key_value and dense, MLP biases, use_parallel_residual (x + attn(ln1 x) + mlp(ln2 x))
  or sequential, embed_out (tied to embed_in with tie_word_embeddings).
* falcon: new_decoder_architecture (query_key_value viewed [kv, heads / kv + 2, head_dim], ln_attn / ln_mlp, or
  one input_layernorm with num_ln_in_parallel_attn = 1), multi_query ([heads + 2, head_dim], one kv head), plain
  ([heads, 3, head_dim]); parallel_attn or sequential; `bias`; rotary on whole heads or ALiBi (alibi): the eager
  attention's (scores + A) / sqrt(hd) + A / sqrt(hd) (the mask carries A / sqrt(hd); the fixtures' implementation),
  or with attn_implementation "sdpa" the sdpa attention's (and Falcon's released code's) (scores + A) / sqrt(hd),
  A[h, j] = bf16(bf16(m_h) * j) with build_alibi_tensor's slopes; ffn_hidden_size (default 4 hidden);
  `activation`; tied lm_head.
* stablelm: LayerNorm with bias, use_parallel_residual (one input_layernorm), q/k/v biases (use_qkv_bias), no
  o_proj bias, qk_layernorm (one bias-free LayerNorm per head, q_layernorm.norms.N), partial_rotary_factor,
  SwiGLU MLP, GQA.
* nemotron: LayerNorm1P ((1 + w) with bias), head_dim, partial_rotary_factor (default 0.5), attention_bias,
  mlp_bias, up/down MLP with relu2.
* starcoder2: LayerNorm with bias (norm_epsilon), use_bias on q/k/v/o and c_fc/c_proj, sliding_window on every
  layer, GQA (default 2 kv heads), tied head by default.
* cohere: bias-free LayerNorm computed in float32, parallel block on input_layernorm, interleaved RoPE
  (repeat_interleave'd cos/sin, pairs (2i, 2i+1)), use_qk_norm (LayerNorm over head_dim with a [heads, head_dim]
  weight), attention_bias on q/k/v/o, logits * logit_scale, tied head by default, rope_theta default 500000.
* cohere2: cohere without q/k norms, layer_types (default: every sliding_window_pattern-th layer full), RoPE and the
  window on the sliding layers only (none when sliding_window is null), head_dim = hidden / heads.
RoPE scaling: the standard rope types of hf_reference.Rope (default, linear, llama3, yarn, longrope).
"""
import math

import numpy as np

import hf_reference as ref

FAMILIES = {
    "gpt_neox": "GPTNeoXForCausalLM",
    "falcon": "FalconForCausalLM",
    "stablelm": "StableLmForCausalLM",
    "nemotron": "NemotronForCausalLM",
    "starcoder2": "Starcoder2ForCausalLM",
    "cohere": "CohereForCausalLM",
    "cohere2": "Cohere2ForCausalLM",
}

_HARMLESS = {
    "architectures", "model_type", "bos_token_id", "eos_token_id", "pad_token_id", "torch_dtype", "dtype",
    "transformers_version", "use_cache", "initializer_range", "attention_dropout", "hidden_dropout", "_name_or_path",
    "output_attentions", "output_hidden_states", "return_dict", "max_position_embeddings", "tie_word_embeddings",
    "classifier_dropout", "residual_dropout", "embedding_dropout", "is_decoder",
}
_ROPE = {"rope_theta", "rope_scaling", "rope_parameters"}
_COMMON = {"vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
           "hidden_act"}
_KNOWN = {
    "gpt_neox": _COMMON | {"layer_norm_eps", "use_parallel_residual", "attention_bias", "rotary_pct",
                           "rotary_emb_base", "rope_scaling", "rope_parameters"},
    "falcon": {"vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "num_kv_heads", "alibi",
               "new_decoder_architecture", "multi_query", "parallel_attn", "bias", "num_ln_in_parallel_attn",
               "activation", "layer_norm_epsilon", "ffn_hidden_size", "attn_implementation",
               "_attn_implementation", "n_embed"} | _ROPE,
    "stablelm": _COMMON | {"num_key_value_heads", "layer_norm_eps", "use_parallel_residual", "use_qkv_bias",
                           "qk_layernorm", "partial_rotary_factor"} | _ROPE,
    "nemotron": _COMMON | {"num_key_value_heads", "head_dim", "norm_eps", "partial_rotary_factor", "attention_bias",
                           "mlp_bias"} | _ROPE,
    "starcoder2": _COMMON | {"num_key_value_heads", "head_dim", "norm_epsilon", "use_bias", "sliding_window"}
    | _ROPE,
    "cohere": _COMMON | {"num_key_value_heads", "head_dim", "layer_norm_eps", "logit_scale", "attention_bias",
                         "use_qk_norm"} | _ROPE,
    "cohere2": _COMMON | {"num_key_value_heads", "head_dim", "layer_norm_eps", "logit_scale", "attention_bias",
                          "sliding_window", "sliding_window_pattern", "layer_types"} | _ROPE,
}
_OFF = {"use_qk_norm": (None, False)}
_TIE_DEFAULT = {"gpt_neox": False, "falcon": True, "stablelm": False, "nemotron": False, "starcoder2": True,
                "cohere": True, "cohere2": True}

_relu2 = lambda x: np.maximum(x, 0.0) ** 2  # noqa: E731 (ACT2FN["relu2"])


def _act(name):
    return _relu2 if name == "relu2" else ref._act(name)


def _pos_int(cfg, key, default=None):
    v = cfg.get(key)
    if v is None:
        v = default
    if v is None:
        raise ValueError(f"config key {key!r} is required by the reference")
    if not isinstance(v, int) or isinstance(v, bool) or v < 1:
        raise ValueError(f"config {key}={v!r} must be a positive integer")
    return v


def _check_keys(cfg, family):
    if family not in FAMILIES:
        raise ValueError(f"unknown family {family!r}")
    unknown = sorted(k for k in set(cfg) - _HARMLESS - _KNOWN[family]
                     if not (k in _OFF and cfg[k] in _OFF[k]))
    if unknown:
        raise ValueError(f"{family}: config keys not supported by the reference: {unknown}")
    if cfg.get("model_type") != family:
        raise ValueError(f"config model_type {cfg.get('model_type')!r} is not {family!r}")
    archs = cfg.get("architectures") or []
    if archs and archs[0] != FAMILIES[family]:
        raise ValueError(f"architectures[0] {archs[0]!r} is not {FAMILIES[family]}")


def _rope(rope_dict, theta, prf, head_dim, max_pos):
    """A hf_reference.Rope from the config's rope dict (rope_scaling / rope_parameters), the base and the rotary
    fraction."""
    rp = dict(rope_dict or {})
    if "type" in rp and "rope_type" not in rp:
        rp["rope_type"] = rp.pop("type")
    rp.setdefault("rope_type", "default")
    rp["rope_theta"] = theta
    rp.pop("partial_rotary_factor", None)
    if not 0.0 < prf <= 1.0:
        raise ValueError(f"rotary fraction {prf} out of range")
    rp = ref._rope_parameters({"rope_parameters": rp, "max_position_embeddings": max_pos}, "llama")
    rp["partial_rotary_factor"] = prf
    r = ref.Rope(rp, head_dim, max_pos)
    if r.dim < 2 or r.dim > head_dim:
        raise ValueError(f"rotary dim {r.dim} invalid for head_dim {head_dim}")
    return r


def _bf16(x):
    """Rounds float32 values to bfloat16 (round to nearest even), as torch's .bfloat16()."""
    u = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    u = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) << 16
    return u.astype(np.uint32).view(np.float32)


def alibi_slopes(heads):
    """build_alibi_tensor's slopes (float32)."""
    closest = 2 ** math.floor(math.log2(heads))
    base = np.float32(2 ** (-(2 ** -(math.log2(closest) - 3))))
    slopes = [np.float32(float(base) ** k) for k in range(1, closest + 1)]
    if closest != heads:
        extra = np.float32(2 ** (-(2 ** -(math.log2(2 * closest) - 3))))
        remaining = min(closest, heads - closest)
        slopes += [np.float32(float(extra) ** k) for k in range(1, 1 + 2 * remaining, 2)]
    return np.asarray(slopes, dtype=np.float32)


class _Spec:
    pass


def _spec(cfg, family):
    _check_keys(cfg, family)
    s = _Spec()
    s.family = family
    s.vocab = _pos_int(cfg, "vocab_size")
    if family == "falcon" and cfg.get("n_embed") is not None:
        # FalconConfig.__post_init__: the legacy n_embed kwarg wins over hidden_size.
        s.hidden = _pos_int(cfg, "n_embed")
    else:
        s.hidden = _pos_int(cfg, "hidden_size")
    s.n_layers = _pos_int(cfg, "num_hidden_layers")
    s.n_heads = _pos_int(cfg, "num_attention_heads")
    tied = cfg.get("tie_word_embeddings")
    s.tied = _TIE_DEFAULT[family] if tied is None else bool(tied)
    mpe = cfg.get("max_position_embeddings")
    s.logit_scale = None
    s.alibi = False
    s.interleaved = False
    s.qk_norm = None          # None, "per_head" (stablelm norms.N), "2d" (cohere [heads, hd])
    s.windows = [None] * s.n_layers
    s.norm_bias = True
    s.one_plus = False
    rope_dict = cfg.get("rope_scaling") or cfg.get("rope_parameters")
    if family == "gpt_neox":
        s.prefix = ("gpt_neox.embed_in", "gpt_neox.layers.", "gpt_neox.final_layer_norm", "embed_out")
        s.attn_at, s.out_name = "attention.", "dense"
        s.inter = _pos_int(cfg, "intermediate_size")
        s.act = _act(cfg.get("hidden_act", "gelu"))
        s.eps = float(cfg.get("layer_norm_eps", 1e-5))
        if s.hidden % s.n_heads:
            raise ValueError("gpt_neox: hidden_size not divisible by num_attention_heads")
        s.head_dim = s.hidden // s.n_heads
        s.n_kv = s.n_heads
        s.layout = "per_head3"
        ab = bool(cfg.get("attention_bias", True))
        s.qkv_bias = s.o_bias = ab
        s.mlp_bias, s.gated, s.mlp_names = True, False, ("dense_h_to_4h", "dense_4h_to_h")
        parallel = bool(cfg.get("use_parallel_residual", True))
        s.block = "parallel" if parallel else "sequential"
        s.norms = ("input_layernorm", "post_attention_layernorm")
        # convert_rope_params_to_dict: theta from the dict, else rotary_emb_base; the fraction from rotary_pct
        # only (default 0.25).
        theta = (rope_dict or {}).get("rope_theta", cfg.get("rotary_emb_base", 10000.0))
        prf = float((rope_dict or {}).get("partial_rotary_factor", cfg.get("rotary_pct", 0.25)))
        rd = int(s.head_dim * prf)
        if rd % 2:
            raise ValueError("gpt_neox: odd rotary dims")
        s.ropes = [_rope(rope_dict, theta, prf, s.head_dim, mpe) if rd else None] * s.n_layers
    elif family == "falcon":
        s.prefix = ("transformer.word_embeddings", "transformer.h.", "transformer.ln_f", "lm_head")
        s.attn_at, s.out_name = "self_attention.", "dense"
        if s.hidden % s.n_heads:
            raise ValueError("falcon: hidden_size not divisible by num_attention_heads")
        s.head_dim = s.hidden // s.n_heads
        s.inter = cfg.get("ffn_hidden_size") or 4 * s.hidden
        s.act = _act(cfg.get("activation", "gelu"))
        s.eps = float(cfg.get("layer_norm_epsilon", 1e-5))
        new = bool(cfg.get("new_decoder_architecture", False))
        mq = bool(cfg.get("multi_query", True))
        kv = cfg.get("num_kv_heads") or s.n_heads
        parallel = bool(cfg.get("parallel_attn", True))
        n_ln = cfg.get("num_ln_in_parallel_attn")
        if new:
            if n_ln is None:
                n_ln = 2
            if not parallel:
                raise ValueError("falcon: new_decoder_architecture without parallel_attn fails in HF")
            s.layout, s.n_kv = "grouped", kv
        elif mq:
            s.layout, s.n_kv = "multi_query", 1
        else:
            if kv != s.n_heads:
                raise ValueError("falcon: num_kv_heads != heads without new_decoder_architecture / multi_query "
                                 "fails in HF")
            s.layout, s.n_kv = "per_head3", s.n_heads
        if s.n_heads % s.n_kv:
            raise ValueError("falcon: heads not divisible by num_kv_heads")
        if not parallel:
            s.block, s.norms = "sequential", ("input_layernorm", "post_attention_layernorm")
        elif new and n_ln == 2:
            s.block, s.norms = "parallel", ("ln_attn", "ln_mlp")
        else:
            if n_ln == 2:
                raise ValueError("falcon: num_ln_in_parallel_attn 2 without new_decoder_architecture fails in HF")
            s.block, s.norms = "parallel", ("input_layernorm",)
        b = bool(cfg.get("bias", False))
        s.qkv_bias = s.o_bias = s.mlp_bias = b
        s.gated, s.mlp_names = False, ("dense_h_to_4h", "dense_4h_to_h")
        s.alibi = bool(cfg.get("alibi", False))
        impl = cfg.get("_attn_implementation", cfg.get("attn_implementation"))
        if s.alibi and impl not in (None, "sdpa", "eager"):
            raise ValueError(f"falcon: alibi with attn_implementation {impl!r} is not run by HF")
        # The eager attention adds ALiBi to the raw scores and once more through the mask; sdpa once.
        s.alibi_times = 1.0 if impl == "sdpa" else 2.0
        if s.alibi:
            if rope_dict:
                raise ValueError("falcon: rope_scaling with alibi")
            s.ropes = [None] * s.n_layers
        else:
            theta = (rope_dict or {}).get("rope_theta", cfg.get("rope_theta", 10000.0))
            s.ropes = [_rope(rope_dict, theta, 1.0, s.head_dim, mpe)] * s.n_layers
    else:
        s.prefix = ("model.embed_tokens", "model.layers.", "model.norm", "lm_head")
        s.attn_at, s.out_name = "self_attn.", "o_proj"
        s.inter = _pos_int(cfg, "intermediate_size")
        default_kv = {"stablelm": 32, "starcoder2": 2}.get(family, s.n_heads)
        s.n_kv = _pos_int(cfg, "num_key_value_heads", default_kv)
        s.layout = "separate"
        if family == "cohere2":
            # Cohere2Config.__post_init__ sets head_dim = hidden_size // num_attention_heads.
            s.head_dim = s.hidden // s.n_heads
        elif family == "stablelm":
            s.head_dim = s.hidden // s.n_heads
        else:
            s.head_dim = _pos_int(cfg, "head_dim", s.hidden // s.n_heads)
        if s.n_heads % s.n_kv:
            raise ValueError("num_attention_heads not divisible by num_key_value_heads")
        default_theta = 500000.0 if family == "cohere" else 10000.0
        theta = (rope_dict or {}).get("rope_theta", cfg.get("rope_theta", default_theta))
        prf_default = {"stablelm": 0.25, "nemotron": 0.5}.get(family, 1.0)
        prf = cfg.get("partial_rotary_factor")
        if prf is None:
            prf = (rope_dict or {}).get("partial_rotary_factor", prf_default)
        prf = float(prf)
        rope = _rope(rope_dict, theta, prf, s.head_dim, mpe)
        s.ropes = [rope] * s.n_layers
        if family == "stablelm":
            s.act = _act(cfg.get("hidden_act", "silu"))
            s.eps = float(cfg.get("layer_norm_eps", 1e-5))
            s.qkv_bias, s.o_bias = bool(cfg.get("use_qkv_bias", False)), False
            s.mlp_bias, s.gated, s.mlp_names = False, True, ("gate_proj", "up_proj", "down_proj")
            parallel = bool(cfg.get("use_parallel_residual", False))
            s.block = "parallel" if parallel else "sequential"
            s.norms = ("input_layernorm",) if parallel else ("input_layernorm", "post_attention_layernorm")
            s.qk_norm = "per_head" if cfg.get("qk_layernorm", False) else None
        elif family == "nemotron":
            s.act = _act(cfg.get("hidden_act", "relu2"))
            s.eps = float(cfg.get("norm_eps", 1e-5))
            ab = bool(cfg.get("attention_bias", False))
            s.qkv_bias = s.o_bias = ab
            s.mlp_bias, s.gated, s.mlp_names = bool(cfg.get("mlp_bias", False)), False, ("up_proj", "down_proj")
            s.block, s.norms = "sequential", ("input_layernorm", "post_attention_layernorm")
            s.one_plus = True
        elif family == "starcoder2":
            s.act = _act(cfg.get("hidden_act", "gelu_pytorch_tanh"))
            s.eps = float(cfg.get("norm_epsilon", 1e-5))
            ub = bool(cfg.get("use_bias", True))
            s.qkv_bias = s.o_bias = s.mlp_bias = ub
            s.gated, s.mlp_names = False, ("c_fc", "c_proj")
            s.block, s.norms = "sequential", ("input_layernorm", "post_attention_layernorm")
            w = cfg.get("sliding_window")
            s.windows = [w] * s.n_layers
        else:  # cohere, cohere2
            s.act = _act(cfg.get("hidden_act", "silu"))
            s.eps = float(cfg.get("layer_norm_eps", 1e-5))
            ab = bool(cfg.get("attention_bias", False))
            s.qkv_bias = s.o_bias = ab
            s.mlp_bias, s.gated, s.mlp_names = False, True, ("gate_proj", "up_proj", "down_proj")
            s.block, s.norms = "parallel", ("input_layernorm",)
            s.norm_bias = False
            s.interleaved = True
            s.logit_scale = float(cfg.get("logit_scale", 0.0625))
            if family == "cohere":
                s.qk_norm = "2d" if cfg.get("use_qk_norm", False) else None
            else:
                types = cfg.get("layer_types")
                if types is None:
                    pattern = _pos_int(cfg, "sliding_window_pattern", 4)
                    types = ["sliding_attention" if (i + 1) % pattern else "full_attention"
                             for i in range(s.n_layers)]
                if len(types) != s.n_layers or any(t not in ("sliding_attention", "full_attention") for t in types):
                    raise ValueError(f"cohere2: layer_types {types} invalid")
                w = cfg.get("sliding_window", 4096)
                s.windows = [w if t == "sliding_attention" else None for t in types]
                # Cohere2Attention rotates only where the layer has a window.
                s.ropes = [rope if wi is not None else None for wi in s.windows]
    for w in s.windows:
        if w is not None and (not isinstance(w, int) or w < 1):
            raise ValueError(f"sliding_window {w!r} invalid")
    return s


def _shapes(s):
    D, H, KV, hd, I = s.hidden, s.n_heads, s.n_kv, s.head_dim, s.inter
    embed, layers, final, head = s.prefix
    w = {embed + ".weight": (s.vocab, D), final + ".weight": (D,)}
    if s.norm_bias:
        w[final + ".bias"] = (D,)
    if not s.tied:
        w[head + ".weight"] = (s.vocab, D)
    for i in range(s.n_layers):
        p = f"{layers}{i}."
        for n in s.norms:
            w[p + n + ".weight"] = (D,)
            if s.norm_bias:
                w[p + n + ".bias"] = (D,)
        a = p + s.attn_at
        if s.layout == "separate":
            for name, out in (("q_proj", H * hd), ("k_proj", KV * hd), ("v_proj", KV * hd)):
                w[a + name + ".weight"] = (out, D)
                if s.qkv_bias:
                    w[a + name + ".bias"] = (out,)
        else:
            out = (H + 2 * KV) * hd
            w[a + "query_key_value.weight"] = (out, D)
            if s.qkv_bias:
                w[a + "query_key_value.bias"] = (out,)
        w[a + s.out_name + ".weight"] = (D, H * hd)
        if s.o_bias:
            w[a + s.out_name + ".bias"] = (D,)
        if s.qk_norm == "per_head":
            for n in range(H):
                w[a + f"q_layernorm.norms.{n}.weight"] = (hd,)
            for n in range(KV):
                w[a + f"k_layernorm.norms.{n}.weight"] = (hd,)
        elif s.qk_norm == "2d":
            w[a + "q_norm.weight"] = (H, hd)
            w[a + "k_norm.weight"] = (KV, hd)
        m = p + "mlp."
        names = s.mlp_names
        ins = [(names[0], I, D)] + ([(names[1], I, D)] if s.gated else [])
        for name, o, i_ in ins + [(names[-1], D, I)]:
            w[m + name + ".weight"] = (o, i_)
            if s.mlp_bias:
                w[m + name + ".bias"] = (o,)
    return w


_INIT_FAMILY = [None]


def expected_weight_shapes(cfg, family):
    _INIT_FAMILY[0] = family
    return _shapes(_spec(cfg, family))


def weight_init(name, shape):
    """Random-weight scheme for make_case: Nemotron's (1 + w) norms store w near 0; per-head / 2-D q/k norm
    weights are plain scales."""
    if _INIT_FAMILY[0] == "nemotron" and name.endswith(("layernorm.weight", "model.norm.weight")):
        return ("uniform", (-0.2, 0.2))
    if ".norms." in name or name.endswith(("q_norm.weight", "k_norm.weight")):
        return ("norm", None)
    return None


class Model(ref.GreedyMixin):
    def __init__(self, cfg, weights, family):
        self.family = family
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
        s, w = self.spec, self.w
        g = w[name + ".weight"]
        b = w.get(name + ".bias", 0.0)
        return ref._layer_norm(x, g + 1.0 if s.one_plus else g, b, s.eps)

    def _linear(self, x, name, bias):
        y = x @ self.w[name + ".weight"].T
        return y + self.w[name + ".bias"] if bias else y

    def _qkv(self, h, a):
        s = self.spec
        B, S, _ = h.shape
        H, KV, hd = s.n_heads, s.n_kv, s.head_dim
        if s.layout == "separate":
            q = self._linear(h, a + "q_proj", s.qkv_bias).reshape(B, S, H, hd)
            k = self._linear(h, a + "k_proj", s.qkv_bias).reshape(B, S, KV, hd)
            v = self._linear(h, a + "v_proj", s.qkv_bias).reshape(B, S, KV, hd)
            return q, k, v
        f = self._linear(h, a + "query_key_value", s.qkv_bias)
        if s.layout == "per_head3":        # GPT-NeoX, Falcon (RW): [heads, 3, hd]
            f = f.reshape(B, S, H, 3, hd)
            return f[..., 0, :], f[..., 1, :], f[..., 2, :]
        if s.layout == "multi_query":      # Falcon-7B: [heads + 2, hd]
            f = f.reshape(B, S, H + 2, hd)
            return f[:, :, :H], f[:, :, H:H + 1], f[:, :, H + 1:]
        g = H // KV                        # Falcon new architecture: [kv, g + 2, hd]
        f = f.reshape(B, S, KV, g + 2, hd)
        return f[:, :, :, :g].reshape(B, S, H, hd), f[:, :, :, g], f[:, :, :, g + 1]

    def _qk_norm(self, t, a, which, n):
        s, w = self.spec, self.w
        if s.qk_norm == "per_head":        # StableLmLayerNormPerHead: one bias-free LayerNorm per head
            g = np.stack([w[a + f"{which}_layernorm.norms.{i}.weight"] for i in range(n)])
        else:                              # CohereLayerNorm over head_dim, weight [heads, hd]
            g = w[a + f"{which}_norm.weight"]
        return ref._layer_norm(t, g, 0.0, s.eps)

    def _rotate(self, t, rope, positions):
        s = self.spec
        if not s.interleaved:
            cos, sin = rope.cos_sin(positions)
            return ref.Rope.apply(t, cos, sin)
        # Cohere: cos/sin repeat_interleave'd, rotate_half on pairs (x[2i], x[2i+1]).
        inv, scale = rope.inv_freq(int(np.max(positions)) + 1)
        ang = positions[..., None].astype(np.float64) * inv
        cos = (np.repeat(np.cos(ang), 2, axis=-1) * scale)[:, :, None, :]
        sin = (np.repeat(np.sin(ang), 2, axis=-1) * scale)[:, :, None, :]
        d = cos.shape[-1]
        tr, tp = t[..., :d], t[..., d:]
        x1, x2 = tr[..., 0::2], tr[..., 1::2]
        rot = np.stack([-x2, x1], axis=-1).reshape(tr.shape)
        return np.concatenate([tr * cos + rot * sin, tp], axis=-1)

    def _attend(self, q, k, v, window):
        s = self.spec
        B, S, H, hd = q.shape
        rep = H // k.shape[2]
        k = np.repeat(k, rep, axis=2)
        v = np.repeat(v, rep, axis=2)
        scores = np.einsum("bqhd,bkhd->bhqk", q, k)
        qi = np.arange(S)[:, None]
        ki = np.arange(S)[None, :]
        vis = ki <= qi
        if window is not None:
            vis &= (qi - ki) < window
        if s.alibi:
            # build_alibi_tensor: slopes in bfloat16 times the key positions, the product in bfloat16; the sdpa
            # path adds it through the mask divided by sqrt(hd); the eager path adds it to the raw scores before
            # the 1/sqrt(hd) scale, and the mask carries it once more.
            pos = np.arange(S, dtype=np.float32)
            alibi = _bf16(_bf16(alibi_slopes(H))[:, None] * pos[None, :]).astype(np.float64)  # [H, T]
            a = alibi[None, :, None, :]
            scores = scores / math.sqrt(hd) + s.alibi_times * a / math.sqrt(hd)
        else:
            scores = scores / math.sqrt(hd)
        scores = np.where(vis[None, None], scores, -np.inf)
        p = ref._softmax(scores, axis=-1)
        return np.einsum("bhqk,bkhd->bqhd", p, v).reshape(B, S, H * hd)

    def _mlp(self, h, m):
        s = self.spec
        n = s.mlp_names
        if s.gated:
            u = s.act(self._linear(h, m + n[0], s.mlp_bias)) * self._linear(h, m + n[1], s.mlp_bias)
        else:
            u = s.act(self._linear(h, m + n[0], s.mlp_bias))
        return self._linear(u, m + n[-1], s.mlp_bias)

    def forward(self, ids, positions=None):
        s, w = self.spec, self.w
        ids, positions = ref.prepare_inputs(ids, positions, s.vocab)
        embed, layers, final, head = s.prefix
        x = w[embed + ".weight"][ids]
        for i in range(s.n_layers):
            p = f"{layers}{i}."
            a = p + s.attn_at
            h = self._norm(x, p + s.norms[0])
            q, k, v = self._qkv(h, a)
            if s.qk_norm:
                q = self._qk_norm(q, a, "q", s.n_heads)
                k = self._qk_norm(k, a, "k", s.n_kv)
            if s.ropes[i] is not None:
                q = self._rotate(q, s.ropes[i], positions)
                k = self._rotate(k, s.ropes[i], positions)
            attn = self._linear(self._attend(q, k, v, s.windows[i]), a + s.out_name, s.o_bias)
            if s.block == "parallel":
                hm = self._norm(x, p + s.norms[1]) if len(s.norms) > 1 else h
                x = x + attn + self._mlp(hm, p + "mlp.")
            else:
                x = x + attn
                x = x + self._mlp(self._norm(x, p + s.norms[1]), p + "mlp.")
        x = self._norm(x, final)
        logits = x @ (w[embed + ".weight"] if s.tied else w[head + ".weight"]).T
        if s.logit_scale is not None:
            logits = logits * s.logit_scale
        return logits
