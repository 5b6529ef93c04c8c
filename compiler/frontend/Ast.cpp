//===- Ast.cpp - Abstract syntax tree helpers -----------------------------===//
//
// This file implements small AST helpers (type spelling, operator spelling).
//
//===----------------------------------------------------------------------===//
#include "frontend/Ast.h"

namespace archc::ast {

std::string TypeRef::str() const {
  std::string s = name;
  if (elem)
    s += "<" + elem->str() + ">";
  if (optional)
    s += "?";
  return s;
}

const char *spelling(BinaryOp op) {
  switch (op) {
  case BinaryOp::Mul:
    return "*";
  case BinaryOp::Div:
    return "/";
  case BinaryOp::FloorDiv:
    return "//";
  case BinaryOp::Mod:
    return "%";
  case BinaryOp::Add:
    return "+";
  case BinaryOp::Sub:
    return "-";
  case BinaryOp::Lt:
    return "<";
  case BinaryOp::Le:
    return "<=";
  case BinaryOp::Gt:
    return ">";
  case BinaryOp::Ge:
    return ">=";
  case BinaryOp::Eq:
    return "==";
  case BinaryOp::Ne:
    return "!=";
  case BinaryOp::And:
    return "&&";
  case BinaryOp::Or:
    return "||";
  }
  return "?";
}

} // namespace archc::ast
