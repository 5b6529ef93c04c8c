//===- Structure.cpp - Rules for leaves and control ops -------------------===//
//
// This file implements verification for param/const/state_in leaves and the
// control ops (repeat, yield, state_out, return). Their types are set when
// they are created (leaves) or by the pass that walks regions (repeat).
//
//===----------------------------------------------------------------------===//
#include "ir/OpRules.h"

#include <fmt/format.h>

#include <algorithm>

namespace archc::ir {

bool verifyStructure(const Op &op, DiagnosticEngine &d) {
  switch (op.getKind()) {
  case OpKind::Param:
  case OpKind::StateIn:
    if (op.getNumOperands() != 0 || op.getString("name").empty() ||
        !op.getResult()->type.known) {
      reportOpError(d, op, "needs a name and a declared type");
      return false;
    }
    return true;
  case OpKind::Const:
    if (op.getNumOperands() != 0 || !op.hasAttr("value")) {
      reportOpError(d, op, "needs a value");
      return false;
    }
    return true;
  case OpKind::StateOut:
    if (op.getNumOperands() != 1 || op.getString("name").empty()) {
      reportOpError(d, op, "expects one operand and a name");
      return false;
    }
    return true;
  case OpKind::Repeat: {
    if (op.getRegions().empty()) {
      reportOpError(d, op, "needs at least one layer kind");
      return false;
    }
    std::vector<int64_t> all;
    for (const auto &r : op.getRegions()) {
      if (r->getArguments().size() != op.getNumOperands()) {
        reportOpError(d, op, "each layer kind takes the carried values");
        return false;
      }
      const Op *t = r->getTerminator();
      if (!t || t->getKind() != OpKind::Yield ||
          t->getNumOperands() != op.getNumResults()) {
        reportOpError(d, op, "each layer kind must yield the carried values");
        return false;
      }
      all.insert(all.end(), r->layers.begin(), r->layers.end());
    }
    std::sort(all.begin(), all.end());
    int64_t begin = op.getInt("begin"), end = op.getInt("end");
    bool covered = static_cast<int64_t>(all.size()) == end - begin;
    for (size_t i = 0; covered && i < all.size(); ++i)
      covered = all[i] == begin + static_cast<int64_t>(i);
    if (!covered) {
      reportOpError(d, op,
                    fmt::format("layer kinds must cover layers {}..{} "
                                "exactly once",
                                begin, end));
      return false;
    }
    return true;
  }
  default:
    return true;
  }
}

bool inferStructure(Op &op, DiagnosticEngine &) {
  (void)op;
  return true;
}

} // namespace archc::ir
