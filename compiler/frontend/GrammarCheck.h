//===- GrammarCheck.h - Grammar introspection for tests ---------*- C++ -*-===//
//
// This file declares test support that looks at grammar/Arch.g4 through the
// code ANTLR generates from it: the generated lexer (to compare with archc's
// hand-written one), the parser's ATN (which tokens can begin a rule), the
// labeled alternatives that occur in a parse tree, and the AST builder's
// dispatch on a chosen rule. It lives in the archc_grammar_check library,
// linked only into the unit tests. No ANTLR type appears here.
//
//===----------------------------------------------------------------------===//
#ifndef ARCHC_FRONTEND_GRAMMARCHECK_H
#define ARCHC_FRONTEND_GRAMMARCHECK_H

#include "frontend/Parser.h"

#include <string>
#include <vector>

namespace archc::grammarcheck {

/// Lexes `text` with the lexer ANTLR generates from Arch.g4 (through EOF).
std::vector<LexedToken> lexWithGeneratedLexer(const std::string &text);

/// The tokens that can begin parser rule `rule` of Arch.g4, each as its
/// literal without quotes (`*`, `not`) or, for tokens without one, its
/// symbolic name (`ID`). Empty for an unknown rule.
std::vector<std::string> firstTokens(const std::string &rule);

/// Every literal token of the grammar's vocabulary, without quotes.
std::vector<std::string> literalTokens();

/// The labeled alternatives (`# Label` in Arch.g4) whose contexts occur in
/// the parse tree of `text`. Sets `error` when `text` does not parse.
std::vector<std::string> alternativesInParseTree(const std::string &text,
                                                 std::string &error);

/// Parses `text` and runs the AST builder's expression dispatch on the first
/// context of rule `rule` in the tree. Returns "" when an expression was
/// built, the builder's internal-error message otherwise.
std::string buildExpressionAt(const std::string &text, const std::string &rule);

} // namespace archc::grammarcheck

#endif // ARCHC_FRONTEND_GRAMMARCHECK_H
