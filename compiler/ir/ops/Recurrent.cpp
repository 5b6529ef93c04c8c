//===- Recurrent.cpp - Rules for causal_conv1d and delta_rule -------------===//
//
// This file implements verification and type inference for the ops of
// linear-attention layers, which own a decode-time state of constant size:
//   causal_conv1d(x [b, s, C], weight [C, 1, K])      -> [b, s, C]
//       state [b, C, K - 1]: the last K - 1 inputs
//   delta_rule(q, k [b, s, Hk, dk], v [b, s, Hv, dv],
//              g, beta [b, s, Hv])                     -> [b, s, Hv, dv]
//       state [b, Hv, dk, dv] in float32
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
  case OpKind::MlaAttention:
    return 5;
  default:
    return op.getNumOperands();
  }
}

namespace {
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
    out = TensorType(x.dtype, {x.dims[0], x.dims[2],
                               SymExpr(convKernel(op.getOperand(1)->type) - 1)});
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
    reportOpError(d, op, fmt::format("expects {} operands, has {}", want,
                                     op.getNumOperands()));
    return false;
  }
  std::string state = op.getString("state");
  if (state.empty()) {
    reportOpError(d, op, "needs a state name");
    return false;
  }
  return true;
}

bool inferRecurrent(Op &op, DiagnosticEngine &d) {
  size_t next = baseOperandCount(op);
  if (op.getKind() == OpKind::CausalConv) {
    const TensorType &x = op.getOperand(0)->type;
    const TensorType &w = op.getOperand(1)->type;
    if (x.rank() != 3) {
      reportOpError(d, op, fmt::format("expects x as [batch, seq, channels], "
                                       "got {}",
                                       x.str()));
      return false;
    }
    bool shapeOk = (w.rank() == 3 && w.dims[1] == SymExpr(1)) || w.rank() == 2;
    if (!shapeOk || w.dims[0] != x.dims[2] || convKernel(w) < 1) {
      reportOpError(d, op, fmt::format("weight {} must be [channels, 1, "
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
      reportOpError(d, op, fmt::format("expects q, k [batch, seq, key_heads, "
                                       "dk] of one type and v [batch, seq, "
                                       "value_heads, dv], got {}, {}, {}",
                                       q.str(), k.str(), v.str()));
      return false;
    }
    auto hk = k.dims[2].getConstant(), hv = v.dims[2].getConstant();
    if (v.dims[0] != k.dims[0] || v.dims[1] != k.dims[1] || !hk || !hv ||
        *hk <= 0 || *hv % *hk != 0) {
      reportOpError(d, op, fmt::format("v {} must share batch and seq with k "
                                       "{}, with value heads a multiple of "
                                       "key heads",
                                       v.str(), k.str()));
      return false;
    }
    std::vector<SymExpr> gate = {v.dims[0], v.dims[1], v.dims[2]};
    if (g.dims != gate || beta.dims != gate) {
      reportOpError(d, op, fmt::format("g {} and beta {} must be [batch, "
                                       "seq, value_heads] = [{}, {}, {}]",
                                       g.str(), beta.str(), v.dims[0].str(),
                                       v.dims[1].str(), v.dims[2].str()));
      return false;
    }
  }
  TensorType state;
  recurrentStateType(op, state);
  if (op.getBool("has_past")) {
    const TensorType &past = op.getOperand(next++)->type;
    if (past != state) {
      reportOpError(d, op, fmt::format("past state {} does not match the "
                                       "state {}",
                                       past.str(), state.str()));
      return false;
    }
  }
  const TensorType &x = op.getOperand(op.getKind() == OpKind::CausalConv ? 0 : 2)->type;
  if (op.getBool("masked")) {
    const TensorType &m = op.getOperand(next)->type;
    if (m.rank() != 2 || m.dims[0] != x.dims[0]) {
      reportOpError(d, op, fmt::format("mask {} must be [batch, keys]",
                                       m.str()));
      return false;
    }
  }
  op.getResult(0)->type = x;
  if (op.getNumResults() > 1)
    op.getResult(1)->type = state;
  return true;
}

} // namespace archc::ir
