//===- OperatorTokens.h - Token types of the operator table ----*- C++ -*-===//
//
// Private to the front end. This file declares OperatorTokens, the operator
// table (frontend/Operators.h) indexed by the grammar's token types, as the
// AST builder and the nesting guard look operators up.
//
//===----------------------------------------------------------------------===//
#ifndef ARCHC_FRONTEND_ANTLR_OPERATORTOKENS_H
#define ARCHC_FRONTEND_ANTLR_OPERATORTOKENS_H

#include "frontend/Operators.h"

#include "antlr4-runtime.h"

#include <string>
#include <vector>

namespace archc::frontend {

/// kOperators by token type. Built once from the grammar's vocabulary.
struct OperatorTokens {
  /// Per token type: the Binary or Membership (`in`) entry whose spelling
  /// is that token, or null.
  std::vector<const ast::OperatorInfo *> infix;
  /// Per token type: the Prefix entry, or null.
  std::vector<const ast::OperatorInfo *> prefix;
  /// Per token type: the Compound entry, or null.
  std::vector<const ast::OperatorInfo *> compound;
  /// The Membership entries: [0] `in`, [1] `not in`.
  const ast::OperatorInfo *membership[2] = {nullptr, nullptr};
};

/// The table for the generated parser's vocabulary. Throws
/// std::logic_error (an internal error) when an operator's spelling is not
/// a token of the grammar or the table is inconsistent.
const OperatorTokens &operatorTokens(const antlr4::dfa::Vocabulary &vocabulary);

/// The token type whose literal in the vocabulary is `'text'`, or
/// antlr4::Token::INVALID_TYPE.
size_t literalTokenType(const antlr4::dfa::Vocabulary &vocabulary,
                        std::string_view text);

} // namespace archc::frontend

#endif // ARCHC_FRONTEND_ANTLR_OPERATORTOKENS_H
