//===- Attention.cpp - Rules for rope, attention and cache ----------------===//
//
// This file implements verification and type inference for the attention
// family. Layouts: q [batch, seq, heads, d], k/v [batch, keys, kv_heads, d];
// the attention output is [batch, seq, heads, dv]; keys may be limited to
// a sliding window or to the query's chunk; optional extra keys and
// values (at the same key positions, causal but not windowed, filtered by
// an extra mask) join the same softmax; ALiBi biases the scores by head
// and key position. `mla_attention` reads a
// latent [batch, keys, c] and a shared rope key [batch, keys, dr] and
// expands per-head keys/values with kv_weight [heads * (dn + dv), c]. The
// cache op that feeds attention its past keys is Cache.cpp's.
//
//===----------------------------------------------------------------------===//
#include "ir/OpRules.h"
#include "ir/OpSchema.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace archc::ir {

namespace {
bool verifyRope(const Op &op, DiagnosticEngine &d) {
  const auto *sc = op.optAttr<std::shared_ptr<AttrDict>>("scaling");
  if (!sc)
    return true;
  auto it = (*sc)->entries.find("rope_type");
  if (it == (*sc)->entries.end())
    it = (*sc)->entries.find("type");
  std::string type = it != (*sc)->entries.end() &&
                             std::holds_alternative<std::string>(it->second)
                         ? std::get<std::string>(it->second)
                         : "default";
  // "mrope" (older Qwen-VL configs) is the default frequencies with
  // mrope_section.
  static const char *known[] = {"default", "linear",   "dynamic", "llama3",
                                "yarn",    "longrope", "mrope"};
  bool isKnown = false;
  for (const char *k : known)
    isKnown = isKnown || type == k;
  if (isKnown && type != "default" && type != "mrope") {
    // What the frequencies or the cos/sin tables are divided or scaled by:
    // 0, a negative or a non-finite value gives infinite, NaN or zero
    // tables (a llama3 factor of 0 divides by 0 in Hugging Face too). A
    // yarn/longrope attention_factor of 0 zeroes q and k; yarn's betas
    // enter a log (0 means the default, as in Hugging Face's `or 32`);
    // longrope divides each frequency by its factor.
    for (const char *key :
         {"factor", "low_freq_factor", "high_freq_factor", "attention_factor",
          "beta_fast", "beta_slow", "short_factor", "long_factor",
          "original_max_position_embeddings"}) {
      bool zeroIsDefault = std::string(key).rfind("beta", 0) == 0;
      auto f = (*sc)->entries.find(key);
      if (f == (*sc)->entries.end())
        continue;
      std::vector<double> values = {1.0};
      if (auto *v = std::get_if<double>(&f->second))
        values = {*v};
      else if (auto *v = std::get_if<int64_t>(&f->second))
        values = {static_cast<double>(*v)};
      else if (auto *v = std::get_if<std::vector<double>>(&f->second))
        values = *v;
      else if (auto *v = std::get_if<std::vector<int64_t>>(&f->second))
        values.assign(v->begin(), v->end());
      bool list = !std::holds_alternative<double>(f->second) &&
                  !std::holds_alternative<int64_t>(f->second);
      for (size_t i = 0; i < values.size(); ++i)
        if (!((values[i] > 0 || (zeroIsDefault && values[i] == 0)) &&
              std::isfinite(values[i]))) {
          reportOpError(
              d, op,
              fmt::format("rope scaling '{}' must be a positive number for "
                          "rope type '{}', got {}{} (the rotary tables would "
                          "not be finite, or be zero)",
                          key, type,
                          list ? fmt::format("{}", values[i])
                               : attrStr(f->second),
                          list ? fmt::format(" at index {}", i) : ""));
          return false;
        }
    }
  }
  if (isKnown)
    return true;
  reportOpError(d, op,
                fmt::format("unsupported rope scaling type '{}' (supported: "
                            "default, linear, dynamic, llama3, yarn, "
                            "longrope)",
                            type));
  return false;
}

} // namespace

