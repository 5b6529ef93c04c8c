//===- Verifier.cpp - Structural IR verification --------------------------===//
//
// This file implements the IR verifier.
//
//===----------------------------------------------------------------------===//
#include "ir/Verifier.h"

#include "ir/OpRules.h"

#include <fmt/format.h>

#include <set>

namespace archc::ir {

namespace {
class Verifier {
public:
  Verifier(const Module &m, DiagnosticEngine &d) : m(m), diags(d) {}

  bool run() {
    for (const WeightDecl &w : m.weights)
      weightNames.insert(w.pattern);
    const Op *term = m.graph.body.getTerminator();
    if (!term || term->getKind() != OpKind::Return) {
      diags.error(SourceRange(), "internal: graph body must end with return");
      return false;
    }
    if (term->getNumOperands() != m.graph.outputNames.size()) {
      reportOpError(diags, *term, "output names and values differ in number");
      return false;
    }
    std::vector<std::set<const Value *>> scopes;
    return verifyBlock(m.graph.body, scopes);
  }

private:
  const Module &m;
  DiagnosticEngine &diags;
  std::set<std::string> weightNames;
  std::set<std::string> instances; ///< built on first need

  /// Params name a declared pattern, or (after expand-repeat) one of its
  /// per-layer instances.
  bool isDeclared(const std::string &name) {
    if (weightNames.count(name))
      return true;
    if (instances.empty())
      for (const WeightDecl &w : m.weights)
        for (int64_t l : w.layers)
          instances.insert(instantiatePattern(w.pattern, l, -1));
    return instances.count(name) != 0;
  }

  bool defined(const Value *v,
               const std::vector<std::set<const Value *>> &scopes) {
    for (const auto &s : scopes)
      if (s.count(v))
        return true;
    return false;
  }

  bool verifyBlock(const Block &b,
                   std::vector<std::set<const Value *>> &scopes) {
    scopes.emplace_back();
    for (const auto &arg : b.getArguments())
      scopes.back().insert(arg.get());
    bool ok = true;
    for (const auto &opPtr : b.getOps()) {
      const Op &op = *opPtr;
      for (size_t i = 0; i < op.getNumOperands(); ++i) {
        if (!op.getOperand(i) || !defined(op.getOperand(i), scopes)) {
          reportOpError(
              diags, op,
              fmt::format("operand {} is used before it is defined", i));
          ok = false;
        }
      }
      bool isTerminator =
          op.getKind() == OpKind::Yield || op.getKind() == OpKind::Return;
      if (isTerminator && &op != b.getTerminator()) {
        reportOpError(diags, op, "terminator in the middle of a block");
        ok = false;
      }
      if (op.getKind() == OpKind::Param &&
          !isDeclared(op.attr<std::string>("name"))) {
        reportOpError(diags, op,
                      fmt::format("weight '{}' has no declaration",
                                  op.attr<std::string>("name")));
        ok = false;
      }
      ok &= verifyOp(op, diags);
      for (const auto &r : op.getRegions()) {
        const Op *t = r->getTerminator();
        if (!t || t->getKind() != OpKind::Yield) {
          reportOpError(diags, op, "region must end with yield");
          ok = false;
        }
        ok &= verifyBlock(*r, scopes);
      }
      for (const auto &res : op.getResults())
        scopes.back().insert(res.get());
    }
    scopes.pop_back();
    return ok;
  }
};
} // namespace

bool verifyModule(const Module &m, DiagnosticEngine &diags) {
  Verifier v(m, diags);
  return v.run();
}

} // namespace archc::ir
