//===- AstBuilder.h - ANTLR4 parse tree to AST ------------------*- C++ -*-===//
//
// Private to the front end. This file declares buildAst(), which turns the
// parse tree of a file without syntax errors into archc::ast nodes with
// source ranges.
//
// The builder implements the generated ArchVisitor, which declares one pure
// virtual method per labeled alternative of Arch.g4 (and per rule): rules
// with alternatives are dispatched through the visitor, never by token text
// and a cast, so a new alternative does not compile until it is handled. A
// tree the builder does not expect (a rule where an expression belongs, a
// visited rule that is only ever read directly) raises InternalParseError.
//
//===----------------------------------------------------------------------===//
#ifndef ARCHC_FRONTEND_ANTLR_ASTBUILDER_H
#define ARCHC_FRONTEND_ANTLR_ASTBUILDER_H

#include "frontend/Ast.h"
#include "frontend/antlr/TokenLocations.h"
#include "support/Diagnostics.h"

#include "ArchParser.h"

#include <memory>
#include <stdexcept>

namespace archc::frontend {

/// A parse tree the AST builder has no case for: a bug in archc (grammar and
/// builder out of step), reported as an internal error at `range`.
class InternalParseError : public std::logic_error {
public:
  InternalParseError(const std::string &message, SourceRange range)
      : std::logic_error(message), range(range) {}
  SourceRange range;
};

/// Builds the AST of `tree`, which `parser` produced without syntax errors.
/// Errors found while building (literals out of range, a second config
/// block or model) go to `diags`; the caller discards the file if any was
/// reported. Throws InternalParseError.
std::unique_ptr<ast::File> buildAst(grammar::ArchParser::FileContext *tree,
                                    const grammar::ArchParser &parser,
                                    const TokenLocations &locations,
                                    DiagnosticEngine &diags);

/// Builds the expression of `node`, which must be an expression rule
/// (expr, chain, unary, postfix, primary); throws InternalParseError
/// otherwise. Test support for the builder's dispatch.
ast::ExprPtr buildExpression(antlr4::tree::ParseTree *node,
                             const grammar::ArchParser &parser,
                             const TokenLocations &locations,
                             DiagnosticEngine &diags);

} // namespace archc::frontend

#endif // ARCHC_FRONTEND_ANTLR_ASTBUILDER_H
