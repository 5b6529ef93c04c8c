"""DeepSeek-V4 (DeepseekV4ForCausalLM): numpy float64 reference of Hugging Face transformers 5.x's
modeling_deepseek_v4.py / configuration_deepseek_v4.py (uncached forward), with the reference checkpoint
names the hub ships (embed.weight, layers.N.attn.wq_a.weight, layers.N.ffn.experts.E.w1.weight,
hc_head_fn, head.weight, ...).

- Config: layer_types, else from legacy compress_ratios (0 -> sliding, 4 -> CSA, 128 -> HCA), else two HCA
  layers then CSA / HCA alternating; the rates of compress_rates (default CSA 4, HCA 128) with the legacy
  compress_rate_csa / compress_rate_hca replacing its entries; mlp_layer_types (hash_moe / moe), else
  num_hash_layers (default 3) hash layers; mlp_bias: the shared expert's biases (LlamaMLP; the routed
  experts have none);
  RoPE "main" (rope_theta, no scaling) for sliding layers, "compress" (compress_rope_theta with the
  config's rope_scaling; YaRN with attention_factor 1.0) for CSA/HCA layers and their compressors and
  indexer; rope on the last qk_rope_head_dim dims, interleaved pairs.
- Hyper-connections (hc_mult streams): weightless RMSNorm (rms_norm_eps) of the flattened streams, fn
  projection, pre = sigmoid + hc_eps, post = 2 sigmoid, comb = softmax(rows) + hc_eps then a column
  normalisation and hc_sinkhorn_iters - 1 (row, column) rounds; X' = post y + comb^T X.
- Attention: q = per-head weightless RMSNorm of wq_b(q_norm(wq_a x)); one K = V head kv_norm(wkv x);
  sliding-window causal mask (q - k < window); CSA/HCA append compressed entries (softmax(gate + ape)
  pooling of windows of m tokens; CSA overlaps the previous window's first channel half) rotated at the
  window start, visible iff index < (pos + 1) // m; CSA keeps the indexer's top index_topk of
  sum_h w_h relu(q_h . k) * d_I^-0.5 (w = weights_proj x * n_I^-0.5); per-head sinks; the output is
  rotated back (-sin) and projected by the grouped wo_a then wo_b.
- MoE: scores = scoring_func(gate x) (sqrt(softplus) by default); hash layers take tid2eid[token], the
  others top-k of scores + bias; weights renormalised (+1e-20) and scaled; experts and the shared
  expert are SwiGLU with min(gate, limit) and clamp(up, -limit, limit).
- Head: hc_head pre weights (sigmoid(hc_scale mix + hc_base) + hc_eps), norm, head.
"""
import math

import numpy as np

import hf_reference  # loads this module while defining its plugins; GreedyMixin exists by then

FAMILIES = {"deepseek_v4": "DeepseekV4ForCausalLM"}

_TYPE_OF_RATIO = {0: "sliding_attention", 4: "compressed_sparse_attention",
                  128: "heavily_compressed_attention"}