std::vector<std::string> ropeScalingKeys(const AttrDict &scaling) {
  std::string type = "default";
  for (const char *key : {"rope_type", "type"}) {
    auto it = scaling.entries.find(key);
    if (it != scaling.entries.end() &&
        std::holds_alternative<std::string>(it->second)) {
      type = std::get<std::string>(it->second);
      break;
    }
  }
  std::vector<std::string> keys = {"rope_type", "type", "mrope_section",
                                   "mrope_interleaved"};
  std::vector<std::string> own;
  if (type == "linear" || type == "dynamic")
    own = {"factor"};
  else if (type == "llama3")
    own = {"factor", "low_freq_factor", "high_freq_factor",
           "original_max_position_embeddings"};
  else if (type == "yarn")
    own = {"factor",           "original_max_position_embeddings",
           "attention_factor", "mscale",
           "mscale_all_dim",   "beta_fast",
           "beta_slow",        "truncate"};
  else if (type == "longrope")
    own = {"short_factor", "long_factor", "factor", "attention_factor",
           "original_max_position_embeddings"};
  keys.insert(keys.end(), own.begin(), own.end());
  return keys;
}

std::vector<int64_t> mropeSections(const Op &op) {
  std::vector<int64_t> out;
  const auto *sc = op.optAttr<std::shared_ptr<AttrDict>>("scaling");
  if (!sc)
    return out;
  auto it = (*sc)->entries.find("mrope_section");
  if (it == (*sc)->entries.end())
    return out;
  if (auto *l = std::get_if<std::vector<int64_t>>(&it->second))
    out = *l;
  return out;
}

bool mropeInterleaved(const Op &op) {
  const auto *sc = op.optAttr<std::shared_ptr<AttrDict>>("scaling");
  if (!sc)
    return false;
  auto it = (*sc)->entries.find("mrope_interleaved");
  return it != (*sc)->entries.end() &&
         std::holds_alternative<bool>(it->second) && std::get<bool>(it->second);
}

