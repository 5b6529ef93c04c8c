//===- Reduce.cpp - Rules for reductions and top-k selection --------------===//
//
// This file implements verification and type inference for
//   reduce_sum / reduce_mean(x, axes, keepdims)
//       sum or mean over the listed axes (float); the reduced axes are
//       dropped, or kept as 1 with keepdims;
//   sinkhorn(x [..., n, n], iters, eps)          -> [..., n, n]
//       x / (column sums + eps), then iters - 1 rounds of row and column
//       normalisation (a doubly-stochastic matrix, DeepSeek-V4's
//       hyper-connection mixing);
//   topk_mask(scores [b, s, T], valid? [b, T])    -> bool [b, s, T]
//       per query row, the k highest scores among the keys it may see
//       (causal: the s queries are the last s of the T key positions; valid:
//       per-key flags); all of them when fewer than k are visible.
//
//===----------------------------------------------------------------------===//
#include "ir/OpRules.h"

#include <fmt/format.h>

#include <set>

namespace archc::ir {

bool verifyReduce(const Op &op, DiagnosticEngine &d) {
  if (op.getKind() == OpKind::Sinkhorn) {
    if (op.getNumOperands() != 1 || op.getNumResults() != 1 ||
        op.getInt("iters", 0) < 1) {
      reportOpError(d, op, "expects one operand, one result and iters >= 1");
      return false;
    }
    return true;
  }
  if (op.getKind() == OpKind::TopkMask) {
    size_t want = 1 + (op.getBool("valid") ? 1 : 0);
    if (op.getNumOperands() != want || op.getNumResults() != 1) {
      reportOpError(d, op,
                    fmt::format("expects {} operand(s) and 1 result", want));
      return false;
    }
    if (op.getInt("k", 0) <= 0) {
      reportOpError(d, op, "k must be positive");
      return false;
    }
    return true;
  }
  if (op.getNumOperands() != 1 || op.getNumResults() != 1) {
    reportOpError(d, op, "expects 1 operand and 1 result");
    return false;
  }
  const auto *axes = op.getAttr<std::vector<int64_t>>("axes");
  if (!axes || axes->empty()) {
    reportOpError(d, op, "needs a non-empty list of axes");
    return false;
  }
  return true;
}

bool inferReduce(Op &op, DiagnosticEngine &d) {
  const TensorType &x = op.getOperand(0)->type;
  if (op.getKind() == OpKind::Sinkhorn) {
    if (x.rank() < 2 || !isFloat(x.dtype) ||
        x.dims[x.rank() - 1] != x.dims[x.rank() - 2]) {
      reportOpError(d, op,
                    fmt::format("expects float square matrices "
                                "[..., n, n], got {}",
                                x.str()));
      return false;
    }
    op.getResult()->type = x;
    return true;
  }
  if (op.getKind() == OpKind::TopkMask) {
    if (x.rank() != 3 || !isFloat(x.dtype)) {
      reportOpError(d, op,
                    fmt::format("expects float scores [batch, seq, "
                                "keys], got {}",
                                x.str()));
      return false;
    }
    if (op.getBool("valid")) {
      const TensorType &v = op.getOperand(1)->type;
      if (v.dtype != DType::Bool || v.rank() != 2 || v.dims[0] != x.dims[0] ||
          v.dims[1] != x.dims[2]) {
        reportOpError(d, op,
                      fmt::format("valid {} must be bool [batch, keys] "
                                  "= [{}, {}]",
                                  v.str(), x.dims[0].str(), x.dims[2].str()));
        return false;
      }
    }
    op.getResult()->type = TensorType(DType::Bool, x.dims);
    return true;
  }
  if (!isFloat(x.dtype)) {
    reportOpError(
        d, op, fmt::format("needs a floating-point tensor, got {}", x.str()));
    return false;
  }
  std::set<size_t> reduced;
  for (int64_t a : *op.getAttr<std::vector<int64_t>>("axes")) {
    size_t axis;
    if (!normalizeAxis(a, x.rank(), axis)) {
      reportOpError(d, op,
                    fmt::format("axis {} is out of range for {}", a, x.str()));
      return false;
    }
    if (!reduced.insert(axis).second) {
      reportOpError(d, op, fmt::format("axis {} is listed twice", a));
      return false;
    }
  }
  bool keep = op.getBool("keepdims");
  std::vector<SymExpr> dims;
  for (size_t i = 0; i < x.rank(); ++i) {
    if (!reduced.count(i))
      dims.push_back(x.dims[i]);
    else if (keep)
      dims.push_back(SymExpr(1));
  }
  op.getResult()->type = TensorType(x.dtype, dims);
  return true;
}

} // namespace archc::ir
