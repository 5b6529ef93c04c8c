//===- EvalArithmetic.cpp - Operators on compile-time values and tensors
//---===//
#include "irgen/Evaluator.h"
#include "support/CheckedArith.h"

#include <fmt/format.h>

#include <cmath>
#include <stdexcept>

namespace archc {

using ir::OpKind;

EvalValue Evaluator::dimArith(ast::BinaryOp op, const ir::SymExpr &x,
                              const ir::SymExpr &y, SourceRange range) {
  using B = ast::BinaryOp;
  switch (op) {
  case B::Add:
    return EvalValue::dim(x + y);
  case B::Sub:
    return EvalValue::dim(x - y);
  case B::Mul:
    return EvalValue::dim(x * y);
  case B::Div:
    if (auto c = y.getConstant(); c && *c != 0)
      if (auto q = x.divExact(*c))
        return EvalValue::dim(*q);
    [[fallthrough]];
  default:
    error(range, fmt::format("'{}' is not defined on symbolic dims {} and "
                             "{} (dims are polynomials)",
                             ast::spelling(op), x.str(), y.str()));
    return EvalValue::poison();
  }
}

EvalValue Evaluator::arith(ast::BinaryOp op, const EvalValue &a,
                           const EvalValue &b, SourceRange range) {
  using B = ast::BinaryOp;
  if (a.isPoison() || b.isPoison())
    return EvalValue::poison();
  const char *sp = ast::spelling(op);
  // Equality works for every compile-time value; a tensor compared with
  // none tests whether an optional tensor argument was given.
  if (op == B::Eq || op == B::Ne) {
    if ((a.isTensor() && b.isNone()) || (a.isNone() && b.isTensor()))
      return EvalValue::boolean(op == B::Ne);
    if (a.isTensor() || b.isTensor()) {
      error(range, fmt::format("'{}' compares compile-time values, not "
                               "tensors",
                               sp));
      return EvalValue::poison();
    }
    return EvalValue::boolean(a.equals(b) == (op == B::Eq));
  }
  // Tensor arithmetic becomes IR.
  if (a.isTensor() || b.isTensor()) {
    OpKind kind;
    switch (op) {
    case B::Add:
      kind = OpKind::Add;
      break;
    case B::Sub:
      kind = OpKind::Sub;
      break;
    case B::Mul:
      kind = OpKind::Mul;
      break;
    case B::Div:
      kind = OpKind::Div;
      break;
    default:
      error(range, fmt::format("operator '{}' is not defined on tensors", sp));
      return EvalValue::poison();
    }
    ir::Value *x = asTensor(a, range), *y = asTensor(b, range);
    if (!x || !y)
      return EvalValue::poison();
    // An integral number added to, subtracted from or multiplying an integer
    // tensor (positions - 3) is an integer constant.
    auto adopt = [kind](const EvalValue &num, ir::Value *c,
                        const ir::Value *t) {
      bool integer = t->type.known &&
                     (t->type.dtype == ir::DType::I64 ||
                      t->type.dtype == ir::DType::I32) &&
                     kind != OpKind::Div;
      if (num.isNumber() && integer &&
          num.getNumber() ==
              static_cast<double>(static_cast<int64_t>(num.getNumber())))
        c->type = ir::TensorType(t->type.dtype, {});
    };
    if (b.isTensor())
      adopt(a, x, y);
    if (a.isTensor())
      adopt(b, y, x);
    return EvalValue::tensor(createOp(kind, {x, y}, range)->getResult());
  }
  // Symbolic dims.
  bool aDim = a.getKind() == EvalValue::Kind::Dim,
       bDim = b.getKind() == EvalValue::Kind::Dim;
  if (aDim || bDim) {
    if ((!aDim && !a.isInt()) || (!bDim && !b.isInt())) {
      error(range, fmt::format("cannot apply '{}' to {} and {}", sp,
                               a.typeName(), b.typeName()));
      return EvalValue::poison();
    }
    ir::SymExpr x = aDim ? a.getDim() : ir::SymExpr(a.getInt());
    ir::SymExpr y = bDim ? b.getDim() : ir::SymExpr(b.getInt());
    // SymExpr's coefficient arithmetic throws on int64 overflow.
    try {
      return dimArith(op, x, y, range);
    } catch (const std::overflow_error &) {
      error(range,
            fmt::format("integer overflow in {} {} {}", x.str(), sp, y.str()));
      return EvalValue::poison();
    }
  }
  // String concatenation and comparison.
  if (a.getKind() == EvalValue::Kind::String &&
      b.getKind() == EvalValue::Kind::String) {
    if (op == B::Add)
      return EvalValue::string(a.getString() + b.getString());
    if (op == B::Lt || op == B::Le || op == B::Gt || op == B::Ge) {
      int c = a.getString().compare(b.getString());
      bool r = op == B::Lt   ? c < 0
               : op == B::Le ? c <= 0
               : op == B::Gt ? c > 0
                             : c >= 0;
      return EvalValue::boolean(r);
    }
  }
  if (a.getKind() == EvalValue::Kind::List &&
      b.getKind() == EvalValue::Kind::List && op == B::Add) {
    std::vector<EvalValue> l = a.getList();
    l.insert(l.end(), b.getList().begin(), b.getList().end());
    return EvalValue::list(std::move(l));
  }
  if (!a.isNumber() || !b.isNumber()) {
    error(range, fmt::format("cannot apply '{}' to {} and {}", sp, a.typeName(),
                             b.typeName()));
    return EvalValue::poison();
  }
  if (a.isInt() && b.isInt()) {
    int64_t x = a.getInt(), y = b.getInt();
    auto checked = [&](std::optional<int64_t> r) {
      if (r)
        return EvalValue::integer(*r);
      error(range, fmt::format("integer overflow in {} {} {}", x, sp, y));
      return EvalValue::poison();
    };
    switch (op) {
    case B::Add:
      return checked(checkedAdd(x, y));
    case B::Sub:
      return checked(checkedSub(x, y));
    case B::Mul:
      return checked(checkedMul(x, y));
    case B::Div:
      if (y == 0)
        break;
      // Exact integer division stays an int; otherwise a float. -1 divides
      // everything, and INT64_MIN / -1 does not fit.
      if (*flooredMod(x, y) == 0)
        return checked(checkedDiv(x, y));
      return EvalValue::floating(static_cast<double>(x) /
                                 static_cast<double>(y));
    case B::Mod:
      if (y == 0)
        break;
      return EvalValue::integer(*flooredMod(x, y));
    case B::Lt:
      return EvalValue::boolean(x < y);
    case B::Le:
      return EvalValue::boolean(x <= y);
    case B::Gt:
      return EvalValue::boolean(x > y);
    case B::Ge:
      return EvalValue::boolean(x >= y);
    default:
      break;
    }
    if (y == 0) {
      error(range, fmt::format("division by zero in {} {} {}", x, sp, y));
      return EvalValue::poison();
    }
  }
  double x = a.getNumber(), y = b.getNumber();
  switch (op) {
  case B::Add:
    return EvalValue::floating(x + y);
  case B::Sub:
    return EvalValue::floating(x - y);
  case B::Mul:
    return EvalValue::floating(x * y);
  case B::Div:
    if (y == 0) {
      error(range, "division by zero");
      return EvalValue::poison();
    }
    return EvalValue::floating(x / y);
  case B::Mod:
    if (y == 0) {
      error(range, "division by zero");
      return EvalValue::poison();
    }
    return EvalValue::floating(x - std::floor(x / y) * y);
  case B::Lt:
    return EvalValue::boolean(x < y);
  case B::Le:
    return EvalValue::boolean(x <= y);
  case B::Gt:
    return EvalValue::boolean(x > y);
  case B::Ge:
    return EvalValue::boolean(x >= y);
  default:
    break;
  }
  error(range, fmt::format("cannot apply '{}' to numbers", sp));
  return EvalValue::poison();
}

} // namespace archc
