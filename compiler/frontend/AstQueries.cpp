//===- AstQueries.cpp - Which names AST code reads and binds --------------===//
#include "frontend/AstQueries.h"

#include "frontend/AstWalk.h"

#include <algorithm>

namespace archc::ast {

void collectAssignedNames(const std::vector<StmtPtr> &body,
                          std::vector<std::string> &out) {
  for (const StmtPtr &s : body) {
    forEachAssignedName(*s, [&](const std::string &n) {
      if (std::find(out.begin(), out.end(), n) == out.end())
        out.push_back(n);
    });
    allChildren(
        *s, [](const Expr &) { return true; },
        [&](const std::vector<StmtPtr> &inner) {
          collectAssignedNames(inner, out);
          return true;
        });
  }
}

bool mentionsName(const Expr &e, const std::string &name) {
  if (auto *n = dyn_cast<NameExpr>(&e))
    return n->name == name;
  if (anyChild(e, [&](const Expr &x) { return mentionsName(x, name); }))
    return true;
  const std::vector<StmtPtr> *body = functionBody(e);
  return body && mentionsName(*body, name);
}

bool mentionsName(const std::vector<StmtPtr> &body, const std::string &name) {
  for (const StmtPtr &s : body) {
    bool assigns = false;
    forEachAssignedName(*s,
                        [&](const std::string &n) { assigns |= n == name; });
    if (assigns ||
        !allChildren(
            *s, [&](const Expr &e) { return !mentionsName(e, name); },
            [&](const std::vector<StmtPtr> &inner) {
              return !mentionsName(inner, name);
            }))
      return true;
  }
  return false;
}

void collectNamesRead(const Expr &e, std::set<std::string> &out) {
  if (auto *n = dyn_cast<NameExpr>(&e)) {
    out.insert(n->name);
    return;
  }
  if (isa<FnExpr>(&e))
    return;
  forEachChild(e, [&](const Expr &x) { collectNamesRead(x, out); });
}

} // namespace archc::ast
