//===- Operators.h - The operator table of the .arch language ---*- C++ -*-===//
//
// This file declares kOperators, the one list of the language's operators:
// each entry gives an operator's spelling (its token's literal in
// grammar/Arch.g4), what it builds in the AST, its precedence and its
// associativity. What derives from it:
//
//  - the parser's token type -> operator lookup and precedence climbing
//    (frontend/antlr/OperatorTokens.cpp, frontend/antlr/AstBuilder.cpp);
//  - the operator classes of the parser's nesting guard
//    (frontend/antlr/NestingGuard.cpp);
//  - ast::spelling(BinaryOp), the operator text of messages (Ast.cpp).
//
// The grammar necessarily lists the operator tokens too, and
// docs/language.md shows the precedence table; tests/unit/GrammarTest.cpp
// checks both against this table (and that every token the grammar accepts
// as an operator has an entry here), so they cannot drift apart. The
// hand-written lexer needs no operator list: it takes every punctuation
// token from the grammar's vocabulary.
//
// No ANTLR type appears here.
//
//===----------------------------------------------------------------------===//
#ifndef ARCHC_FRONTEND_OPERATORS_H
#define ARCHC_FRONTEND_OPERATORS_H

#include "frontend/Ast.h"

#include <cstdint>
#include <string_view>

namespace archc::ast {

/// Where an operator appears and what it builds.
enum class OperatorKind : uint8_t {
  Binary,     ///< `a op b` in an operator chain: a BinaryExpr
  Membership, ///< `a in b` / `a not in b` in an operator chain: an InExpr
  Prefix,     ///< `op a`: a UnaryExpr
  Compound,   ///< `x op= e` (a statement): an AugAssignStmt
};

enum class Assoc : uint8_t { Left, Right };

/// One operator of the language.
struct OperatorInfo {
  /// The source text: the token's literal in Arch.g4 (`not in` is the two
  /// tokens NOT and IN).
  std::string_view spelling;
  OperatorKind kind;
  /// Binary and Compound: the arithmetic/logic operation.
  BinaryOp binary = BinaryOp::Add;
  /// Prefix: the unary operation.
  UnaryOp unary = UnaryOp::Neg;
  /// Membership: `not in`.
  bool negated = false;
  /// Binary and Membership: binding strength in an operator chain, higher
  /// binds tighter (every chain operator binds looser than the prefix and
  /// postfix operators; `c ? a : b`, level 1, is grammar structure).
  uint8_t precedence = 0;
  Assoc assoc = Assoc::Left;
};

namespace detail {
constexpr OperatorInfo binary(std::string_view s, BinaryOp op, uint8_t prec,
                              Assoc assoc = Assoc::Left) {
  OperatorInfo o{s, OperatorKind::Binary};
  o.binary = op;
  o.precedence = prec;
  o.assoc = assoc;
  return o;
}
constexpr OperatorInfo membership(std::string_view s, bool negated,
                                  uint8_t prec) {
  OperatorInfo o{s, OperatorKind::Membership};
  o.negated = negated;
  o.precedence = prec;
  return o;
}
constexpr OperatorInfo prefix(std::string_view s, UnaryOp op) {
  OperatorInfo o{s, OperatorKind::Prefix};
  o.unary = op;
  return o;
}
constexpr OperatorInfo compound(std::string_view s, BinaryOp op) {
  OperatorInfo o{s, OperatorKind::Compound};
  o.binary = op;
  return o;
}
} // namespace detail

/// Every operator, chain operators tightest first. The first Binary entry of
/// a BinaryOp is its canonical spelling (`&&` rather than `and`).
inline constexpr OperatorInfo kOperators[] = {
    detail::binary("*", BinaryOp::Mul, 7),
    detail::binary("/", BinaryOp::Div, 7),
    detail::binary("%", BinaryOp::Mod, 7),
    detail::binary("+", BinaryOp::Add, 6),
    detail::binary("-", BinaryOp::Sub, 6),
    detail::binary("<", BinaryOp::Lt, 5),
    detail::binary("<=", BinaryOp::Le, 5),
    detail::binary(">", BinaryOp::Gt, 5),
    detail::binary(">=", BinaryOp::Ge, 5),
    detail::binary("==", BinaryOp::Eq, 5),
    detail::binary("!=", BinaryOp::Ne, 5),
    detail::membership("in", false, 4),
    detail::membership("not in", true, 4),
    detail::binary("&&", BinaryOp::And, 3),
    detail::binary("and", BinaryOp::And, 3),
    detail::binary("||", BinaryOp::Or, 2),
    detail::binary("or", BinaryOp::Or, 2),
    detail::prefix("-", UnaryOp::Neg),
    detail::prefix("!", UnaryOp::Not),
    detail::prefix("not", UnaryOp::Not),
    detail::compound("+=", BinaryOp::Add),
    detail::compound("-=", BinaryOp::Sub),
    detail::compound("*=", BinaryOp::Mul),
};

/// The entry of `kind` spelled `spelling`, or null.
constexpr const OperatorInfo *findOperator(OperatorKind kind,
                                           std::string_view spelling) {
  for (const OperatorInfo &o : kOperators)
    if (o.kind == kind && o.spelling == spelling)
      return &o;
  return nullptr;
}

} // namespace archc::ast

#endif // ARCHC_FRONTEND_OPERATORS_H
