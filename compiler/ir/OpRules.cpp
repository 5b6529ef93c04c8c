//===- OpRules.cpp - Helpers shared by the op definitions ----------------===//
//
// This file implements the helpers the op family files share, and routes
// verification and type inference through the schemas.
//
//===----------------------------------------------------------------------===//
#include "ir/OpRules.h"

#include "ir/OpSchema.h"

#include <fmt/format.h>

namespace archc::ir {

void reportOpError(DiagnosticEngine &diags, const Op &op,
                   const std::string &message) {
  Diagnostic &d = diags.error(op.getLoc().range,
                              fmt::format("{}: {}", op.getMnemonic(), message));
  for (const InlineFrame *f = op.getLoc().inlinedAt.get(); f;
       f = f->parent.get())
    d.notes.push_back(
        {f->callSite, "in call to '" + f->callee + "' from here"});
}

bool broadcastShapes(const std::vector<SymExpr> &a,
                     const std::vector<SymExpr> &b, std::vector<SymExpr> &out) {
  size_t n = std::max(a.size(), b.size());
  out.assign(n, SymExpr(1));
  for (size_t i = 0; i < n; ++i) {
    const SymExpr *da = i < a.size() ? &a[a.size() - 1 - i] : nullptr;
    const SymExpr *db = i < b.size() ? &b[b.size() - 1 - i] : nullptr;
    SymExpr &o = out[n - 1 - i];
    if (!da)
      o = *db;
    else if (!db)
      o = *da;
    else if (*da == *db)
      o = *da;
    else if (*da == SymExpr(1))
      o = *db;
    else if (*db == SymExpr(1))
      o = *da;
    else
      return false;
  }
  return true;
}

bool normalizeAxis(int64_t axis, size_t rank, size_t &out) {
  int64_t r = static_cast<int64_t>(rank);
  if (axis < -r || axis >= r)
    return false;
  out = static_cast<size_t>(axis < 0 ? axis + r : axis);
  return true;
}

std::vector<int64_t> cacheLayout(size_t rank) {
  if (rank == 4)
    return {0, 2, 1, 3};
  std::vector<int64_t> p(rank);
  for (size_t i = 0; i < rank; ++i)
    p[i] = static_cast<int64_t>(i);
  return p;
}

bool recurrentStateType(const Op &op, TensorType &out) {
  const OpSchema &s = opSchema(op.getKind());
  if (!s.stateType)
    return false;
  for (const OperandSpec &o : s.operands) {
    if (o.origin == Origin::Pass || o.variadic)
      continue;
    const Value *v = op.operand(o.name);
    if (v && !v->type.known)
      return false;
  }
  return s.stateType(op, out);
}

bool verifyOp(const Op &op, DiagnosticEngine &d) {
  return verifyAgainstSchema(op, d);
}

bool inferOpTypes(Op &op, DiagnosticEngine &d) {
  InferRule rule = opSchema(op.getKind()).infer;
  return !rule || rule(op, d);
}

} // namespace archc::ir
