//===- LayerKeys.cpp - What makes one layer of a loop differ --------------===//
#include "irgen/LayerKeys.h"

#include "frontend/AstQueries.h"
#include "frontend/AstWalk.h"

#include <set>

namespace archc {

namespace {
/// Decides whether a call is a pure computation of its arguments, so that a
/// call with pure arguments can be a layer key (a per-layer `kind(i)`):
/// pure built-ins, and functions whose body only binds names, branches,
/// checks and returns expressions of that kind (no op, no weight, no scope,
/// no loop, no anonymous function, no call of a parameter or local). Callee
/// names resolve as the evaluator resolves them: the environment, then the
/// arch's and the program's defs, then the built-ins. Recursion counts as
/// impure.
class PureCalls {
public:
  using GlobalDefs = std::map<std::string, const ast::DefDecl *>;
  /// `globals` are the program's top-level defs; `arch` the defs and config
  /// of the arch whose code runs (a def of another arch, reached through
  /// `use`, resolves names in its own).
  PureCalls(const GlobalDefs &globals, std::shared_ptr<const ArchScope> arch)
      : globals(globals), arch(std::move(arch)) {}

  /// Whether calling `name`, looked up in `env`, is pure.
  bool callee(const std::string &name, const std::shared_ptr<Env> &env) {
    if (env)
      if (EvalValue *v = env->lookup(name)) {
        if (v->getKind() != EvalValue::Kind::Function)
          return false;
        const Callable &fn = *v->getFunction();
        std::shared_ptr<const ArchScope> saved = arch;
        if (fn.arch)
          arch = fn.arch;
        bool pure = function(*fn.params, *fn.body,
                             fn.closure ? fn.closure : arch->config);
        arch = saved;
        return pure;
      }
    if (const ast::DefDecl *d = def(name))
      return function(d->params, d->body, arch->config);
    static const std::set<std::string> builtins = {
        "len",     "min",  "max", "int", "float", "str",   "get", "set",
        "without", "sqrt", "log", "exp", "pow",   "floor", "ceil"};
    return builtins.count(name) != 0;
  }

  /// Whether `e` is a pure scalar expression: no op, scope or anonymous
  /// function, and calls only of pure callees (resolved in `env`) that are
  /// not in `locals`. With `localsOpaque`, a name in `locals` other than
  /// `keep` is impure as a value too (a name assigned in a loop body may
  /// differ per layer); otherwise only `op` is.
  bool expr(const ast::Expr &e, const std::set<std::string> &locals,
            const std::shared_ptr<Env> &env, bool localsOpaque = false,
            const std::string &keep = {}) {
    switch (e.getKind()) {
    case ast::Expr::Kind::Name: {
      const std::string &n = cast<ast::NameExpr>(&e)->name;
      if (localsOpaque && n != keep && locals.count(n))
        return false;
      return n == keep || n != "op";
    }
    case ast::Expr::Kind::Call: {
      auto *c = cast<ast::CallExpr>(&e);
      auto *n = dyn_cast<ast::NameExpr>(c->callee.get());
      if (!n || locals.count(n->name) || !callee(n->name, env))
        return false;
      for (auto &a : c->args)
        if (!expr(*a.value, locals, env, localsOpaque, keep))
          return false;
      return true;
    }
    case ast::Expr::Kind::Scope:
    case ast::Expr::Kind::Fn:
      return false;
    default: // literals, operators, lists, members, indexing
      return ast::allChildren(e, [&](const ast::Expr &x) {
        return expr(x, locals, env, localsOpaque, keep);
      });
    }
  }

private:
  const GlobalDefs &globals;
  std::shared_ptr<const ArchScope> arch;
  std::set<const void *> active; ///< bodies being checked

  /// The def `name` resolves to: the arch's, then the program's.
  const ast::DefDecl *def(const std::string &name) const {
    if (auto it = arch->defs.find(name); it != arch->defs.end())
      return it->second;
    auto g = globals.find(name);
    return g != globals.end() ? g->second : nullptr;
  }

