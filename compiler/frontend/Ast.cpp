//===- Ast.cpp - Abstract syntax tree helpers -----------------------------===//
//
// This file implements small AST helpers (type spelling, operator spelling;
// operators are spelled from the table in Operators.h).
//
//===----------------------------------------------------------------------===//
#include "frontend/Ast.h"
#include "frontend/Operators.h"

namespace archc::ast {

std::string TypeRef::str() const {
  std::string s = name;
  if (elem) {
    s += '<';
    s += elem->str();
    s += '>';
  }
  if (optional)
    s += "?";
  return s;
}

const char *spelling(BinaryOp op) {
  // kOperators' spellings are string literals, so data() is terminated.
  for (const OperatorInfo &o : kOperators)
    if (o.kind == OperatorKind::Binary && o.binary == op)
      return o.spelling.data();
  return "?";
}

} // namespace archc::ast