namespace {
bool inferRope(Op &op, DiagnosticEngine &d) {
  const TensorType &x = op.getOperand(0)->type;
  const TensorType &p = op.getOperand(1)->type;
  if (x.rank() != 4) {
    reportOpError(d, op,
                  fmt::format("expects x as [batch, seq, heads, "
                              "head_dim], got {}",
                              x.str()));
    return false;
  }
  if (p.dtype != DType::I64 && p.dtype != DType::I32) {
    reportOpError(d, op,
                  fmt::format("positions must be integers, got {}", p.str()));
    return false;
  }
  std::vector<int64_t> sections = mropeSections(op);
  bool multi = p.rank() == 3;
  size_t at = multi ? 1 : 0;
  if ((p.rank() != 2 && !multi) || p.dims[at] != x.dims[0] ||
      p.dims[at + 1] != x.dims[1]) {
    reportOpError(d, op,
                  fmt::format("positions {} do not match [batch, "
                              "seq] of {}",
                              p.str(), x.str()));
    return false;
  }
  auto headDim = x.dims[3].getConstant();
  const int64_t *dim = op.optAttr<int64_t>("dim");
  int64_t rot = dim ? *dim : headDim.value_or(0);
  if (!headDim || rot <= 0 || rot > *headDim || rot % 2) {
    reportOpError(d, op,
                  fmt::format("rotary dim {} must be even and at most "
                              "the head dim of {}",
                              rot, x.str()));
    return false;
  }
  if (multi) {
    // M-RoPE: one position row per section of frequencies.
    int64_t total = 0;
    for (int64_t n : sections)
      total += n;
    if (sections.empty() || p.dims[0] != SymExpr(int64_t(sections.size())) ||
        total != rot / 2) {
      reportOpError(
          d, op,
          fmt::format("positions {} have one row per M-RoPE axis: the "
                      "scaling's mrope_section must list {} sections summing "
                      "to rotary dim / 2 = {}",
                      p.str(), p.dims[0].str(), rot / 2));
      return false;
    }
  }
  op.getResult()->type = x;
  return true;
}

bool verifyAttention(const Op &op, DiagnosticEngine &d) {
  if (op.hasAttr("alibi_bf16") && !op.hasAttr("alibi")) {
    reportOpError(d, op, "alibi_bf16 rounds the ALiBi bias: it needs alibi");
    return false;
  }
  if (op.hasAttr("alibi") && op.hasOperand("extra_k")) {
    reportOpError(d, op,
                  "alibi with extra keys is not supported (the extra "
                  "keys have no ALiBi positions)");
    return false;
  }
  if (op.hasAttr("relative_max_distance") && !op.hasOperand("relative_bias")) {
    reportOpError(d, op,
                  "relative_max_distance buckets relative positions: it "
                  "needs relative_bias");
    return false;
  }
  if (op.hasOperand("relative_bias") &&
      (!op.hasAttr("relative_max_distance") || op.hasOperand("extra_k") ||
       op.hasAttr("alibi"))) {
    reportOpError(d, op,
                  "relative_bias needs relative_max_distance and takes no "
                  "extra keys or ALiBi");
    return false;
  }
  if (op.hasOperand("bias") && op.hasOperand("extra_k")) {
    reportOpError(d, op, "bias covers the keys only: it takes no extra keys");
    return false;
  }
  if (op.hasAttr("chunk") &&
      (op.hasAttr("window") || !op.attr<bool>("causal") ||
       op.hasOperand("extra_k"))) {
    reportOpError(d, op,
                  "chunked attention is causal and takes no window or "
                  "extra keys");
    return false;
  }
  return true;
}

bool inferAttentionOp(Op &op, DiagnosticEngine &d) {
  const TensorType &q = op.getOperand(0)->type;
  const TensorType &k = op.getOperand(1)->type;
  const TensorType &v = op.getOperand(2)->type;
  if (q.rank() != 4 || k.rank() != 4 || v.rank() != 4) {
    reportOpError(d, op,
                  fmt::format("expects q, k, v as [batch, seq, "
                              "heads, head_dim], got {}, {}, {}",
                              q.str(), k.str(), v.str()));
    return false;
  }
  if (q.dtype != k.dtype || q.dtype != v.dtype) {
    reportOpError(d, op, "q, k and v must have the same element type");
    return false;
  }
  if (k.dims[0] != q.dims[0] || v.dims[0] != q.dims[0]) {
    reportOpError(d, op, "q, k and v must have the same batch");
    return false;
  }
  if (k.dims[1] != v.dims[1] || k.dims[2] != v.dims[2]) {
    reportOpError(d, op,
                  fmt::format("k {} and v {} must agree in length "
                              "and heads",
                              k.str(), v.str()));
    return false;
  }
  if (q.dims[3] != k.dims[3]) {
    reportOpError(d, op,
                  fmt::format("query head dim {} differs from key "
                              "head dim {}",
                              q.dims[3].str(), k.dims[3].str()));
    return false;
  }
  auto h = q.dims[2].getConstant(), hk = k.dims[2].getConstant();
  if (!h || !hk || *hk <= 0 || *h % *hk != 0) {
    reportOpError(d, op,
                  fmt::format("query heads {} must be a multiple of "
                              "key/value heads {}",
                              q.dims[2].str(), k.dims[2].str()));
    return false;
  }
  if (const Value *bias = op.operand("relative_bias")) {
    const TensorType &r = bias->type;
    if (r.rank() != 2 || r.dims[1] != q.dims[2] || !r.dims[0].isConstant() ||
        !isFloat(r.dtype)) {
      reportOpError(d, op,
                    fmt::format("relative_bias {} must be a float table "
                                "[buckets, heads] with one column per query "
                                "head ({})",
                                r.str(), q.dims[2].str()));
      return false;
    }
  }
  if (const Value *bias = op.operand("bias")) {
    const TensorType &r = bias->type;
    if (r.rank() != 4 || !isFloat(r.dtype) ||
        (r.dims[0] != q.dims[0] && r.dims[0] != SymExpr(1)) ||
        r.dims[1] != q.dims[2] || r.dims[2] != q.dims[1] ||
        r.dims[3] != k.dims[1]) {
      reportOpError(d, op,
                    fmt::format("bias {} must be float [{} or 1, {}, {}, {}] "
                                "(batch, query heads, queries, keys)",
                                r.str(), q.dims[0].str(), q.dims[2].str(),
                                q.dims[1].str(), k.dims[1].str()));
      return false;
    }
  }
  if (const Value *sinks = op.operand("sinks")) {
    const TensorType &s = sinks->type;
    if (s.rank() != 1 || s.dims[0] != q.dims[2]) {
      reportOpError(d, op,
                    fmt::format("sinks {} must be one value per "
                                "query head ({})",
                                s.str(), q.dims[2].str()));
      return false;
    }
  }
  if (op.hasOperand("extra_k")) {
    const TensorType &ek = op.operand("extra_k")->type;
    const TensorType &ev = op.operand("extra_v")->type;
    if (ek.rank() != 4 || ev.rank() != 4 || ek.dtype != q.dtype ||
        ev.dtype != q.dtype || ek.dims != k.dims || ev.dims != v.dims) {
      reportOpError(d, op,
                    fmt::format("extra keys {} and values {} must "
                                "have the types of k {} and v {} "
                                "(the same key positions)",
                                ek.str(), ev.str(), k.str(), v.str()));
      return false;
    }
  }
  if (const Value *extraMask = op.operand("extra_mask")) {
    const TensorType &em = extraMask->type;
    bool perKey =
        em.rank() == 2 && em.dims[0] == q.dims[0] && em.dims[1] == k.dims[1];
    bool perQuery = em.rank() == 3 && em.dims[0] == q.dims[0] &&
                    em.dims[1] == q.dims[1] && em.dims[2] == k.dims[1];
    if (em.dtype != DType::Bool || !(perKey || perQuery)) {
      reportOpError(d, op,
                    fmt::format("extra_mask {} must be bool [batch, "
                                "keys] or [batch, seq, keys] = "
                                "[{}, {}, {}]",
                                em.str(), q.dims[0].str(), q.dims[1].str(),
                                k.dims[1].str()));
      return false;
    }
  }
  if (const Value *mask = op.operand("mask")) {
    const TensorType &m = mask->type;
    if (m.rank() != 2 || m.dims[0] != q.dims[0] || m.dims[1] != k.dims[1]) {
      reportOpError(d, op,
                    fmt::format("mask {} must be [batch, keys] = "
                                "[{}, {}]",
                                m.str(), q.dims[0].str(), k.dims[1].str()));
      return false;
    }
  }
  // Vision and multimodal masks: per key, per token segment, image blocks.
  auto check2d = [&](const char *name, const SymExpr &len, const char *what) {
    const Value *x = op.operand(name);
    if (!x)
      return true;
    const TensorType &m = x->type;
    if (m.rank() == 2 && m.dims[0] == q.dims[0] && m.dims[1] == len)
      return true;
    reportOpError(d, op,
                  fmt::format("{} {} must be [batch, {}] = [{}, {}]", name,
                              m.str(), what, q.dims[0].str(), len.str()));
    return false;
  };
  if (!check2d("key_mask", k.dims[1], "keys") ||
      !check2d("segments", q.dims[1], "seq") ||
      !check2d("bidirectional", q.dims[1], "seq"))
    return false;
  if (op.hasOperand("segments") && q.dims[1] != k.dims[1]) {
    reportOpError(d, op,
                  fmt::format("segments need the queries to be all the keys "
                              "(no past state), got q {} and k {}",
                              q.str(), k.str()));
    return false;
  }
  op.getResult()->type =
      TensorType(q.dtype, {q.dims[0], q.dims[1], q.dims[2], v.dims[3]});
  return true;
}

bool inferMla(Op &op, DiagnosticEngine &d) {
  const TensorType &qn = op.getOperand(0)->type;
  const TensorType &qr = op.getOperand(1)->type;
  const TensorType &lat = op.getOperand(2)->type;
  const TensorType &kr = op.getOperand(3)->type;
  const TensorType &w = op.getOperand(4)->type;
  if (qn.rank() != 4 || qr.rank() != 4 || lat.rank() != 3 || kr.rank() != 3 ||
      w.rank() != 2) {
    reportOpError(d, op,
                  fmt::format("expects q_nope, q_pe [batch, seq, "
                              "heads, d], latent, k_pe [batch, "
                              "keys, d] and kv_weight [out, c], got "
                              "{}, {}, {}, {}, {}",
                              qn.str(), qr.str(), lat.str(), kr.str(),
                              w.str()));
    return false;
  }
  if (qn.dims[0] != qr.dims[0] || qn.dims[1] != qr.dims[1] ||
      qn.dims[2] != qr.dims[2]) {
    reportOpError(d, op,
                  fmt::format("q_nope {} and q_pe {} must agree in "
                              "batch, seq and heads",
                              qn.str(), qr.str()));
    return false;
  }
  if (lat.dims[0] != qn.dims[0] || kr.dims[0] != qn.dims[0] ||
      lat.dims[1] != kr.dims[1]) {
    reportOpError(d, op,
                  fmt::format("latent {} and k_pe {} must agree in "
                              "batch and length with q {}",
                              lat.str(), kr.str(), qn.str()));
    return false;
  }
  if (kr.dims[2] != qr.dims[3]) {
    reportOpError(d, op,
                  fmt::format("k_pe {} and q_pe {} rope dims differ", kr.str(),
                              qr.str()));
    return false;
  }
  auto h = qn.dims[2].getConstant(), dn = qn.dims[3].getConstant();
  int64_t dv = op.attr<int64_t>("v_dim");
  if (!h || !dn || w.dims[1] != lat.dims[2] ||
      w.dims[0] != SymExpr(*h * (*dn + dv))) {
    reportOpError(d, op,
                  fmt::format("kv_weight {} must be [heads * "
                              "(nope + v_dim), c] = [{} * ({} + "
                              "{}), {}]",
                              w.str(), qn.dims[2].str(), qn.dims[3].str(), dv,
                              lat.dims[2].str()));
    return false;
  }
  if (const Value *mask = op.operand("mask")) {
    const TensorType &m = mask->type;
    if (m.rank() != 2 || m.dims[0] != qn.dims[0] || m.dims[1] != lat.dims[1]) {
      reportOpError(d, op,
                    fmt::format("mask {} must be [batch, keys]", m.str()));
      return false;
    }
  }
  op.getResult()->type =
      TensorType(qn.dtype, {qn.dims[0], qn.dims[1], qn.dims[2], SymExpr(dv)});
  return true;
}

/// Keys a causal chunked kernel visits for s queries over t keys, query j
/// at position p = t - s + j seeing the p mod chunk + 1 keys of its chunk.
double visitedChunkKeys(double s, double t, double chunk) {
  double keys = 0;
  for (double p = t - s; p < t; ++p)
    keys += std::fmod(p, chunk) + 1;
  return keys;
}

/// Keys a causal (sliding-window) kernel visits for s queries over t keys,
/// query j at position t - s + j; without causality a window is the band
/// |query - key| < w.
double visitedKeys(double s, double t, double w, bool causal) {
  if (!causal && w > 0) {
    double keys = 0;
    for (double p = t - s; p < t; ++p)
      keys += std::min(p, w - 1) + std::min(t - 1 - p, w - 1) + 1;
    return keys;
  }
  if (!causal)
    return s * t;
  double base = t - s + 1; // keys of the first query
  if (w <= 0)
    return s * base + s * (s - 1) / 2;
  if (base >= w)
    return s * w;
  double n1 = std::min(s, w - base + 1);
  return n1 * base + n1 * (n1 - 1) / 2 + (s - n1) * w;
}

bool isCached(const Value *v) {
  const Op *def = v->getDefiningOp();
  return def && def->getKind() == OpKind::Cache;
}

/// Keys a query sees inside its segment when the segments come from
/// op.patch_segments (through reshapes): a frame's patches (the images'
/// patches / images, images of one size), or a window's (window x merge)^2
/// patches at most; 0 when the segments are of another origin.
double segmentKeys(const Op &attn, double t, const CostContext &ctx) {
  const Value *seg = attn.operand("segments");
  const Op *def = seg ? seg->getDefiningOp() : nullptr;
  while (def && def->getKind() == OpKind::Reshape)
    def = def->getOperand(0)->getDefiningOp();
  if (!def || def->getKind() != OpKind::PatchSegments)
    return 0;
  double images = ctx.dim(SymExpr::symbol("images"));
  double frame = images > 0 ? t / images : t;
  if (const int64_t *w = def->optAttr<int64_t>("window")) {
    double side = static_cast<double>(*w * def->attr<int64_t>("merge"));
    return std::min(frame, side * side);
  }
  return frame;
}

OpCost ropeCost(const Op &op, const CostContext &ctx) {
  OpCost c;
  const TensorType &x = op.getOperand(0)->type;
  const int64_t *dim = op.optAttr<int64_t>("dim");
  double rot =
      static_cast<double>(dim ? *dim : x.dims[3].getConstant().value_or(0));
  double rotated = ctx.elements(x) / ctx.dim(x.dims[3]) * rot;
  c.flops = 3 * rotated;
  readOperandsWriteResults(op, ctx, c);
  return c;
}

/// Attention: MACs B H (Dk + Dv) keys, keys summed over the queries of
/// what a causal (windowed) kernel visits; per score the scale, mask,
/// softmax (and soft-cap); K/V read once per distinct position (from the
/// cache at KV precision), extra keys at their density.
OpCost attentionCost(const Op &op, const CostContext &ctx) {
  OpCost c;
  const TensorType &q = op.getOperand(0)->type;
  const TensorType &k = op.getOperand(1)->type;
  const TensorType &v = op.getOperand(2)->type;
  double b = ctx.dim(q.dims[0]), s = ctx.dim(q.dims[1]), h = ctx.dim(q.dims[2]);
  double dk = ctx.dim(q.dims[3]), dv = ctx.dim(v.dims[3]);
  double t = ctx.dim(k.dims[1]), hk = ctx.dim(k.dims[2]);
  const int64_t *window = op.optAttr<int64_t>("window");
  double w = window ? static_cast<double>(*window) : 0;
  bool causal = op.attr<bool>("causal");
  const int64_t *chunkAttr = op.optAttr<int64_t>("chunk");
  double chunk = chunkAttr ? static_cast<double>(*chunkAttr) : 0;
  double keys =
      chunk > 0 ? visitedChunkKeys(s, t, chunk) : visitedKeys(s, t, w, causal);
  // Segmented (block-diagonal) attention: what a kernel over each segment
  // visits.
  if (double per = segmentKeys(op, t, ctx); per > 0 && !causal)
    keys = s * per;
  // Distinct key positions read (a window bounds them, a chunk starts at
  // the first query's chunk); shared K = V (one tensor as both) is read
  // once.
  double span = w > 0 ? std::min(t, w + s - 1 + (causal ? 0 : w - 1)) : t;
  if (chunk > 0 && t >= s)
    span = s + std::fmod(t - s, chunk);
  auto kvRead = [&](const Value *key, const Value *value, double positions) {
    double elems = b * hk * positions * (dk + (key == value ? 0 : dv));
    if (isCached(key))
      c.kvReadBytes += elems * ctx.kvBits() / 8;
    else
      c.activationBytes += elems * ctx.activationBits() / 8;
  };
  kvRead(op.getOperand(1), op.getOperand(2), span);
  if (const Value *sinks = op.operand("sinks"))
    ctx.read(sinks, c);
  if (const Value *ek = op.operand("extra_k")) {
    // Extra keys (compressed entries, a fraction `dens` of the key
    // positions): query j at position t - s + j sees the
    // floor((t - s + j + 1) dens) entries before it, or the k of them a
    // topk_mask keeps.
    const Value *ev = op.operand("extra_v");
    double dens = ctx.density(ek);
    double limit = 0;
    if (const Value *em = op.operand("extra_mask")) {
      const Op *sel = em->getDefiningOp();
      if (sel && sel->getKind() == OpKind::TopkMask)
        limit = static_cast<double>(sel->attr<int64_t>("k"));
      ctx.read(em, c);
    }
    double extra = 0;
    for (double j = 0; j < s; ++j) {
      double seen = causal ? std::floor((t - s + j + 1) * dens + 1e-9)
                           : std::floor(t * dens + 1e-9);
      extra += limit > 0 ? std::min(limit, seen) : seen;
    }
    keys += extra;
    kvRead(ek, ev, std::floor(t * dens + 1e-9));
  }
  c.macs = b * h * (dk + dv) * keys;
  c.matmulFlops = 2 * c.macs;
  double scores = b * h * keys;
  bool softcap = op.hasAttr("softcap");
  double perScore =
      2 /*scale, mask*/ + 5 /*softmax*/ + (softcap ? 3 : 0) +
      (op.hasAttr("alibi") || op.hasOperand("relative_bias") ? 1 : 0) +
      (op.hasOperand("bias") ? 1 : 0) /*biases*/;
  c.flops = c.matmulFlops + scores * perScore;
  c.transcendentals = scores * (softcap ? 2 : 1);
  ctx.read(op.getOperand(0), c);
  if (const Value *mask = op.operand("mask"))
    ctx.read(mask, c);
  if (const Value *bias = op.operand("bias"))
    ctx.read(bias, c);
  ctx.write(op.getResult(), c);
  return c;
}

/// MLA: the cheaper of the two exact forms a serving kernel chooses
/// between, per call:
///   expanded: up-project all T cached latents to per-head K/V
///             (T c H (dn + dv)), then attention over dn + dr + dv;
///   absorbed: fold U_K into the query (S H dn c), attend over the latent
///             as one shared head (keys (c + dr) + keys c), apply U_V
///             (S H c dv).
/// The cache read is the latent and the rope key, once.
OpCost mlaCost(const Op &op, const CostContext &ctx) {
  OpCost c;
  const TensorType &qn = op.getOperand(0)->type;
  const TensorType &qr = op.getOperand(1)->type;
  const TensorType &lat = op.getOperand(2)->type;
  double b = ctx.dim(qn.dims[0]), s = ctx.dim(qn.dims[1]),
         h = ctx.dim(qn.dims[2]);
  double dn = ctx.dim(qn.dims[3]), dr = ctx.dim(qr.dims[3]);
  double t = ctx.dim(lat.dims[1]), lc = ctx.dim(lat.dims[2]);
  double dv = static_cast<double>(op.attr<int64_t>("v_dim"));
  double keys = visitedKeys(s, t, 0, op.attr<bool>("causal"));
  double expanded = b * t * lc * h * (dn + dv) + b * h * keys * (dn + dr + dv);
  double absorbed = b * s * h * dn * lc + b * h * keys * (lc + dr) +
                    b * h * keys * lc + b * s * h * lc * dv;
  c.macs = std::min(expanded, absorbed);
  c.matmulFlops = 2 * c.macs;
  double scores = b * h * keys;
  c.flops = c.matmulFlops + scores * (2 + 5);
  c.transcendentals = scores;
  double kvElems = b * t * (lc + dr);
  if (isCached(op.getOperand(2)))
    c.kvReadBytes = kvElems * ctx.kvBits() / 8;
  else
    c.activationBytes += kvElems * ctx.activationBits() / 8;
  ctx.read(op.getOperand(0), c);
  ctx.read(op.getOperand(1), c);
  ctx.read(op.operand("kv_weight"), c); // once
  if (const Value *mask = op.operand("mask"))
    ctx.read(mask, c);
  ctx.write(op.getResult(), c);
  return c;
}

} // namespace

