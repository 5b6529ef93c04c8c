//===- Elementwise.cpp - Rules for elementwise ops and softmax ------------===//
//
// This file implements verification and type inference for the binary and
// unary elementwise ops (numpy broadcasting; a rank-0 constant adopts the
// other operand's element type: a float one any float type, an integral one
// an integer type outside division and power) and softmax.
//
//===----------------------------------------------------------------------===//
#include "ir/OpRules.h"

#include <fmt/format.h>

namespace archc::ir {

bool verifyElementwise(const Op &op, DiagnosticEngine &d) {
  size_t want = op.getFamily() == OpFamily::Binary ? 2 : 1;
  if (op.getNumOperands() != want || op.getNumResults() != 1) {
    reportOpError(d, op,
                  fmt::format("expects {} operand(s) and 1 result", want));
    return false;
  }
  if (op.getKind() == OpKind::Gelu) {
    std::string a = op.getString("approximate", "none");
    if (a != "none" && a != "tanh") {
      reportOpError(d, op,
                    fmt::format("approximate must be \"none\" or "
                                "\"tanh\", got \"{}\"",
                                a));
      return false;
    }
  }
  if (op.getKind() == OpKind::Cast &&
      parseDType(op.getString("dtype")) == DType::Unknown) {
    reportOpError(d, op, "needs a dtype attribute");
    return false;
  }
  return true;
}

bool inferElementwise(Op &op, DiagnosticEngine &d) {
  const TensorType &a = op.getOperand(0)->type;
  if (op.getFamily() == OpFamily::Binary) {
    const TensorType &b = op.getOperand(1)->type;
    DType dt = a.dtype;
    // An integral constant may join an integer tensor (positions - 3), except
    // in a division or power (no integer semantics defined).
    bool integerOp = op.getKind() != OpKind::Div && op.getKind() != OpKind::Pow;
    auto integralConst = [integerOp](const Value *v) {
      const Op *c = v->getDefiningOp();
      if (!integerOp || !c || c->getKind() != OpKind::Const)
        return false;
      double x = c->getFloat("value");
      return x == static_cast<double>(static_cast<int64_t>(x));
    };
    bool aInt = a.dtype == DType::I64 || a.dtype == DType::I32;
    bool bInt = b.dtype == DType::I64 || b.dtype == DType::I32;
    if (a.dtype != b.dtype) {
      if (b.rank() == 0 && isFloat(a.dtype) && isFloat(b.dtype))
        dt = a.dtype;
      else if (a.rank() == 0 && isFloat(a.dtype) && isFloat(b.dtype))
        dt = b.dtype;
      else if (b.rank() == 0 && aInt && integralConst(op.getOperand(1)))
        dt = a.dtype;
      else if (a.rank() == 0 && bInt && integralConst(op.getOperand(0)))
        dt = b.dtype;
      else {
        reportOpError(
            d, op,
            fmt::format("element types differ: {} and {}", a.str(), b.str()));
        return false;
      }
    }
    std::vector<SymExpr> dims;
    if (!broadcastShapes(a.dims, b.dims, dims)) {
      reportOpError(
          d, op,
          fmt::format("shapes {} and {} do not broadcast", a.str(), b.str()));
      return false;
    }
    op.getResult()->type = TensorType(dt, dims);
    return true;
  }
  if (op.getKind() == OpKind::Softmax) {
    size_t axis;
    if (!normalizeAxis(op.getInt("axis", -1), a.rank(), axis)) {
      reportOpError(d, op,
                    fmt::format("axis {} is out of range for {}",
                                op.getInt("axis", -1), a.str()));
      return false;
    }
  }
  if (op.getKind() != OpKind::Cast && !isFloat(a.dtype)) {
    reportOpError(
        d, op, fmt::format("needs a floating-point tensor, got {}", a.str()));
    return false;
  }
  TensorType r = a;
  if (op.getKind() == OpKind::Cast)
    r.dtype = parseDType(op.getString("dtype"));
  op.getResult()->type = r;
  return true;
}

} // namespace archc::ir
