//===- Parser.h - .arch front end entry point -------------------*- C++ -*-===//
//
// This file declares parseArchFile(), which lexes and parses one .arch file
// with the ANTLR4-generated parser and builds the hand-written AST. Syntax
// errors are reported through the DiagnosticEngine. No ANTLR type escapes:
// only Parser.cpp and frontend/antlr/ see ANTLR headers.
//
//===----------------------------------------------------------------------===//
#ifndef ARCHC_FRONTEND_PARSER_H
#define ARCHC_FRONTEND_PARSER_H

#include "frontend/Ast.h"
#include "support/Diagnostics.h"

#include <memory>

namespace archc {

/// Parses the file `fileId` (already loaded in the SourceMgr). Returns null
/// when any syntax error was reported.
std::unique_ptr<ast::File> parseArchFile(uint32_t fileId, const SourceMgr &sm,
                                         DiagnosticEngine &diags);

/// A token as the parser sees it (for tests and tools).
struct LexedToken {
  size_t type;
  std::string text;
  size_t line, column;
};

/// Runs archc's lexer over `text` (through EOF). The generated lexer it must
/// match is in GrammarCheck.h (test support).
std::vector<LexedToken> lexArch(const std::string &text);

/// Limits that protect the parser from pathological input (deeply nested
/// brackets or operator chains would otherwise exhaust the stack).
constexpr unsigned kMaxNestingDepth = 256;

} // namespace archc

#endif // ARCHC_FRONTEND_PARSER_H