void addAttentionSchemas(SchemaList &out) {
  out.push_back(
      SchemaBuilder(OpKind::Rope, "rotary position embedding")
          .describe("Rotates the first `dim` dims of each head by angles "
                    "position * theta^(-2i/dim), half-split (rotate_half) or "
                    "on interleaved pairs; `scaling` is Hugging Face's "
                    "rope_scaling dict (linear, dynamic, llama3, yarn, "
                    "longrope).")
          .language()
          .operand("x", "[batch, seq, heads, head_dim]")
          .operand("positions",
                   "integer [batch, seq], or [axes, batch, seq] for M-RoPE "
                   "(the scaling's mrope_section assigns each axis its "
                   "frequencies: consecutive sections, or with "
                   "mrope_interleaved the pattern t h w t h w ...)")
          .attr("theta", AttrType::Float, "the rotary base")
          .above(0)
          .optAttr("dim", AttrType::Int,
                   "rotated dims per head (even); none: all of them")
          .attr("interleaved", AttrType::Bool, false,
                "rotate pairs (x[2i], x[2i+1]) instead of the two halves")
          .optAttr("scaling", AttrType::Dict, "rope_scaling parameters")
          .honouredKeys(ropeScalingKeys)
          .optAttr("max_positions", AttrType::Int,
                   "max_position_embeddings (table size, dynamic/longrope)")
          .optAttr("original_max_positions", AttrType::Int,
                   "the pre-scaling context (longrope, yarn)")
          .result("result", "same type as x")
          .verify(verifyRope)
          .infer(inferRope)
          .cost(ropeCost)
          .take());
  out.push_back(
      SchemaBuilder(OpKind::Attention,
                    "scaled dot-product attention core (GQA aware)")
          .describe("q [batch, seq, heads, d] over k, v [batch, keys, "
                    "kv_heads, d]: heads share key/value heads in groups; "
                    "the s queries are the last s of the key positions. "
                    "Optional extra keys and values (at the same key "
                    "positions, causal but not windowed, filtered by an "
                    "extra mask) join the same softmax. ALiBi adds a bias "
                    "per head and key position. A query sees a key when "
                    "causal/window/chunk allow it or both lie in one "
                    "bidirectional run, and the padding mask, key_mask and "
                    "segments allow it.")
          .language()
          .operand("q", "[batch, seq, heads, dk]")
          .operand("k", "[batch, keys, kv_heads, dk]")
          .operand("v", "[batch, keys, kv_heads, dv]")
          .attr("causal", AttrType::Bool, true,
                "queries see keys at or before their position")
          .optAttr("window", AttrType::Int,
                   "sliding window: keys within the last `window` positions, "
                   "the query's included; not causal: keys less than "
                   "`window` positions away on either side (ModernBERT's "
                   "local layers)")
          .atLeast(1)
          .optAttr("chunk", AttrType::Int,
                   "chunked attention: keys in the query's chunk of `chunk` "
                   "positions (counted from the first non-padding token), "
                   "the query's included (Llama 4)")
          .atLeast(1)
          .optAttr("scale", AttrType::Float, "score scale; none: 1 / sqrt(dk)")
          .nonZero()
          .optAttr("softcap", AttrType::Float,
                   "scores become softcap * tanh(scores / softcap)")
          .above(0)
          .optAttr("alibi", AttrType::Float,
                   "ALiBi: adds alibi * m_h * p_j to the scaled scores, m_h "
                   "the ALiBi slope of query head h, p_j the position of key "
                   "j among its row's real tokens (from the padding mask)")
          .optAttr("alibi_bf16", AttrType::Bool,
                   "round the slopes and m_h * p_j to bfloat16 (Hugging "
                   "Face's build_alibi_tensor)")
          .optAttr("padding_mask", AttrType::Bool,
                   "false: the op reads no padding mask from the passes "
                   "(an encoder's, masked by key_mask; an encoder-decoder's "
                   "decoder, which takes none); absent: it reads the graph's "
                   "attention_mask")
          .optAttr("relative_max_distance", AttrType::Int,
                   "T5's relative positions: distances from this on share "
                   "the last bucket")
          .atLeast(1)
          .optOperand("sinks", "[heads]: one extra logit per head that joins "
                               "the softmax and takes no value")
          .optOperand("extra_k", "[batch, keys, kv_heads, dk]", "extra_v")
          .optOperand("extra_v", "[batch, keys, kv_heads, dv]", "extra_k")
          .optOperand("extra_mask",
                      "bool [batch, keys] or [batch, seq, keys]: which extra "
                      "keys each query sees",
                      "extra_k")
          .optOperand("relative_bias",
                      "float [buckets, heads]: T5's relative position bias, "
                      "table[bucket(key - query), h] added to the scores "
                      "(bidirectional buckets unless causal)")
          .optOperand("bias",
                      "float [batch or 1, heads, seq, keys]: added to the "
                      "scaled scores (DeBERTa's disentangled position "
                      "terms)")
          .optOperand("key_mask",
                      "[batch, keys]: 0 hides a key from every query "
                      "(padded patches of a vision encoder)")
          .optOperand("segments",
                      "integer [batch, seq]: a query sees only keys of its "
                      "own segment (vision windows, frames, images; no past "
                      "state)")
          .optOperand("bidirectional",
                      "[batch, seq]: nonzero marks tokens; a run of marked "
                      "tokens of the call also sees its later tokens (an "
                      "image block, on top of causal and window)")
          .passOperand("mask", "int64 [batch, keys] padding mask "
                               "(attention-mask, kv-cache passes)")
          .result("result", "[batch, seq, heads, dv]")
          .verify(verifyAttention)
          .infer(inferAttentionOp)
          .cost(attentionCost)
          .costHandlesDensity()
          .denseResults()
          .take());
  out.push_back(
      SchemaBuilder(OpKind::MlaAttention,
                    "multi-head latent attention over a cached latent")
          .describe("Keys and values of each head are expanded from a shared "
                    "latent [batch, keys, c] with kv_weight [heads * (nope + "
                    "v_dim), c]; the rope part of the key [batch, keys, dr] "
                    "is shared by all heads.")
          .language()
          .operand("q_nope", "[batch, seq, heads, nope]")
          .operand("q_pe", "[batch, seq, heads, dr]")
          .operand("latent", "[batch, keys, c]")
          .operand("k_pe", "[batch, keys, dr]")
          .operand("kv_weight", "[heads * (nope + v_dim), c]")
          .attr("v_dim", AttrType::Int, "value head dim")
          .atLeast(1)
          .optAttr("scale", AttrType::Float,
                   "score scale; none: 1 / sqrt(nope + dr)")
          .nonZero()
          .attr("causal", AttrType::Bool, true,
                "queries see keys at or before their position")
          .passOperand("mask", "int64 [batch, keys] padding mask")
          .result("result", "[batch, seq, heads, v_dim]")
          .infer(inferMla)
          .cost(mlaCost)
          .costHandlesDensity()
          .denseResults()
          .take());
}

} // namespace archc::ir
