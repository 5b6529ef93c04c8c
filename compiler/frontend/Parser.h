//===- Parser.h - .arch front end entry point -------------------*- C++ -*-===//
//
// This file declares parseArchFile(), which lexes and parses one .arch file
// with the ANTLR4-generated parser and builds the hand-written AST. Syntax
// errors are reported through the DiagnosticEngine; no ANTLR type escapes.
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

/// Limits that protect the parser from pathological input (deeply nested
/// brackets or operator chains would otherwise exhaust the stack).
constexpr unsigned kMaxNestingDepth = 256;

} // namespace archc

#endif // ARCHC_FRONTEND_PARSER_H
