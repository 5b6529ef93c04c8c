//===- AstWalk.h - The children of an AST node, in one place ---*- C++ -*-===//
//
// The one definition of which expressions and statement lists an AST node
// contains directly. Analyses that recurse over the AST (names a body reads
// or assigns, semantic checks, layer keys) handle the node kinds they care
// about and delegate every other kind to these functions, so a new
// expression or statement kind is added here once.
//
//===----------------------------------------------------------------------===//
#ifndef ARCHC_FRONTEND_ASTWALK_H
#define ARCHC_FRONTEND_ASTWALK_H

#include "frontend/Ast.h"

namespace archc::ast {

/// Calls `visit(child)` for each expression `e` contains directly, in source
/// order, while `visit` returns true; returns false if a call returned false.
/// The children of a call are its callee and argument values, those of an
/// anonymous function its parameters' default values (its body is a
/// statement list: see `functionBody`). Literals have none.
template <class Visit> bool allChildren(const Expr &e, Visit &&visit) {
  switch (e.getKind()) {
  case Expr::Kind::List:
    for (const ExprPtr &x : cast<ListExpr>(&e)->elems)
      if (!visit(*x))
        return false;
    return true;
  case Expr::Kind::Member:
    return visit(*cast<MemberExpr>(&e)->base);
  case Expr::Kind::Call: {
    auto *c = cast<CallExpr>(&e);
    if (!visit(*c->callee))
      return false;
    for (const auto &a : c->args)
      if (!visit(*a.value))
        return false;
    return true;
  }
  case Expr::Kind::Index:
    return visit(*cast<IndexExpr>(&e)->base) &&
           visit(*cast<IndexExpr>(&e)->index);
  case Expr::Kind::Scope:
    return visit(*cast<ScopeExpr>(&e)->inner);
  case Expr::Kind::Unary:
    return visit(*cast<UnaryExpr>(&e)->operand);
  case Expr::Kind::Binary:
    return visit(*cast<BinaryExpr>(&e)->lhs) &&
           visit(*cast<BinaryExpr>(&e)->rhs);
  case Expr::Kind::In:
    return visit(*cast<InExpr>(&e)->lhs) && visit(*cast<InExpr>(&e)->rhs);
  case Expr::Kind::Cond: {
    auto *c = cast<CondExpr>(&e);
    return visit(*c->cond) && visit(*c->then) && visit(*c->otherwise);
  }
  case Expr::Kind::Fn:
    for (const Param &p : cast<FnExpr>(&e)->params)
      if (p.defaultValue && !visit(*p.defaultValue))
        return false;
    return true;
  default:
    return true;
  }
}

/// Calls `visit(child)` for each expression `e` contains directly.
template <class Visit> void forEachChild(const Expr &e, Visit &&visit) {
  allChildren(e, [&](const Expr &x) {
    visit(x);
    return true;
  });
}

/// Whether `visit(child)` holds for some expression `e` contains directly.
template <class Visit> bool anyChild(const Expr &e, Visit &&visit) {
  return !allChildren(e, [&](const Expr &x) { return !visit(x); });
}

/// The body of an anonymous function, or null for any other expression.
inline const std::vector<StmtPtr> *functionBody(const Expr &e) {
  auto *f = dyn_cast<FnExpr>(&e);
  return f ? &f->body : nullptr;
}

/// Calls `onExpr(e)` for each expression statement `s` contains directly
/// (assigned values, loop bounds, conditions, returned values) and
/// `onBody(stmts)` for each statement list it contains (loop body, then and
/// else branches), in source order, while the calls return true; returns
/// false if one returned false. Assignment targets are names, not
/// expressions: see AssignStmt / AugAssignStmt.
template <class OnExpr, class OnBody>
bool allChildren(const Stmt &s, OnExpr &&onExpr, OnBody &&onBody) {
  switch (s.getKind()) {
  case Stmt::Kind::Assign:
    return onExpr(*cast<AssignStmt>(&s)->value);
  case Stmt::Kind::AugAssign:
    return onExpr(*cast<AugAssignStmt>(&s)->value);
  case Stmt::Kind::For: {
    auto *f = cast<ForStmt>(&s);
    return onExpr(*f->lo) && onExpr(*f->hi) && onBody(f->body);
  }
  case Stmt::Kind::If: {
    auto *i = cast<IfStmt>(&s);
    return onExpr(*i->cond) && onBody(i->then) && onBody(i->otherwise);
  }
  case Stmt::Kind::Return:
    for (const ExprPtr &v : cast<ReturnStmt>(&s)->values)
      if (!onExpr(*v))
        return false;
    return true;
  case Stmt::Kind::Check:
    return onExpr(*cast<CheckStmt>(&s)->cond);
  case Stmt::Kind::Error:
    return true;
  }
  return true;
}

/// The names an assignment statement binds (none for other statements).
template <class Visit> void forEachAssignedName(const Stmt &s, Visit &&visit) {
  if (auto *a = dyn_cast<AssignStmt>(&s))
    for (const auto &t : a->targets)
      visit(t.name);
  else if (auto *a = dyn_cast<AugAssignStmt>(&s))
    visit(a->target.name);
}

} // namespace archc::ast

#endif // ARCHC_FRONTEND_ASTWALK_H