  /// A function body; `locals` are its parameters and assigned names.
  bool function(const std::vector<ast::Param> &params,
                const std::vector<ast::StmtPtr> &body,
                const std::shared_ptr<Env> &closure) {
    if (!active.insert(&body).second)
      return false;
    std::set<std::string> locals;
    for (const ast::Param &p : params)
      locals.insert(p.name);
    std::vector<std::string> assigned;
    ast::collectAssignedNames(body, assigned);
    locals.insert(assigned.begin(), assigned.end());
    bool ok = true;
    for (const ast::Param &p : params)
      ok = ok && (!p.defaultValue || expr(*p.defaultValue, {}, closure));
    ok = ok && stmts(body, locals, closure);
    active.erase(&body);
    return ok;
  }

  bool stmts(const std::vector<ast::StmtPtr> &body,
             const std::set<std::string> &locals,
             const std::shared_ptr<Env> &closure) {
    for (const auto &s : body)
      if (isa<ast::ForStmt>(s.get()) ||
          !ast::allChildren(
              *s, [&](const ast::Expr &e) { return expr(e, locals, closure); },
              [&](const std::vector<ast::StmtPtr> &inner) {
                return stmts(inner, locals, closure);
              }))
        return false;
    return true;
  }
};

/// Finds the expressions through which a loop variable can influence the IR
/// of a layer: the maximal pure scalar expressions (literals, the variable,
/// names not assigned in the body, operators, indexing, members and pure
/// calls, see PureCalls) that mention it, in every branch of the body.
/// Layers whose key expressions have equal values (a failed evaluation
/// counting as one more value) evaluate to identical bodies; see
/// Evaluator::execFor.
class LayerKeyCollector {
public:
  /// `env` is the environment the loop runs in (for resolving callees).
  LayerKeyCollector(const std::string &var,
                    const std::vector<ast::StmtPtr> &body, PureCalls &calls,
                    std::shared_ptr<Env> env)
      : var(var), calls(calls), env(std::move(env)) {
    std::vector<std::string> names;
    ast::collectAssignedNames(body, names);
    unsafe.insert(names.begin(), names.end());
    stmts(body);
  }

  bool ok = true;
  std::vector<const ast::Expr *> keys;

private:
  const std::string &var;
  PureCalls &calls;
  std::shared_ptr<Env> env;
  std::set<std::string> unsafe;

  bool pure(const ast::Expr &e) {
    return calls.expr(e, unsafe, env, /*localsOpaque=*/true, var);
  }

  void expr(const ast::Expr &e) {
    if (!ast::mentionsName(e, var))
      return;
    if (pure(e)) {
      keys.push_back(&e);
      return;
    }
    if (auto *f = dyn_cast<ast::FnExpr>(&e)) {
      for (auto &p : f->params)
        unsafe.insert(p.name);
      std::vector<std::string> names;
      ast::collectAssignedNames(f->body, names);
      unsafe.insert(names.begin(), names.end());
      stmts(f->body);
      return;
    }
    bool inner = false;
    ast::forEachChild(e, [&](const ast::Expr &x) {
      inner = true;
      expr(x);
    });
    if (!inner) // a bare use in a non-pure context: the name is the key
      keys.push_back(&e);
  }

  void stmts(const std::vector<ast::StmtPtr> &body) {
    for (const auto &s : body) {
      if (isa<ast::ForStmt>(s.get())) {
        ok = false;
        continue;
      }
      ast::forEachAssignedName(*s, [&](const std::string &n) {
        if (n == var)
          ok = false;
      });
      ast::allChildren(
          *s,
          [&](const ast::Expr &e) {
            expr(e);
            return true;
          },
          [&](const std::vector<ast::StmtPtr> &inner) {
            stmts(inner);
            return true;
          });
    }
  }
};

} // namespace

LayerKeys
findLayerKeys(const std::string &var, const std::vector<ast::StmtPtr> &body,
              const std::map<std::string, const ast::DefDecl *> &globals,
              std::shared_ptr<const ArchScope> arch, std::shared_ptr<Env> env) {
  PureCalls calls(globals, std::move(arch));
  LayerKeyCollector collector(var, body, calls, std::move(env));
  return {collector.ok, std::move(collector.keys)};
}

} // namespace archc
