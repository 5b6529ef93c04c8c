//===- AstQueries.h - Which names AST code reads and binds -----*- C++ -*-===//
//
// Small questions about a piece of .arch code that the evaluator and the
// config binder ask before evaluating it: which names a body assigns, and
// whether code mentions a name. Built on AstWalk.h.
//
//===----------------------------------------------------------------------===//
#ifndef ARCHC_FRONTEND_ASTQUERIES_H
#define ARCHC_FRONTEND_ASTQUERIES_H

#include "frontend/Ast.h"

#include <set>
#include <string>
#include <vector>

namespace archc::ast {

/// Appends to `out`, once each and in order of first appearance, the names
/// `body` assigns, including in nested loops and branches (not inside
/// anonymous functions, which have their own scope).
void collectAssignedNames(const std::vector<StmtPtr> &body,
                          std::vector<std::string> &out);

/// Whether `e` reads `name` by value anywhere, anonymous functions' defaults
/// and bodies included (a scope string keeps its placeholders symbolic, so
/// it does not count).
bool mentionsName(const Expr &e, const std::string &name);

/// Whether `body` reads or assigns `name` anywhere.
bool mentionsName(const std::vector<StmtPtr> &body, const std::string &name);

/// Adds to `out` every name `e` reads outside anonymous functions.
void collectNamesRead(const Expr &e, std::set<std::string> &out);

} // namespace archc::ast

#endif // ARCHC_FRONTEND_ASTQUERIES_H
