//===- Recurrent.cpp - Rules for causal_conv1d, delta_rule, compress -----===//
//
// This file implements verification and type inference for the ops of
// linear-attention layers, which own a decode-time state of constant size:
//   causal_conv1d(x [b, s, C], weight [C, 1, K])      -> [b, s, C]
//       state [b, C, K - 1]: the last K - 1 inputs
//   delta_rule(q, k [b, s, Hk, dk], v [b, s, Hv, dv],
//              g, beta [b, s, Hv])                     -> [b, s, Hv, dv]
//       state [b, Hv, dk, dv] in float32
//   compress(kv, gate [b, s, C], ape [ratio, C])     -> entries [b, s, d],
//                                                      valid bool [b, keys]
//       d = C (C / 2 with overlap); state [b, W - 1, 2 C] in float32, the
//       kv | gate inputs of the last W - 1 tokens (W = ratio, 2 ratio with
//       overlap); `valid` flags the key positions (past and new, the length
//       of the padding mask) whose token closes a window
// The kv-cache pass appends the past state as an operand (attr has_past)
// and adds the present state as a second result; the mask passes append
// the padding mask (attr masked) last.
//
//===----------------------------------------------------------------------===//
#include "ir/OpRules.h"

#include <fmt/format.h>

namespace archc::ir {

size_t baseOperandCount(const Op &op) {
  switch (op.getKind()) {
  case OpKind::CausalConv:
    return 2;
  case OpKind::DeltaRule:
    return 5;
  case OpKind::Compress:
    return 3;
  case OpKind::MlaAttention:
    return 5;
  default:
    return op.getNumOperands();
  }
}

namespace {
/// With a past state (after kv-cache), operand `next` must have the state's
/// type; advances `next` past it.
bool checkPastState(const Op &op, size_t &next, const TensorType &state,
                    DiagnosticEngine &d) {
  if (!op.getBool("has_past"))
    return true;
  const TensorType &past = op.getOperand(next++)->type;
  if (past == state)
    return true;
  reportOpError(d, op,
                fmt::format("past state {} does not match the state {}",
                            past.str(), state.str()));
  return false;
}

int64_t convKernel(const TensorType &w) {
  return w.dims.back().getConstant().value_or(0);
}
} // namespace

bool recurrentStateType(const Op &op, TensorType &out) {
  for (size_t i = 0; i < baseOperandCount(op); ++i)
    if (!op.getOperand(i)->type.known)
      return false;
  if (op.getKind() == OpKind::CausalConv) {
    const TensorType &x = op.getOperand(0)->type;
    out =
        TensorType(x.dtype, {x.dims[0], x.dims[2],
                             SymExpr(convKernel(op.getOperand(1)->type) - 1)});
    return true;
  }
  if (op.getKind() == OpKind::Compress) {
    const TensorType &kv = op.getOperand(0)->type;
    int64_t ratio = op.getInt("ratio", 0);
    int64_t window = op.getBool("overlap") ? 2 * ratio : ratio;
    out = TensorType(
        DType::F32, {kv.dims[0], SymExpr(window - 1), kv.dims[2] * SymExpr(2)});
    return true;
  }
  if (op.getKind() == OpKind::DeltaRule) {
    const TensorType &k = op.getOperand(1)->type;
    const TensorType &v = op.getOperand(2)->type;
    out = TensorType(DType::F32, {v.dims[0], v.dims[2], k.dims[3], v.dims[3]});
    return true;
  }
  return false;
}

bool verifyRecurrent(const Op &op, DiagnosticEngine &d) {
  size_t want = baseOperandCount(op) + (op.getBool("has_past") ? 1 : 0) +
                (op.getBool("masked") ? 1 : 0);
  if (op.getNumOperands() != want) {
    reportOpError(
        d, op,
        fmt::format("expects {} operands, has {}", want, op.getNumOperands()));
    return false;
  }
  std::string state = op.getString("state");
  if (state.empty()) {
    reportOpError(d, op, "needs a state name");
    return false;
  }
  if (op.getKind() == OpKind::Compress) {
    if (op.getInt("ratio", 0) < 2) {
      reportOpError(d, op,
                    fmt::format("ratio must be at least 2, got {}",
                                op.getInt("ratio", 0)));
      return false;
    }
    size_t results = 2 + (op.getBool("has_past") ? 1 : 0);
    if (op.getNumResults() != results) {
      reportOpError(d, op,
                    fmt::format("expects {} results, has {}", results,
                                op.getNumResults()));
      return false;
    }
  }
  return true;
}

namespace {
bool inferCompress(Op &op, DiagnosticEngine &d) {
  const TensorType &kv = op.getOperand(0)->type;
  const TensorType &gate = op.getOperand(1)->type;
  const TensorType &ape = op.getOperand(2)->type;
  int64_t ratio = op.getInt("ratio");
  bool overlap = op.getBool("overlap");
  if (kv.rank() != 3 || kv != gate || !isFloat(kv.dtype)) {
    reportOpError(d, op,
                  fmt::format("expects kv and gate as float [batch, "
                              "seq, channels] of one type, got {} "
                              "and {}",
                              kv.str(), gate.str()));
    return false;
  }
  auto channels = kv.dims[2].getConstant();
  if (!channels || (overlap && *channels % 2 != 0)) {
    reportOpError(d, op,
                  fmt::format("channels {} must be a constant{}",
                              kv.dims[2].str(),
                              overlap ? ", even with overlap (two "
                                        "halves)"
                                      : ""));
    return false;
  }
  if (ape.rank() != 2 || !isFloat(ape.dtype) || ape.dims[0] != SymExpr(ratio) ||
      ape.dims[1] != kv.dims[2]) {
    reportOpError(d, op,
                  fmt::format("ape {} must be [ratio, channels] = "
                              "[{}, {}]",
                              ape.str(), ratio, kv.dims[2].str()));
    return false;
  }
  TensorType state;
  recurrentStateType(op, state);
  size_t next = 3;
  if (!checkPastState(op, next, state, d))
    return false;
  SymExpr keys = kv.dims[1];
  if (op.getBool("masked")) {
    const TensorType &m = op.getOperand(next)->type;
    if (m.rank() != 2 || m.dims[0] != kv.dims[0]) {
      reportOpError(d, op,
                    fmt::format("mask {} must be [batch, keys]", m.str()));
      return false;
    }
    keys = m.dims[1];
  }
  int64_t out = overlap ? *channels / 2 : *channels;
  op.getResult(0)->type = TensorType(kv.dtype, {kv.dims[0], kv.dims[1], out});
  op.getResult(1)->type = TensorType(DType::Bool, {kv.dims[0], keys});
  if (op.getNumResults() > 2)
    op.getResult(2)->type = state;
  return true;
}
} // namespace

bool inferRecurrent(Op &op, DiagnosticEngine &d) {
  if (op.getKind() == OpKind::Compress)
    return inferCompress(op, d);
  size_t next = baseOperandCount(op);
  if (op.getKind() == OpKind::CausalConv) {
    const TensorType &x = op.getOperand(0)->type;
    const TensorType &w = op.getOperand(1)->type;
    if (x.rank() != 3) {
      reportOpError(d, op,
                    fmt::format("expects x as [batch, seq, channels], "
                                "got {}",
                                x.str()));
      return false;
    }
    bool shapeOk = (w.rank() == 3 && w.dims[1] == SymExpr(1)) || w.rank() == 2;
    if (!shapeOk || w.dims[0] != x.dims[2] || convKernel(w) < 1) {
      reportOpError(d, op,
                    fmt::format("weight {} must be [channels, 1, "
                                "kernel] with channels = {}",
                                w.str(), x.dims[2].str()));
      return false;
    }
  } else {
    const TensorType &q = op.getOperand(0)->type;
    const TensorType &k = op.getOperand(1)->type;
    const TensorType &v = op.getOperand(2)->type;
    const TensorType &g = op.getOperand(3)->type;
    const TensorType &beta = op.getOperand(4)->type;
    if (q.rank() != 4 || k.rank() != 4 || v.rank() != 4 || q != k) {
      reportOpError(d, op,
                    fmt::format("expects q, k [batch, seq, key_heads, "
                                "dk] of one type and v [batch, seq, "
                                "value_heads, dv], got {}, {}, {}",
                                q.str(), k.str(), v.str()));
      return false;
    }
    auto hk = k.dims[2].getConstant(), hv = v.dims[2].getConstant();
    if (v.dims[0] != k.dims[0] || v.dims[1] != k.dims[1] || !hk || !hv ||
        *hk <= 0 || *hv % *hk != 0) {
      reportOpError(d, op,
                    fmt::format("v {} must share batch and seq with k "
                                "{}, with value heads a multiple of "
                                "key heads",
                                v.str(), k.str()));
      return false;
    }
    std::vector<SymExpr> gate = {v.dims[0], v.dims[1], v.dims[2]};
    if (g.dims != gate || beta.dims != gate) {
      reportOpError(d, op,
                    fmt::format("g {} and beta {} must be [batch, "
                                "seq, value_heads] = [{}, {}, {}]",
                                g.str(), beta.str(), v.dims[0].str(),
                                v.dims[1].str(), v.dims[2].str()));
      return false;
    }
  }
  TensorType state;
  recurrentStateType(op, state);
  if (!checkPastState(op, next, state, d))
    return false;
  const TensorType &x =
      op.getOperand(op.getKind() == OpKind::CausalConv ? 0 : 2)->type;
  if (op.getBool("masked")) {
    const TensorType &m = op.getOperand(next)->type;
    if (m.rank() != 2 || m.dims[0] != x.dims[0]) {
      reportOpError(d, op,
                    fmt::format("mask {} must be [batch, keys]", m.str()));
      return false;
    }
  }
  op.getResult(0)->type = x;
  if (op.getNumResults() > 1)
    op.getResult(1)->type = state;
  return true;
}

} // namespace archc::ir
