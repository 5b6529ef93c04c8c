//===- Shape.cpp - Rules for reshape, transpose, split, concat, slice -----===//
//
// This file implements verification and type inference for the shape
// manipulation ops (and expert_slice, which selects one expert's row of a
// stacked weight). Element counts are compared symbolically.
//
//===----------------------------------------------------------------------===//
#include "ir/OpRules.h"

#include <fmt/format.h>

#include <set>

namespace archc::ir {

bool verifyShapeOp(const Op &op, DiagnosticEngine &d) {
  if (op.getKind() != OpKind::Concat && op.getNumOperands() != 1) {
    reportOpError(d, op, "expects one operand");
    return false;
  }
  if (op.getKind() == OpKind::Concat && op.getNumOperands() < 1) {
    reportOpError(d, op, "expects at least one operand");
    return false;
  }
  if (op.getKind() == OpKind::Reshape &&
      !op.getAttr<std::vector<SymExpr>>("shape")) {
    reportOpError(d, op, "needs a shape attribute");
    return false;
  }
  return true;
}

static std::string dimsStr(const std::vector<SymExpr> &dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i)
    s += (i ? ", " : "") + dims[i].str();
  return s + "]";
}

bool inferShapeOp(Op &op, DiagnosticEngine &d) {
  const TensorType &x = op.getOperand(0)->type;
  switch (op.getKind()) {
  case OpKind::Reshape: {
    const auto &shape = *op.getAttr<std::vector<SymExpr>>("shape");
    TensorType r(x.dtype, shape);
    if (r.numElements() != x.numElements()) {
      reportOpError(d, op,
                    fmt::format("cannot reshape {} ({} elements) to {} ({} "
                                "elements)",
                                x.str(), x.numElements().str(), dimsStr(shape),
                                r.numElements().str()));
      return false;
    }
    op.getResult()->type = r;
    return true;
  }
  case OpKind::Transpose: {
    const auto *perm = op.getAttr<std::vector<int64_t>>("perm");
    std::set<int64_t> seen;
    if (perm)
      seen.insert(perm->begin(), perm->end());
    if (!perm || perm->size() != x.rank() || seen.size() != x.rank() ||
        *seen.begin() != 0 ||
        *seen.rbegin() != static_cast<int64_t>(x.rank()) - 1) {
      reportOpError(d, op,
                    fmt::format("perm is not a permutation of the {} "
                                "axes of {}",
                                x.rank(), x.str()));
      return false;
    }
    std::vector<SymExpr> dims;
    for (int64_t p : *perm)
      dims.push_back(x.dims[static_cast<size_t>(p)]);
    op.getResult()->type = TensorType(x.dtype, dims);
    return true;
  }
  case OpKind::Split: {
    size_t axis;
    if (!normalizeAxis(op.getInt("axis", -1), x.rank(), axis)) {
      reportOpError(d, op,
                    fmt::format("axis {} is out of range for {}",
                                op.getInt("axis", -1), x.str()));
      return false;
    }
    const auto &sizes = *op.getAttr<std::vector<int64_t>>("sizes");
    int64_t total = 0;
    for (int64_t s : sizes) {
      if (s <= 0) {
        reportOpError(d, op, "split sizes must be positive");
        return false;
      }
      total += s;
    }
    if (x.dims[axis] != SymExpr(total)) {
      reportOpError(d, op,
                    fmt::format("sizes add up to {} but axis {} of {} "
                                "has {}",
                                total, axis, x.str(), x.dims[axis].str()));
      return false;
    }
    for (size_t k = 0; k < sizes.size(); ++k) {
      TensorType r = x;
      r.dims[axis] = sizes[k];
      op.getResult(k)->type = r;
    }
    return true;
  }
  case OpKind::Concat: {
    size_t axis;
    if (!normalizeAxis(op.getInt("axis", -1), x.rank(), axis)) {
      reportOpError(d, op,
                    fmt::format("axis {} is out of range for {}",
                                op.getInt("axis", -1), x.str()));
      return false;
    }
    TensorType r = x;
    for (size_t k = 1; k < op.getNumOperands(); ++k) {
      const TensorType &y = op.getOperand(k)->type;
      bool ok = y.rank() == x.rank() && y.dtype == x.dtype;
      for (size_t i = 0; ok && i < x.rank(); ++i)
        if (i != axis && y.dims[i] != x.dims[i])
          ok = false;
      if (!ok) {
        reportOpError(d, op,
                      fmt::format("operand {} ({}) does not match {} "
                                  "outside axis {}",
                                  k, y.str(), x.str(), axis));
        return false;
      }
      r.dims[axis] = r.dims[axis] + y.dims[axis];
    }
    op.getResult()->type = r;
    return true;
  }
  case OpKind::ExpertSlice: {
    if (x.rank() < 2) {
      reportOpError(d, op,
                    fmt::format("expects a stacked [experts, ...] "
                                "tensor, got {}",
                                x.str()));
      return false;
    }
    TensorType r = x;
    r.dims.erase(r.dims.begin());
    op.getResult()->type = r;
    return true;
  }
  case OpKind::Slice: {
    size_t axis;
    if (!normalizeAxis(op.getInt("axis"), x.rank(), axis)) {
      reportOpError(d, op,
                    fmt::format("axis {} is out of range for {}",
                                op.getInt("axis"), x.str()));
      return false;
    }
    int64_t start = op.getInt("start"), end = op.getInt("end");
    auto dim = x.dims[axis].getConstant();
    if (start < 0 || end <= start || (dim && end > *dim)) {
      reportOpError(d, op,
                    fmt::format("range [{}, {}) is invalid for axis {} "
                                "of {}",
                                start, end, axis, x.str()));
      return false;
    }
    TensorType r = x;
    r.dims[axis] = end - start;
    op.getResult()->type = r;
    return true;
  }
  default:
    return true;
  }
}

} // namespace archc::ir