class Spec:
    def __init__(self, c):
        known = {
            "architectures", "model_type", "attention_bias", "bos_token_id", "eos_token_id", "pad_token_id",
            "compress_ratios", "compress_rates", "compress_rope_theta", "hc_eps", "hc_mult",
            "hc_sinkhorn_iters", "head_dim", "hidden_act", "hidden_size", "index_head_dim",
            "index_n_heads", "index_topk", "max_position_embeddings", "moe_intermediate_size",
            "n_routed_experts", "n_shared_experts", "norm_topk_prob", "num_attention_heads",
            "num_experts_per_tok", "num_hash_layers", "num_hidden_layers", "num_key_value_heads",
            "num_nextn_predict_layers", "o_groups", "o_lora_rank", "q_lora_rank", "qk_rope_head_dim",
            "rms_norm_eps", "rope_scaling", "rope_theta", "routed_scaling_factor", "scoring_func",
            "sliding_window", "swiglu_limit", "tie_word_embeddings", "topk_method", "torch_dtype",
            "vocab_size", "initializer_range", "attention_dropout", "use_cache", "transformers_version",
            "layer_types", "mlp_layer_types", "mlp_bias", "compress_rate_csa", "compress_rate_hca"}
        unknown = set(c) - known
        if unknown:
            raise ValueError(f"deepseek_v4: unsupported config keys {sorted(unknown)}")
        self.vocab = c["vocab_size"]
        self.D = c["hidden_size"]
        self.L = c["num_hidden_layers"]
        self.H = c["num_attention_heads"]
        if c.get("num_key_value_heads", 1) != 1:
            raise ValueError("deepseek_v4: one shared key/value head")
        if c.get("tie_word_embeddings", False):
            raise ValueError("deepseek_v4: untied head")
        self.d = c.get("head_dim", 512)
        self.r = c.get("qk_rope_head_dim", self.d // 8)
        self.q_rank = c["q_lora_rank"]
        self.groups = c["o_groups"]
        self.o_rank = c["o_lora_rank"]
        self.window = c.get("sliding_window", 128)
        self.eps = c.get("rms_norm_eps", 1e-6)
        rates = c.get("compress_rates") or {}
        csa = rates.get("compressed_sparse_attention", 4)
        hca = rates.get("heavily_compressed_attention", 128)
        if c.get("compress_rate_csa") is not None:
            csa = c["compress_rate_csa"]
        if c.get("compress_rate_hca") is not None:
            hca = c["compress_rate_hca"]
        if c.get("layer_types") is not None:
            self.kind = list(c["layer_types"][: self.L])
            if len(self.kind) != self.L or any(k not in _TYPE_OF_RATIO.values() for k in self.kind):
                raise ValueError(f"deepseek_v4: layer_types {c['layer_types']} invalid")
        elif c.get("compress_ratios") is not None:
            self.kind = [_TYPE_OF_RATIO[x] for x in c["compress_ratios"][: self.L]]
        else:
            self.kind = (["heavily_compressed_attention"] * min(self.L, 2)
                         + ["compressed_sparse_attention" if i % 2 else "heavily_compressed_attention"
                            for i in range(max(self.L - 2, 0))])
        self.m = [csa if k == "compressed_sparse_attention" else hca if k == "heavily_compressed_attention"
                  else 0 for k in self.kind]
        if c.get("mlp_layer_types") is not None:
            mt = list(c["mlp_layer_types"][: self.L])
            if len(mt) != self.L or any(t not in ("hash_moe", "moe") for t in mt):
                raise ValueError(f"deepseek_v4: mlp_layer_types {c['mlp_layer_types']} invalid")
            self.hash = [t == "hash_moe" for t in mt]
        else:
            self.hash = [i < c.get("num_hash_layers", 3) for i in range(self.L)]
        self.mlp_bias = bool(c.get("mlp_bias", False))
        self.nI = c.get("index_n_heads", 64)
        self.dI = c.get("index_head_dim", 128)
        self.topk_I = c.get("index_topk", 512)
        self.n = c.get("hc_mult", 4)
        self.iters = c.get("hc_sinkhorn_iters", 20)
        self.hc_eps = c.get("hc_eps", 1e-6)
        self.E = c["n_routed_experts"]
        self.k = c["num_experts_per_tok"]
        self.I = c["moe_intermediate_size"]
        if c.get("n_shared_experts", 1) != 1:
            raise ValueError("deepseek_v4: one shared expert")
        self.scoring = c.get("scoring_func", "sqrtsoftplus")
        if self.scoring not in ("sqrtsoftplus", "sigmoid"):
            raise ValueError(f"deepseek_v4: scoring_func {self.scoring}")
        self.scale = c.get("routed_scaling_factor", 1.5)
        self.limit = c.get("swiglu_limit", 10.0)
        if c.get("hidden_act", "silu") != "silu":
            raise ValueError("deepseek_v4: silu only")
        # RoPE inverse frequencies over the rope dims.
        self.main_inv = 1.0 / (c.get("rope_theta", 10000.0) ** (np.arange(0, self.r, 2) / self.r))
        base = c.get("compress_rope_theta", 160000.0)
        rs = c.get("rope_scaling")
        rtype = (rs or {}).get("rope_type", (rs or {}).get("type", "default"))
        if rtype == "yarn":
            orig = rs["original_max_position_embeddings"]
            factor = rs.get("factor") or c["max_position_embeddings"] / orig
            self.comp_inv = _yarn_inv_freq(base, self.r, factor, orig, rs.get("beta_fast") or 32,
                                           rs.get("beta_slow") or 1, rs.get("truncate", True))
        elif rtype == "default":
            self.comp_inv = 1.0 / (base ** (np.arange(0, self.r, 2) / self.r))
        else:
            raise ValueError(f"deepseek_v4: rope_scaling type {rtype}")


def _yarn_inv_freq(base, dim, factor, orig, beta_fast, beta_slow, truncate):
    def corr(rot):
        return dim * math.log(orig / (rot * 2 * math.pi)) / (2 * math.log(base))
    lo, hi = corr(beta_fast), corr(beta_slow)
    if truncate:
        lo, hi = math.floor(lo), math.ceil(hi)
    lo, hi = max(lo, 0), min(hi, dim - 1)
    if lo == hi:
        hi += 0.001
    pos = base ** (np.arange(0, dim, 2) / dim)
    ramp = np.clip((np.arange(dim // 2) - lo) / (hi - lo), 0, 1)
    extrap = 1 - ramp
    return (1 / (factor * pos)) * (1 - extrap) + (1 / pos) * extrap


def _rms(x, w, eps):
    y = x / np.sqrt((x * x).mean(-1, keepdims=True) + eps)
    return y * w if w is not None else y


def _rope_tail(x, pos, inv, sign=1.0):
    """Interleaved RoPE on the last 2 len(inv) dims of x [B, S, h, d]; pos [B, S]."""
    r = 2 * len(inv)
    ang = pos[..., None].astype(np.float64) * inv
    c, s = np.cos(ang)[:, :, None], sign * np.sin(ang)[:, :, None]
    rp = x[..., -r:]
    x1, x2 = rp[..., 0::2], rp[..., 1::2]
    out = np.stack([x1 * c - x2 * s, x2 * c + x1 * s], -1).reshape(rp.shape)
    return np.concatenate([x[..., :-r], out], -1)


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


def expected_weight_shapes(cfg, family):
    s = Spec(cfg)
    _CFG_OF["experts"] = s.E  # tid2eid values for weight_init (make_case calls this first)
    D, n, d = s.D, s.n, s.d
    w = {"embed.weight": (s.vocab, D), "head.weight": (s.vocab, D), "norm.weight": (D,),
         "hc_head_fn": (n, n * D), "hc_head_base": (n,), "hc_head_scale": (1,)}
    for i in range(s.L):
        p = f"layers.{i}."
        w[p + "attn_norm.weight"] = (D,)
        w[p + "ffn_norm.weight"] = (D,)
        for hc in ("hc_attn", "hc_ffn"):
            w[p + hc + "_fn"] = ((2 + n) * n, n * D)
            w[p + hc + "_base"] = ((2 + n) * n,)
            w[p + hc + "_scale"] = (3,)
        a = p + "attn."
        w[a + "attn_sink"] = (s.H,)
        w[a + "wq_a.weight"] = (s.q_rank, D)
        w[a + "q_norm.weight"] = (s.q_rank,)
        w[a + "wq_b.weight"] = (s.H * d, s.q_rank)
        w[a + "wkv.weight"] = (d, D)
        w[a + "kv_norm.weight"] = (d,)
        w[a + "wo_a.weight"] = (s.groups * s.o_rank, s.H * d // s.groups)
        w[a + "wo_b.weight"] = (D, s.groups * s.o_rank)
        m = s.m[i]
        if m:
            csa = s.kind[i] == "compressed_sparse_attention"
            c = 2 if csa else 1
            w[a + "compressor.wkv.weight"] = (c * d, D)
            w[a + "compressor.wgate.weight"] = (c * d, D)
            w[a + "compressor.ape"] = (m, c * d)
            w[a + "compressor.norm.weight"] = (d,)
            if csa:
                x = a + "indexer."
                w[x + "wq_b.weight"] = (s.nI * s.dI, s.q_rank)
                w[x + "weights_proj.weight"] = (s.nI, D)
                w[x + "compressor.wkv.weight"] = (2 * s.dI, D)
                w[x + "compressor.wgate.weight"] = (2 * s.dI, D)
                w[x + "compressor.ape"] = (m, 2 * s.dI)
                w[x + "compressor.norm.weight"] = (s.dI,)
        f = p + "ffn."
        w[f + "gate.weight"] = (s.E, D)
        if s.hash[i]:
            w[f + "gate.tid2eid"] = (s.vocab, s.k)
        else:
            w[f + "gate.bias"] = (s.E,)
        for e in range(s.E):
            w[f + f"experts.{e}.w1.weight"] = (s.I, D)
            w[f + f"experts.{e}.w3.weight"] = (s.I, D)
            w[f + f"experts.{e}.w2.weight"] = (D, s.I)
        w[f + "shared_experts.w1.weight"] = (s.I, D)
        w[f + "shared_experts.w3.weight"] = (s.I, D)
        w[f + "shared_experts.w2.weight"] = (D, s.I)
        if s.mlp_bias:
            w[f + "shared_experts.w1.bias"] = (s.I,)
            w[f + "shared_experts.w3.bias"] = (s.I,)
            w[f + "shared_experts.w2.bias"] = (D,)
    return w


_CFG_OF = {"experts": 8}


def weight_init(name, shape):
    """Scales for generated cases (make_case.py): spread logits, keep routing and top-k decisive."""
    last = name.split(".")[-1]
    if last == "tid2eid":
        return ("randint", (0, _CFG_OF.get("experts", 8)))
    if last.endswith("_base") or last == "bias":
        return ("normal", 0.3)
    if last.endswith("_scale"):
        return ("uniform", (0.5, 1.5))
    if last in ("attn_sink", "ape"):
        return ("normal", 0.5)
    if name == "embed.weight":
        return ("normal", 1.0)
    if name == "head.weight":
        return ("normal", 2.0 / math.sqrt(shape[1]))
    if last.endswith("_fn"):
        return ("normal", 1.0 / math.sqrt(shape[1]))
    return None


class Model(hf_reference.GreedyMixin):
    def __init__(self, cfg, weights, family):
        self.spec = Spec(cfg)
        _CFG_OF["experts"] = self.spec.E
        want = expected_weight_shapes(cfg, family)
        missing = sorted(set(want) - set(weights))
        extra = sorted(set(weights) - set(want))
        bad = sorted(k for k in want if k in weights and tuple(weights[k].shape) != tuple(want[k]))
        if missing or extra or bad:
            raise ValueError(f"deepseek_v4 checkpoint: missing {missing[:5]}, unexpected {extra[:5]}, "
                             f"mis-shaped {bad[:5]}")
        self.w = {k: (v if v.dtype == np.int64 else v.astype(np.float64)) for k, v in weights.items()}
        self.router_gaps = []

    # -- pieces ---------------------------------------------------------------------------------------
    def _hc(self, X, p):
        s, w = self.spec, self.w
        n = s.n
        B, S = X.shape[:2]
        mix = _rms(X.reshape(B, S, -1), None, s.eps) @ w[p + "_fn"].T
        base, sc = w[p + "_base"], w[p + "_scale"]
        pre = _sigmoid(mix[..., :n] * sc[0] + base[:n]) + s.hc_eps
        post = 2 * _sigmoid(mix[..., n:2 * n] * sc[1] + base[n:2 * n])
        cm = mix[..., 2 * n:].reshape(B, S, n, n) * sc[2] + base[2 * n:].reshape(n, n)
        cm = np.exp(cm - cm.max(-1, keepdims=True))
        cm = cm / cm.sum(-1, keepdims=True) + s.hc_eps
        cm = cm / (cm.sum(-2, keepdims=True) + s.hc_eps)
        for _ in range(s.iters - 1):
            cm = cm / (cm.sum(-1, keepdims=True) + s.hc_eps)
            cm = cm / (cm.sum(-2, keepdims=True) + s.hc_eps)
        return post, cm, (pre[..., None] * X).sum(2)

    def _compress(self, x, p, m, d, overlap):
        """Entries of the complete windows of m tokens [B, S // m, d], rotated at the window starts."""
        w, s = self.w, self.spec
        B, S, _ = x.shape
        nw = S // m
        if nw == 0:
            return np.zeros((B, 0, d))
        kv = (x @ w[p + ".wkv.weight"].T)[:, :nw * m].reshape(B, nw, m, -1)
        g = (x @ w[p + ".wgate.weight"].T)[:, :nw * m].reshape(B, nw, m, -1) + w[p + ".ape"]
        if overlap:
            nk, ng = np.zeros((B, nw, 2 * m, d)), np.full((B, nw, 2 * m, d), -np.inf)
            nk[:, :, m:], ng[:, :, m:] = kv[..., d:], g[..., d:]
            nk[:, 1:, :m], ng[:, 1:, :m] = kv[:, :-1, :, :d], g[:, :-1, :, :d]
            kv, g = nk, ng
        pr = np.exp(g - g.max(2, keepdims=True))
        pooled = (kv * pr / pr.sum(2, keepdims=True)).sum(2)
        pooled = _rms(pooled, w[p + ".norm.weight"], s.eps)
        pos = np.broadcast_to(np.arange(nw) * m, (B, nw))
        return _rope_tail(pooled[:, :, None], pos, s.comp_inv)[:, :, 0]

    def _attention(self, x, i, pos):
        s, w = self.spec, self.w
        p = f"layers.{i}.attn."
        B, S, _ = x.shape
        H, d = s.H, s.d
        kind, m = s.kind[i], s.m[i]
        inv = s.main_inv if kind == "sliding_attention" else s.comp_inv
        qr = _rms(x @ w[p + "wq_a.weight"].T, w[p + "q_norm.weight"], s.eps)
        q = _rope_tail(_rms((qr @ w[p + "wq_b.weight"].T).reshape(B, S, H, d), None, s.eps), pos, inv)
        kv = _rms(x @ w[p + "wkv.weight"].T, w[p + "kv_norm.weight"], s.eps)
        kv = _rope_tail(kv[:, :, None], pos, inv)[:, :, 0]
        qi, ki = pos[:, :, None], pos[:, None, :]
        bias = np.where((ki <= qi) & (qi - ki < s.window), 0.0, -np.inf)
        keys = kv
        if m:
            comp = self._compress(x, p + "compressor", m, d, kind == "compressed_sparse_attention")
            N = comp.shape[1]
            if N:
                seen = np.arange(N)[None, None, :] < ((pos + 1) // m)[:, :, None]
                if kind == "compressed_sparse_attention":
                    seen = seen & self._indexer(x, qr, pos, p, m, seen)
                keys = np.concatenate([kv, comp], 1)
                bias = np.concatenate([bias, np.where(seen, 0.0, -np.inf)], -1)
        sc = np.einsum("bshd,btd->bhst", q, keys) * d ** -0.5 + bias[:, None]
        sink = np.broadcast_to(w[p + "attn_sink"][None, :, None, None], (B, H, S, 1))
        allv = np.concatenate([sc, sink], -1)
        allv = np.exp(allv - allv.max(-1, keepdims=True))
        allv /= allv.sum(-1, keepdims=True)
        o = _rope_tail(np.einsum("bhst,btd->bshd", allv[..., :-1], keys), pos, inv, sign=-1.0)
        g = s.groups
        wa = w[p + "wo_a.weight"].reshape(g, s.o_rank, -1)
        z = np.einsum("bsgk,gok->bsgo", o.reshape(B, S, g, -1), wa).reshape(B, S, -1)
        return z @ w[p + "wo_b.weight"].T

    def _indexer(self, x, qr, pos, p, m, seen):
        s, w = self.spec, self.w
        B, S, _ = x.shape
        keys = self._compress(x, p + "indexer.compressor", m, s.dI, True)
        q = (qr @ w[p + "indexer.wq_b.weight"].T).reshape(B, S, s.nI, s.dI)
        q = _rope_tail(q, pos, s.comp_inv)
        score = np.maximum(np.einsum("bshd,bnd->bshn", q, keys), 0) * s.dI ** -0.5
        wt = (x @ w[p + "indexer.weights_proj.weight"].T) * s.nI ** -0.5
        score = np.where(seen, (score * wt[..., None]).sum(2), -np.inf)
        N = keys.shape[1]
        k = min(s.topk_I, N)
        order = np.argsort(-score, axis=-1, kind="stable")[..., :k]
        sel = np.zeros(seen.shape, dtype=bool)
        np.put_along_axis(sel, order, True, axis=-1)
        # Gap at the k-th / (k+1)-th visible score (top-k decisions must be clear).
        srt = -np.sort(-score, -1)
        if k < N:
            finite = np.isfinite(srt[..., k])
            if finite.any():
                self.router_gaps.extend((srt[..., k - 1][finite] - srt[..., k][finite]).tolist())
        return sel

    def _moe(self, x, i, ids):
        s, w = self.spec, self.w
        p = f"layers.{i}.ffn."
        logits = x @ w[p + "gate.weight"].T
        if s.scoring == "sqrtsoftplus":
            sc = np.sqrt(np.where(logits > 20, logits, np.log1p(np.exp(np.minimum(logits, 20)))))
        else:
            sc = _sigmoid(logits)
        if s.hash[i]:
            idx = w[p + "gate.tid2eid"][ids]
        else:
            sel = sc + w[p + "gate.bias"]
            idx = np.argsort(-sel, -1, kind="stable")[..., :s.k]
            srt = -np.sort(-sel, -1)
            if s.k < s.E:
                self.router_gaps.extend((srt[..., s.k - 1] - srt[..., s.k]).ravel().tolist())
        wt = np.take_along_axis(sc, idx, -1)
        wt = wt / (wt.sum(-1, keepdims=True) + 1e-20) * s.scale

        def mlp(v, q):
            def lin(x, n):
                b = w.get(q + n + ".bias")
                y = x @ w[q + n + ".weight"].T
                return y if b is None else y + b
            g = np.minimum(lin(v, "w1"), s.limit)
            u = np.clip(lin(v, "w3"), -s.limit, s.limit)
            return lin(g * _sigmoid(g) * u, "w2")

        out = np.zeros_like(x)
        B, S, _ = x.shape
        for b in range(B):
            for t in range(S):
                for j in range(s.k):
                    out[b, t] += wt[b, t, j] * mlp(x[b, t], p + f"experts.{idx[b, t, j]}.")
        return out + mlp(x, p + "shared_experts.")

    # -- model ----------------------------------------------------------------------------------------
    def forward(self, ids, positions=None):
        s, w = self.spec, self.w
        ids, pos = hf_reference.prepare_inputs(ids, positions, s.vocab)
        B, S = ids.shape
        X = np.repeat(w["embed.weight"][ids][:, :, None], s.n, 2)
        for i in range(s.L):
            p = f"layers.{i}."
            post, cm, h = self._hc(X, p + "hc_attn")
            y = self._attention(_rms(h, w[p + "attn_norm.weight"], s.eps), i, pos)
            X = post[..., None] * y[:, :, None] + np.einsum("bsjk,bsjd->bskd", cm, X)
            post, cm, h = self._hc(X, p + "hc_ffn")
            y = self._moe(_rms(h, w[p + "ffn_norm.weight"], s.eps), i, ids)
            X = post[..., None] * y[:, :, None] + np.einsum("bsjk,bsjd->bskd", cm, X)
        mix = _rms(X.reshape(B, S, -1), None, s.eps) @ w["hc_head_fn"].T
        pre = _sigmoid(mix * w["hc_head_scale"][0] + w["hc_head_base"]) + s.hc_eps
        h = _rms((pre[..., None] * X).sum(2), w["norm.weight"], s.eps)
        return h @ w["head.weight"].T
