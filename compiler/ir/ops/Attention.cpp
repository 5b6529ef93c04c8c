//===- Attention.cpp - Rules for rope, attention and cache ----------------===//
//
// This file implements verification and type inference for the attention
// family. Layouts: q [batch, seq, heads, d], k/v [batch, keys, kv_heads, d];
// the attention output is [batch, seq, heads, dv]; optional extra keys and
// values (at the same key positions, causal but not windowed, filtered by
// an extra mask) join the same softmax. `mla_attention` reads a
// latent [batch, keys, c] and a shared rope key [batch, keys, dr] and
// expands per-head keys/values with kv_weight [heads * (dn + dv), c]. A
// `cache` op is the
// identity until the kv-cache pass gives it a past state (stored
// [batch, kv_heads, past, d]); it then yields the full keys and the present
// state.
//
//===----------------------------------------------------------------------===//
#include "ir/OpRules.h"

#include <fmt/format.h>

namespace archc::ir {

bool verifyAttention(const Op &op, DiagnosticEngine &d) {
  switch (op.getKind()) {
  case OpKind::Rope: {
    if (op.getNumOperands() != 2) {
      reportOpError(d, op, "expects (x, positions)");
      return false;
    }
    if (!(op.getFloat("theta", 0) > 0)) {
      reportOpError(d, op, "theta must be positive");
      return false;
    }
    if (auto *sc = op.getAttr<std::shared_ptr<AttrDict>>("scaling")) {
      auto it = (*sc)->entries.find("rope_type");
      if (it == (*sc)->entries.end())
        it = (*sc)->entries.find("type");
      std::string type = it != (*sc)->entries.end() &&
                                 std::holds_alternative<std::string>(it->second)
                             ? std::get<std::string>(it->second)
                             : "default";
      static const char *known[] = {"default", "linear", "dynamic",
                                    "llama3",  "yarn",   "longrope"};
      bool ok = false;
      for (const char *k : known)
        ok |= type == k;
      if (!ok) {
        reportOpError(d, op,
                      fmt::format("unsupported rope scaling type "
                                  "'{}' (supported: default, linear, "
                                  "dynamic, llama3, yarn, longrope)",
                                  type));
        return false;
      }
    }
    return true;
  }
  case OpKind::Attention: {
    size_t want =
        3 + (op.getBool("sinks") ? 1 : 0) + (op.getBool("extra") ? 2 : 0) +
        (op.getBool("extra_mask") ? 1 : 0) + (op.getBool("masked") ? 1 : 0);
    if (op.getNumOperands() != want) {
      reportOpError(d, op,
                    fmt::format("expects {} operands, has {}", want,
                                op.getNumOperands()));
      return false;
    }
    if (op.hasAttr("window") && op.getInt("window") <= 0) {
      reportOpError(d, op, "window must be positive");
      return false;
    }
    if (op.hasAttr("softcap") && !(op.getFloat("softcap") > 0)) {
      reportOpError(d, op, "softcap must be positive");
      return false;
    }
    if (op.getBool("extra_mask") && !op.getBool("extra")) {
      reportOpError(d, op, "extra_mask needs extra keys (extra_k, extra_v)");
      return false;
    }
    return true;
  }
  case OpKind::MlaAttention: {
    size_t want = 5 + (op.getBool("masked") ? 1 : 0);
    if (op.getNumOperands() != want) {
      reportOpError(d, op,
                    fmt::format("expects {} operands, has {}", want,
                                op.getNumOperands()));
      return false;
    }
    if (op.getInt("v_dim", 0) <= 0) {
      reportOpError(d, op, "v_dim must be positive");
      return false;
    }
    return true;
  }
  case OpKind::Cache:
    if (op.getNumOperands() < 1 || op.getNumOperands() > 2 ||
        op.getString("name").empty()) {
      reportOpError(d, op, "expects (x[, past]) and a name");
      return false;
    }
    return true;
  default:
    return true;
  }
}

bool inferAttention(Op &op, DiagnosticEngine &d) {
  switch (op.getKind()) {
  case OpKind::Rope: {
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
    if (p.rank() != 2 || p.dims[0] != x.dims[0] || p.dims[1] != x.dims[1]) {
      reportOpError(d, op,
                    fmt::format("positions {} do not match [batch, "
                                "seq] of {}",
                                p.str(), x.str()));
      return false;
    }
    auto headDim = x.dims[3].getConstant();
    int64_t rot = op.getInt("dim", headDim.value_or(0));
    if (!headDim || rot <= 0 || rot > *headDim || rot % 2) {
      reportOpError(d, op,
                    fmt::format("rotary dim {} must be even and at most "
                                "the head dim of {}",
                                rot, x.str()));
      return false;
    }
    op.getResult()->type = x;
    return true;
  }
  case OpKind::Attention: {
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
    size_t next = 3;
    if (op.getBool("sinks")) {
      const TensorType &s = op.getOperand(next++)->type;
      if (s.rank() != 1 || s.dims[0] != q.dims[2]) {
        reportOpError(d, op,
                      fmt::format("sinks {} must be one value per "
                                  "query head ({})",
                                  s.str(), q.dims[2].str()));
        return false;
      }
    }
    if (op.getBool("extra")) {
      const TensorType &ek = op.getOperand(next++)->type;
      const TensorType &ev = op.getOperand(next++)->type;
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
    if (op.getBool("extra_mask")) {
      const TensorType &em = op.getOperand(next++)->type;
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
    if (op.getBool("masked")) {
      const TensorType &m = op.getOperand(next++)->type;
      if (m.rank() != 2 || m.dims[0] != q.dims[0] || m.dims[1] != k.dims[1]) {
        reportOpError(d, op,
                      fmt::format("mask {} must be [batch, keys] = "
                                  "[{}, {}]",
                                  m.str(), q.dims[0].str(), k.dims[1].str()));
        return false;
      }
    }
    op.getResult()->type =
        TensorType(q.dtype, {q.dims[0], q.dims[1], q.dims[2], v.dims[3]});
    return true;
  }
  case OpKind::MlaAttention: {
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
                    fmt::format("k_pe {} and q_pe {} rope dims differ",
                                kr.str(), qr.str()));
      return false;
    }
    auto h = qn.dims[2].getConstant(), dn = qn.dims[3].getConstant();
    int64_t dv = op.getInt("v_dim", 0);
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
    if (op.getBool("masked")) {
      const TensorType &m = op.getOperand(5)->type;
      if (m.rank() != 2 || m.dims[0] != qn.dims[0] ||
          m.dims[1] != lat.dims[1]) {
        reportOpError(d, op,
                      fmt::format("mask {} must be [batch, keys]", m.str()));
        return false;
      }
    }
    op.getResult()->type =
        TensorType(qn.dtype, {qn.dims[0], qn.dims[1], qn.dims[2], SymExpr(dv)});
    return true;
  }
  case OpKind::Cache: {
    const TensorType &x = op.getOperand(0)->type;
    if (x.rank() < 2) {
      reportOpError(d, op,
                    fmt::format("state must be [batch, seq, ...], got "
                                "{}",
                                x.str()));
      return false;
    }
    if (op.getNumOperands() == 1) {
      op.getResult(0)->type = x;
      return true;
    }
    // With a past state: full = concat(past, x) along seq.
    const TensorType &past = op.getOperand(1)->type;
    std::vector<int64_t> layout = cacheLayout(x.rank());
    size_t seqPos = 0;
    for (size_t i = 0; i < layout.size(); ++i)
      if (layout[i] == 1)
        seqPos = i;
    bool ok = past.rank() == x.rank() && past.dtype == x.dtype;
    for (size_t i = 0; ok && i < layout.size(); ++i)
      if (i != seqPos && past.dims[i] != x.dims[layout[i]])
        ok = false;
    if (!ok) {
      reportOpError(d, op,
                    fmt::format("past state {} does not match {} in "
                                "storage layout",
                                past.str(), x.str()));
      return false;
    }
    TensorType full = x;
    full.dims[1] = past.dims[seqPos] + x.dims[1];
    TensorType present = past;
    present.dims[seqPos] = full.dims[1];
    op.getResult(0)->type = full;
    if (op.getNumResults() > 1)
      op.getResult(1)->type = present;
    return true;
  }
  default:
    return true;
  }
}

} // namespace archc::ir
