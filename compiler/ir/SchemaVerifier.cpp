//===- SchemaVerifier.cpp - Checking ops against their schemas -----------===//
//
// This file implements verifyAgainstSchema(): the structural checks every
// op gets from its schema (operands, results, attributes, regions), then
// the op's own semantic rule.
//
//===----------------------------------------------------------------------===//
#include "ir/OpRules.h"
#include "ir/OpSchema.h"

#include <fmt/format.h>

namespace archc::ir {

namespace {
bool toggled(const OperandSpec &o) {
  return o.optional || o.origin == Origin::Pass;
}

bool checkOperands(const Op &op, const OpSchema &s, DiagnosticEngine &d) {
  uint32_t present = op.getPresentOperands();
  size_t fixed = 0;
  bool variadic = false;
  for (size_t k = 0; k < s.operands.size(); ++k) {
    const OperandSpec &o = s.operands[k];
    bool on = present >> k & 1;
    if (on && !toggled(o)) {
      reportOpError(d, op,
                    fmt::format("operand '{}' is marked optional but the "
                                "schema requires it",
                                o.name));
      return false;
    }
    if (o.variadic)
      variadic = true;
    else if (!toggled(o) || on)
      ++fixed;
    if (on && !o.needs.empty() && !op.hasOperand(o.needs)) {
      reportOpError(d, op, fmt::format("{} needs {}", o.name, o.needs));
      return false;
    }
  }
  if (present >> s.operands.size()) {
    reportOpError(d, op, "marks operands its schema does not declare");
    return false;
  }
  size_t n = op.getNumOperands();
  if (variadic ? n < fixed : n != fixed) {
    reportOpError(d, op,
                  fmt::format("expects {}{} operand(s), has {}",
                              variadic ? "at least " : "", fixed, n));
    return false;
  }
  return true;
}

bool checkAttrs(const Op &op, const OpSchema &s, DiagnosticEngine &d) {
  for (const auto &[name, value] : op.getAttrs()) {
    auto k = s.findAttr(name);
    if (!k) {
      reportOpError(d, op, fmt::format("undeclared attribute '{}'", name));
      return false;
    }
    if (auto problem = checkAttrValue(s.attrs[*k], value)) {
      reportOpError(d, op, *problem);
      return false;
    }
  }
  for (const AttrSpec &a : s.attrs)
    if (a.required() && a.origin != Origin::Pass &&
        !op.getAttrs().count(a.name)) {
      reportOpError(d, op, fmt::format("needs the attribute '{}'", a.name));
      return false;
    }
  return true;
}

bool checkResults(const Op &op, const OpSchema &s, DiagnosticEngine &d) {
  size_t base = 0, added = 0;
  for (const ResultSpec &r : s.results) {
    if (r.origin == Origin::Pass)
      ++added;
    else if (r.perOperand)
      base += op.getNumOperands();
    else if (!r.variadicFrom.empty())
      base += op.attr<std::vector<int64_t>>(r.variadicFrom).size();
    else
      ++base;
  }
  size_t n = op.getNumResults();
  if (n != base && n != base + added) {
    reportOpError(d, op,
                  added ? fmt::format("expects {} or {} results, has {}", base,
                                      base + added, n)
                        : fmt::format("expects {} result(s), has {}", base, n));
    return false;
  }
  return true;
}

bool checkRegions(const Op &op, const OpSchema &s, DiagnosticEngine &d) {
  size_t n = op.getRegions().size();
  bool repeated = !s.regions.empty() && s.regions.back().repeated;
  if (repeated ? n < s.regions.size() : n != s.regions.size()) {
    reportOpError(d, op,
                  fmt::format("expects {}{} region(s), has {}",
                              repeated ? "at least " : "", s.regions.size(),
                              n));
    return false;
  }
  return true;
}
} // namespace

bool verifyAgainstSchema(const Op &op, DiagnosticEngine &d) {
  const OpSchema &s = opSchema(op.getKind());
  if (!checkOperands(op, s, d) || !checkAttrs(op, s, d) ||
      !checkResults(op, s, d) || !checkRegions(op, s, d))
    return false;
  return !s.verify || s.verify(op, d);
}

} // namespace archc::ir
