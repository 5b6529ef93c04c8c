//===- Linear.cpp - Rules for matmul, gather and norms --------------------===//
//
// This file implements verification and type inference for matmul (with a
// 2-D weight in either storage layout, or batched), gather (embedding
// lookup), rms_norm and layer_norm.
//
//===----------------------------------------------------------------------===//
#include "ir/OpRules.h"

#include <fmt/format.h>

namespace archc::ir {

bool verifyLinear(const Op &op, DiagnosticEngine &d) {
  size_t n = op.getNumOperands();
  bool ok = true;
  switch (op.getKind()) {
  case OpKind::MatMul:
  case OpKind::Gather:
    ok = n == 2;
    break;
  case OpKind::RmsNorm:
    ok = n == 1 || n == 2;
    break;
  case OpKind::LayerNorm:
    ok = n >= 1 && n <= 3;
    break;
  default:
    break;
  }
  if (!ok) {
    reportOpError(d, op, fmt::format("unexpected number of operands ({})", n));
    return false;
  }
  if ((op.getKind() == OpKind::RmsNorm || op.getKind() == OpKind::LayerNorm) &&
      !(op.getFloat("eps", -1) > 0)) {
    reportOpError(d, op, "eps must be a positive float");
    return false;
  }
  return true;
}

static bool inferMatMul(Op &op, DiagnosticEngine &d) {
  const TensorType &a = op.getOperand(0)->type;
  const TensorType &b = op.getOperand(1)->type;
  bool transB = op.getBool("transpose_b");
  if (a.dtype != b.dtype) {
    reportOpError(
        d, op,
        fmt::format("element types differ: {} and {}", a.str(), b.str()));
    return false;
  }
  if (a.rank() < 1 || b.rank() < 2) {
    reportOpError(d, op,
                  fmt::format("needs a tensor of rank >= 1 and a "
                              "matrix, got {} and {}",
                              a.str(), b.str()));
    return false;
  }
  const SymExpr &k = a.dims.back();
  const SymExpr &kb = transB ? b.dims[b.rank() - 1] : b.dims[b.rank() - 2];
  const SymExpr &n = transB ? b.dims[b.rank() - 2] : b.dims[b.rank() - 1];
  if (k != kb) {
    reportOpError(
        d, op,
        fmt::format("inner dimensions differ: the input's last dim is {} but "
                    "the {} matrix {} expects {} ({})",
                    k.str(), transB ? "[out, in]" : "[in, out]", b.str(),
                    kb.str(),
                    transB ? "transpose_b = true" : "transpose_b = false"));
    return false;
  }
  std::vector<SymExpr> dims;
  if (b.rank() == 2) {
    dims.assign(a.dims.begin(), a.dims.end() - 1);
    dims.push_back(n);
  } else {
    if (a.rank() < 2) {
      reportOpError(d, op, "batched matmul needs rank >= 2 on both sides");
      return false;
    }
    std::vector<SymExpr> ba(a.dims.begin(), a.dims.end() - 2),
        bb(b.dims.begin(), b.dims.end() - 2);
    if (!broadcastShapes(ba, bb, dims)) {
      reportOpError(d, op,
                    fmt::format("batch dims of {} and {} do not "
                                "broadcast",
                                a.str(), b.str()));
      return false;
    }
    dims.push_back(a.dims[a.rank() - 2]);
    dims.push_back(n);
  }
  op.getResult()->type = TensorType(a.dtype, dims);
  return true;
}

bool inferLinear(Op &op, DiagnosticEngine &d) {
  switch (op.getKind()) {
  case OpKind::MatMul:
    return inferMatMul(op, d);
  case OpKind::Gather: {
    const TensorType &t = op.getOperand(0)->type;
    const TensorType &i = op.getOperand(1)->type;
    if (i.dtype != DType::I64 && i.dtype != DType::I32) {
      reportOpError(d, op,
                    fmt::format("indices must be integers, got {}", i.str()));
      return false;
    }
    if (t.rank() < 1) {
      reportOpError(d, op, "table must have rank >= 1");
      return false;
    }
    std::vector<SymExpr> dims = i.dims;
    dims.insert(dims.end(), t.dims.begin() + 1, t.dims.end());
    op.getResult()->type = TensorType(t.dtype, dims);
    return true;
  }
  case OpKind::RmsNorm:
  case OpKind::LayerNorm: {
    const TensorType &x = op.getOperand(0)->type;
    if (x.rank() < 1 || !isFloat(x.dtype)) {
      reportOpError(
          d, op, fmt::format("needs a floating-point tensor, got {}", x.str()));
      return false;
    }
    for (size_t k = 1; k < op.getNumOperands(); ++k) {
      const TensorType &w = op.getOperand(k)->type;
      if (w.rank() != 1 || w.dims[0] != x.dims.back()) {
        reportOpError(d, op,
                      fmt::format("{} {} does not match the normalised dim {} "
                                  "of {}",
                                  k == 1 ? "weight" : "bias", w.str(),
                                  x.dims.back().str(), x.str()));
        return false;
      }
    }
    op.getResult()->type = x;
    return true;
  }
  default:
    return true;
  }
}

} // namespace archc::ir
