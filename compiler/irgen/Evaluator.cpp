//===- Evaluator.cpp - Compile-time evaluation of .arch code --------------===//
//
// This file implements statement and expression evaluation, function calls
// (def inlining with call-site frames), layer loops with layer-kind
// grouping, and weight declaration bookkeeping.
//
//===----------------------------------------------------------------------===//
#include "irgen/Evaluator.h"

#include <fmt/format.h>

#include <cmath>
#include <functional>
#include <set>
#include <unordered_map>

namespace archc {

using ir::OpKind;

namespace {
constexpr unsigned kMaxCallDepth = 64;
constexpr int64_t kMaxLayers = 100000;

void collectAssigned(const std::vector<ast::StmtPtr> &body,
                     std::vector<std::string> &out) {
  auto add = [&](const std::string &n) {
    if (std::find(out.begin(), out.end(), n) == out.end())
      out.push_back(n);
  };
  for (const auto &s : body) {
    if (auto *a = dyn_cast<ast::AssignStmt>(s.get())) {
      for (auto &t : a->targets)
        add(t.name);
    } else if (auto *a = dyn_cast<ast::AugAssignStmt>(s.get())) {
      add(a->target.name);
    } else if (auto *f = dyn_cast<ast::ForStmt>(s.get())) {
      collectAssigned(f->body, out);
    } else if (auto *i = dyn_cast<ast::IfStmt>(s.get())) {
      collectAssigned(i->then, out);
      collectAssigned(i->otherwise, out);
    }
  }
}
bool exprUses(const ast::Expr &e, const std::string &name);

bool stmtsUse(const std::vector<ast::StmtPtr> &body, const std::string &name) {
  for (const auto &s : body) {
    switch (s->getKind()) {
    case ast::Stmt::Kind::Assign: {
      auto *a = cast<ast::AssignStmt>(s.get());
      for (auto &t : a->targets)
        if (t.name == name)
          return true;
      if (exprUses(*a->value, name))
        return true;
      break;
    }
    case ast::Stmt::Kind::AugAssign: {
      auto *a = cast<ast::AugAssignStmt>(s.get());
      if (a->target.name == name || exprUses(*a->value, name))
        return true;
      break;
    }
    case ast::Stmt::Kind::For: {
      auto *f = cast<ast::ForStmt>(s.get());
      if (exprUses(*f->lo, name) || exprUses(*f->hi, name) ||
          stmtsUse(f->body, name))
        return true;
      break;
    }
    case ast::Stmt::Kind::If: {
      auto *i = cast<ast::IfStmt>(s.get());
      if (exprUses(*i->cond, name) || stmtsUse(i->then, name) ||
          stmtsUse(i->otherwise, name))
        return true;
      break;
    }
    case ast::Stmt::Kind::Return:
      for (auto &v : cast<ast::ReturnStmt>(s.get())->values)
        if (exprUses(*v, name))
          return true;
      break;
    case ast::Stmt::Kind::Check:
      if (exprUses(*cast<ast::CheckStmt>(s.get())->cond, name))
        return true;
      break;
    case ast::Stmt::Kind::Error:
      break;
    }
  }
  return false;
}

/// Whether `name` is read by value anywhere in `e` (scope strings keep
/// their placeholders symbolic, so they do not count).
bool exprUses(const ast::Expr &e, const std::string &name) {
  switch (e.getKind()) {
  case ast::Expr::Kind::Name:
    return cast<ast::NameExpr>(&e)->name == name;
  case ast::Expr::Kind::List:
    for (auto &x : cast<ast::ListExpr>(&e)->elems)
      if (exprUses(*x, name))
        return true;
    return false;
  case ast::Expr::Kind::Member:
    return exprUses(*cast<ast::MemberExpr>(&e)->base, name);
  case ast::Expr::Kind::Call: {
    auto *c = cast<ast::CallExpr>(&e);
    if (exprUses(*c->callee, name))
      return true;
    for (auto &a : c->args)
      if (exprUses(*a.value, name))
        return true;
    return false;
  }
  case ast::Expr::Kind::Index:
    return exprUses(*cast<ast::IndexExpr>(&e)->base, name) ||
           exprUses(*cast<ast::IndexExpr>(&e)->index, name);
  case ast::Expr::Kind::Scope:
    return exprUses(*cast<ast::ScopeExpr>(&e)->inner, name);
  case ast::Expr::Kind::Unary:
    return exprUses(*cast<ast::UnaryExpr>(&e)->operand, name);
  case ast::Expr::Kind::Binary:
    return exprUses(*cast<ast::BinaryExpr>(&e)->lhs, name) ||
           exprUses(*cast<ast::BinaryExpr>(&e)->rhs, name);
  case ast::Expr::Kind::In:
    return exprUses(*cast<ast::InExpr>(&e)->lhs, name) ||
           exprUses(*cast<ast::InExpr>(&e)->rhs, name);
  case ast::Expr::Kind::Cond:
    return exprUses(*cast<ast::CondExpr>(&e)->cond, name) ||
           exprUses(*cast<ast::CondExpr>(&e)->then, name) ||
           exprUses(*cast<ast::CondExpr>(&e)->otherwise, name);
  case ast::Expr::Kind::Fn: {
    auto *f = cast<ast::FnExpr>(&e);
    for (auto &p : f->params)
      if (p.defaultValue && exprUses(*p.defaultValue, name))
        return true;
    return stmtsUse(f->body, name);
  }
  default:
    return false;
  }
}
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
        "len",  "min", "max", "int", "float", "str", "get",
        "sqrt", "log", "exp", "pow", "floor", "ceil"};
    return builtins.count(name) != 0;
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
    collectAssigned(body, assigned);
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
    for (const auto &s : body) {
      switch (s->getKind()) {
      case ast::Stmt::Kind::Assign:
        if (!expr(*cast<ast::AssignStmt>(s.get())->value, locals, closure))
          return false;
        break;
      case ast::Stmt::Kind::AugAssign:
        if (!expr(*cast<ast::AugAssignStmt>(s.get())->value, locals, closure))
          return false;
        break;
      case ast::Stmt::Kind::If: {
        auto *i = cast<ast::IfStmt>(s.get());
        if (!expr(*i->cond, locals, closure) ||
            !stmts(i->then, locals, closure) ||
            !stmts(i->otherwise, locals, closure))
          return false;
        break;
      }
      case ast::Stmt::Kind::Return:
        for (auto &v : cast<ast::ReturnStmt>(s.get())->values)
          if (!expr(*v, locals, closure))
            return false;
        break;
      case ast::Stmt::Kind::Check:
        if (!expr(*cast<ast::CheckStmt>(s.get())->cond, locals, closure))
          return false;
        break;
      case ast::Stmt::Kind::Error:
        break;
      case ast::Stmt::Kind::For:
        return false;
      }
    }
    return true;
  }

  bool expr(const ast::Expr &e, const std::set<std::string> &locals,
            const std::shared_ptr<Env> &closure) {
    auto sub = [&](const ast::Expr &x) { return expr(x, locals, closure); };
    switch (e.getKind()) {
    case ast::Expr::Kind::Int:
    case ast::Expr::Kind::Float:
    case ast::Expr::Kind::String:
    case ast::Expr::Kind::Bool:
    case ast::Expr::Kind::None:
      return true;
    case ast::Expr::Kind::Name:
      return cast<ast::NameExpr>(&e)->name != "op";
    case ast::Expr::Kind::List:
      for (auto &x : cast<ast::ListExpr>(&e)->elems)
        if (!sub(*x))
          return false;
      return true;
    case ast::Expr::Kind::Member:
      return sub(*cast<ast::MemberExpr>(&e)->base);
    case ast::Expr::Kind::Index:
      return sub(*cast<ast::IndexExpr>(&e)->base) &&
             sub(*cast<ast::IndexExpr>(&e)->index);
    case ast::Expr::Kind::Unary:
      return sub(*cast<ast::UnaryExpr>(&e)->operand);
    case ast::Expr::Kind::Binary:
      return sub(*cast<ast::BinaryExpr>(&e)->lhs) &&
             sub(*cast<ast::BinaryExpr>(&e)->rhs);
    case ast::Expr::Kind::In:
      return sub(*cast<ast::InExpr>(&e)->lhs) &&
             sub(*cast<ast::InExpr>(&e)->rhs);
    case ast::Expr::Kind::Cond:
      return sub(*cast<ast::CondExpr>(&e)->cond) &&
             sub(*cast<ast::CondExpr>(&e)->then) &&
             sub(*cast<ast::CondExpr>(&e)->otherwise);
    case ast::Expr::Kind::Call: {
      auto *c = cast<ast::CallExpr>(&e);
      auto *n = dyn_cast<ast::NameExpr>(c->callee.get());
      if (!n || locals.count(n->name) || !callee(n->name, closure))
        return false;
      for (auto &a : c->args)
        if (!sub(*a.value))
          return false;
      return true;
    }
    default:
      return false;
    }
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
    collectAssigned(body, names);
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
    switch (e.getKind()) {
    case ast::Expr::Kind::Int:
    case ast::Expr::Kind::Float:
    case ast::Expr::Kind::String:
    case ast::Expr::Kind::Bool:
    case ast::Expr::Kind::None:
      return true;
    case ast::Expr::Kind::Name: {
      const std::string &n = cast<ast::NameExpr>(&e)->name;
      return n == var || (!unsafe.count(n) && n != "op");
    }
    case ast::Expr::Kind::List:
      for (auto &x : cast<ast::ListExpr>(&e)->elems)
        if (!pure(*x))
          return false;
      return true;
    case ast::Expr::Kind::Member:
      return pure(*cast<ast::MemberExpr>(&e)->base);
    case ast::Expr::Kind::Index:
      return pure(*cast<ast::IndexExpr>(&e)->base) &&
             pure(*cast<ast::IndexExpr>(&e)->index);
    case ast::Expr::Kind::Unary:
      return pure(*cast<ast::UnaryExpr>(&e)->operand);
    case ast::Expr::Kind::Binary:
      return pure(*cast<ast::BinaryExpr>(&e)->lhs) &&
             pure(*cast<ast::BinaryExpr>(&e)->rhs);
    case ast::Expr::Kind::In:
      return pure(*cast<ast::InExpr>(&e)->lhs) &&
             pure(*cast<ast::InExpr>(&e)->rhs);
    case ast::Expr::Kind::Cond:
      return pure(*cast<ast::CondExpr>(&e)->cond) &&
             pure(*cast<ast::CondExpr>(&e)->then) &&
             pure(*cast<ast::CondExpr>(&e)->otherwise);
    case ast::Expr::Kind::Call: {
      auto *c = cast<ast::CallExpr>(&e);
      auto *n = dyn_cast<ast::NameExpr>(c->callee.get());
      if (!n || unsafe.count(n->name) || !calls.callee(n->name, env))
        return false;
      for (auto &a : c->args)
        if (!pure(*a.value))
          return false;
      return true;
    }
    default:
      return false;
    }
  }

  void expr(const ast::Expr &e) {
    if (!exprUses(e, var))
      return;
    if (pure(e)) {
      keys.push_back(&e);
      return;
    }
    switch (e.getKind()) {
    case ast::Expr::Kind::List:
      for (auto &x : cast<ast::ListExpr>(&e)->elems)
        expr(*x);
      return;
    case ast::Expr::Kind::Member:
      expr(*cast<ast::MemberExpr>(&e)->base);
      return;
    case ast::Expr::Kind::Call:
      expr(*cast<ast::CallExpr>(&e)->callee);
      for (auto &a : cast<ast::CallExpr>(&e)->args)
        expr(*a.value);
      return;
    case ast::Expr::Kind::Index:
      expr(*cast<ast::IndexExpr>(&e)->base);
      expr(*cast<ast::IndexExpr>(&e)->index);
      return;
    case ast::Expr::Kind::Scope:
      expr(*cast<ast::ScopeExpr>(&e)->inner);
      return;
    case ast::Expr::Kind::Unary:
      expr(*cast<ast::UnaryExpr>(&e)->operand);
      return;
    case ast::Expr::Kind::Binary:
      expr(*cast<ast::BinaryExpr>(&e)->lhs);
      expr(*cast<ast::BinaryExpr>(&e)->rhs);
      return;
    case ast::Expr::Kind::In:
      expr(*cast<ast::InExpr>(&e)->lhs);
      expr(*cast<ast::InExpr>(&e)->rhs);
      return;
    case ast::Expr::Kind::Cond:
      expr(*cast<ast::CondExpr>(&e)->cond);
      expr(*cast<ast::CondExpr>(&e)->then);
      expr(*cast<ast::CondExpr>(&e)->otherwise);
      return;
    case ast::Expr::Kind::Fn: {
      auto *f = cast<ast::FnExpr>(&e);
      for (auto &p : f->params)
        unsafe.insert(p.name);
      std::vector<std::string> names;
      collectAssigned(f->body, names);
      unsafe.insert(names.begin(), names.end());
      stmts(f->body);
      return;
    }
    default:
      // A bare use in a non-pure context: the name itself is the key.
      keys.push_back(&e);
      return;
    }
  }

  void stmts(const std::vector<ast::StmtPtr> &body) {
    for (const auto &s : body) {
      switch (s->getKind()) {
      case ast::Stmt::Kind::Assign:
        for (auto &t : cast<ast::AssignStmt>(s.get())->targets)
          if (t.name == var)
            ok = false;
        expr(*cast<ast::AssignStmt>(s.get())->value);
        break;
      case ast::Stmt::Kind::AugAssign:
        if (cast<ast::AugAssignStmt>(s.get())->target.name == var)
          ok = false;
        expr(*cast<ast::AugAssignStmt>(s.get())->value);
        break;
      case ast::Stmt::Kind::For:
        ok = false;
        break;
      case ast::Stmt::Kind::If: {
        auto *i = cast<ast::IfStmt>(s.get());
        expr(*i->cond);
        stmts(i->then);
        stmts(i->otherwise);
        break;
      }
      case ast::Stmt::Kind::Return:
        for (auto &v : cast<ast::ReturnStmt>(s.get())->values)
          expr(*v);
        break;
      case ast::Stmt::Kind::Check:
        expr(*cast<ast::CheckStmt>(s.get())->cond);
        break;
      case ast::Stmt::Kind::Error:
        break;
      }
    }
  }
};
} // namespace

Evaluator::Evaluator(const Program &program, DiagnosticEngine &diags,
                     ir::Module &module)
    : program(program), diags(diags), module(module) {}

void Evaluator::error(SourceRange r, const std::string &msg) {
  Diagnostic &d = diags.error(r, msg);
  for (const ir::InlineFrame *f = frame.get(); f; f = f->parent.get())
    d.notes.push_back(
        {f->callSite, "in call to '" + f->callee + "' from here"});
}

//===----------------------------------------------------------------------===//
// Types and attributes
//===----------------------------------------------------------------------===//

bool Evaluator::coerce(EvalValue &v, const ast::TypeRef &type) {
  if (v.isPoison())
    return true;
  if (v.isNone())
    return type.optional || type.name == "any";
  const std::string &t = type.name;
  if (t == "any")
    return true;
  if (t == "int") {
    if (v.isInt()) {
      v = EvalValue::integer(v.getInt());
      return true;
    }
    // Integral floats (4096.0 in a config) are accepted as ints.
    if (v.getKind() == EvalValue::Kind::Float &&
        std::floor(v.getNumber()) == v.getNumber() &&
        std::fabs(v.getNumber()) < 9.0e15) {
      v = EvalValue::integer(static_cast<int64_t>(v.getNumber()));
      return true;
    }
    return false;
  }
  if (t == "float") {
    if (v.isNumber()) {
      v = EvalValue::floating(v.getNumber());
      return true;
    }
    return false;
  }
  if (t == "bool")
    return v.getKind() == EvalValue::Kind::Bool;
  if (t == "string")
    return v.getKind() == EvalValue::Kind::String;
  if (t == "dict")
    return v.getKind() == EvalValue::Kind::Dict;
  if (t == "tensor")
    return v.isTensor();
  if (t == "function")
    return v.getKind() == EvalValue::Kind::Function;
  if (t == "dim")
    return v.getKind() == EvalValue::Kind::Dim || v.isInt();
  if (t == "list") {
    if (v.getKind() != EvalValue::Kind::List)
      return false;
    if (!type.elem)
      return true;
    std::vector<EvalValue> elems = v.getList();
    for (EvalValue &e : elems)
      if (!coerce(e, *type.elem))
        return false;
    v = EvalValue::list(std::move(elems));
    return true;
  }
  return false;
}

bool Evaluator::toAttr(const EvalValue &v, ir::Attr &out) {
  switch (v.getKind()) {
  case EvalValue::Kind::Bool:
    out = v.getBool();
    return true;
  case EvalValue::Kind::Int:
  case EvalValue::Kind::Index:
    if (!v.isInt())
      return false;
    out = v.getInt();
    return true;
  case EvalValue::Kind::Float:
    out = v.getNumber();
    return true;
  case EvalValue::Kind::String:
    out = v.getString();
    return true;
  case EvalValue::Kind::List: {
    const auto &l = v.getList();
    bool allInt = true, allNum = true, allStr = true;
    for (const EvalValue &e : l) {
      allInt &= e.isInt();
      allNum &= e.isNumber();
      allStr &= e.getKind() == EvalValue::Kind::String;
    }
    if (allInt) {
      std::vector<int64_t> r;
      for (const EvalValue &e : l)
        r.push_back(e.getInt());
      out = r;
      return true;
    }
    if (allNum) {
      std::vector<double> r;
      for (const EvalValue &e : l)
        r.push_back(e.getNumber());
      out = r;
      return true;
    }
    if (allStr) {
      std::vector<std::string> r;
      for (const EvalValue &e : l)
        r.push_back(e.getString());
      out = r;
      return true;
    }
    return false;
  }
  case EvalValue::Kind::Dict: {
    auto d = std::make_shared<ir::AttrDict>();
    for (auto &[k, e] : v.getDict()) {
      if (e.isNone())
        continue;
      ir::Attr a;
      if (!toAttr(e, a))
        return false;
      d->entries[k] = a;
    }
    out = d;
    return true;
  }
  default:
    return false;
  }
}

std::string Evaluator::interpolate(const std::string &text, SourceRange range,
                                   const std::shared_ptr<Env> &env,
                                   bool keepIndices) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '{') {
      out += text[i];
      continue;
    }
    size_t close = text.find('}', i);
    if (close == std::string::npos) {
      out += text.substr(i);
      break;
    }
    std::string name = text.substr(i + 1, close - i - 1);
    i = close;
    EvalValue *v = env->lookup(name);
    if (!v) {
      error(range, fmt::format("placeholder '{{{}}}' does not name a variable "
                               "in scope",
                               name));
      continue;
    }
    if (v->getKind() == EvalValue::Kind::Index) {
      if (keepIndices || !v->getIndexValue())
        out += v->getIndexSymbol() == "e" ? "{e}" : "{i}";
      else
        out += std::to_string(*v->getIndexValue());
      continue;
    }
    if (v->isTensor() || v->getKind() == EvalValue::Kind::Function) {
      error(range, fmt::format("placeholder '{{{}}}' names a {}, which has no "
                               "text form",
                               name, v->typeName()));
      continue;
    }
    out += v->str();
  }
  return out;
}

//===----------------------------------------------------------------------===//
// IR helpers
//===----------------------------------------------------------------------===//

ir::Op *Evaluator::createOp(OpKind kind, std::vector<ir::Value *> operands,
                            SourceRange range, unsigned numResults) {
  auto op = std::make_unique<ir::Op>(kind, ir::Location{range, frame});
  op->operands = std::move(operands);
  for (unsigned i = 0; i < numResults; ++i)
    op->addResult();
  return block->push(std::move(op));
}

ir::Value *Evaluator::constant(double value, SourceRange range) {
  ir::Op *op = createOp(OpKind::Const, {}, range);
  op->setAttr("value", value);
  op->getResult()->type = ir::TensorType(module.activationDType, {});
  return op->getResult();
}

ir::Value *Evaluator::asTensor(const EvalValue &v, SourceRange range) {
  if (v.isTensor())
    return v.getTensor();
  if (v.isNumber())
    return constant(v.getNumber(), range);
  if (v.getKind() == EvalValue::Kind::Bool)
    return constant(v.getBool() ? 1.0 : 0.0, range);
  if (!v.isPoison())
    error(range,
          fmt::format("expected a tensor or a number, got {}", v.typeName()));
  return nullptr;
}

std::string Evaluator::currentScope() const {
  std::string s;
  for (const std::string &p : scopes) {
    if (p.empty())
      continue;
    if (!s.empty())
      s += ".";
    s += p;
  }
  return s;
}

EvalValue Evaluator::declareParam(const std::string &name,
                                  const std::vector<EvalValue> &shape,
                                  ir::DType dtype, SourceRange range,
                                  bool pinnedDType) {
  std::string prefix = currentScope();
  std::string pattern = prefix.empty() ? name : prefix + "." + name;
  if (name.empty()) {
    error(range, "weight name must not be empty");
    return EvalValue::poison();
  }
  std::vector<ir::SymExpr> dims;
  for (const EvalValue &d : shape) {
    if (d.isPoison())
      return EvalValue::poison();
    if (!d.isInt()) {
      error(range, fmt::format("weight '{}': every dim must be an int known "
                               "from the config, got {}",
                               pattern, d.typeName()));
      return EvalValue::poison();
    }
    if (d.getInt() <= 0) {
      error(range, fmt::format("weight '{}': dim {} must be positive", pattern,
                               d.getInt()));
      return EvalValue::poison();
    }
    dims.push_back(d.getInt());
  }
  // No real checkpoint tensor comes near 2^48 elements; larger products
  // come from a wrong config and would overflow size arithmetic later.
  constexpr int64_t kMaxElements = int64_t(1) << 48;
  int64_t elements = 1;
  for (const ir::SymExpr &d : dims) {
    int64_t v = *d.getConstant();
    if (__builtin_mul_overflow(elements, v, &elements) ||
        elements > kMaxElements) {
      error(range, fmt::format("weight '{}' would have more than 2^48 "
                               "elements; check the config's sizes",
                               pattern));
      return EvalValue::poison();
    }
  }
  bool hasLayer = pattern.find("{i}") != std::string::npos;
  bool hasExpert = pattern.find("{e}") != std::string::npos;
  if (hasLayer && !layer) {
    error(range, fmt::format("weight '{}' uses '{{i}}' outside a layer loop",
                             pattern));
    return EvalValue::poison();
  }
  if (hasExpert && !expertCount) {
    error(range, fmt::format("weight '{}' uses '{{e}}' outside an expert body",
                             pattern));
    return EvalValue::poison();
  }
  // Duplicate detection: per concrete layer (or once without {i}).
  int64_t key = hasLayer ? *layer : -1;
  auto [it, inserted] = declared.emplace(std::make_pair(pattern, key), range);
  if (!inserted) {
    Diagnostic &d = diags.error(
        range, layer && !hasLayer
                   ? fmt::format("weight '{}' is declared again in layer {}: "
                                 "weights inside a layer loop need '{{i}}' in "
                                 "their scope",
                                 pattern, *layer)
                   : fmt::format("weight '{}' is declared twice", pattern));
    d.notes.push_back({it->second, "first declared here"});
    for (const ir::InlineFrame *f = frame.get(); f; f = f->parent.get())
      d.notes.push_back(
          {f->callSite, "in call to '" + f->callee + "' from here"});
    return EvalValue::poison();
  }
  ir::TensorType type(dtype, dims);
  // Register (or extend) the declaration with this layer.
  size_t declIndex = SIZE_MAX;
  for (size_t idx : weightIndex[pattern])
    if (module.weights[idx].type == type)
      declIndex = idx;
  if (declIndex == SIZE_MAX) {
    ir::WeightDecl w;
    w.pattern = pattern;
    w.type = type;
    w.experts = hasExpert ? expertCount : 0;
    w.loc = range;
    module.weights.push_back(w);
    declIndex = module.weights.size() - 1;
    weightIndex[pattern].push_back(declIndex);
  }
  if (hasLayer)
    module.weights[declIndex].layers.push_back(*layer);
  module.weights[declIndex].pinnedDType |= pinnedDType;
  ir::Op *op = createOp(OpKind::Param, {}, range);
  op->setAttr("name", pattern);
  op->getResult()->type = type;
  return EvalValue::tensor(op->getResult());
}

//===----------------------------------------------------------------------===//
// Statements
//===----------------------------------------------------------------------===//

Evaluator::Flow Evaluator::exec(const std::vector<ast::StmtPtr> &body,
                                const std::shared_ptr<Env> &env) {
  for (const auto &s : body) {
    Flow f = execStmt(*s, env);
    if (f != Flow::Normal)
      return f;
    if (diags.reachedLimit())
      return Flow::Abort;
  }
  return Flow::Normal;
}

Evaluator::Flow Evaluator::execStmt(const ast::Stmt &s,
                                    const std::shared_ptr<Env> &env) {
  switch (s.getKind()) {
  case ast::Stmt::Kind::Assign: {
    auto *a = cast<ast::AssignStmt>(&s);
    EvalValue v = eval(*a->value, env);
    if (a->targets.size() == 1) {
      env->assign(a->targets[0].name, v);
      return Flow::Normal;
    }
    if (v.isPoison()) {
      for (auto &t : a->targets)
        env->assign(t.name, EvalValue::poison());
      return Flow::Normal;
    }
    if ((v.getKind() != EvalValue::Kind::Tuple &&
         v.getKind() != EvalValue::Kind::List) ||
        v.getList().size() != a->targets.size()) {
      error(a->value->getRange(),
            fmt::format("cannot unpack {} into {} names",
                        v.typeName() == "tuple"
                            ? fmt::format("{} values", v.getList().size())
                            : "a " + v.typeName(),
                        a->targets.size()));
      for (auto &t : a->targets)
        env->assign(t.name, EvalValue::poison());
      return Flow::Normal;
    }
    for (size_t i = 0; i < a->targets.size(); ++i)
      env->assign(a->targets[i].name, v.getList()[i]);
    return Flow::Normal;
  }
  case ast::Stmt::Kind::AugAssign: {
    auto *a = cast<ast::AugAssignStmt>(&s);
    EvalValue *cur = env->lookup(a->target.name);
    if (!cur) {
      error(a->target.range, fmt::format("'{}' is not defined before '{}='",
                                         a->target.name, ast::spelling(a->op)));
      return Flow::Normal;
    }
    EvalValue lhs = *cur;
    EvalValue rhs = eval(*a->value, env);
    env->assign(a->target.name, arith(a->op, lhs, rhs, s.getRange()));
    return Flow::Normal;
  }
  case ast::Stmt::Kind::For:
    return execFor(*cast<ast::ForStmt>(&s), env);
  case ast::Stmt::Kind::If: {
    auto *i = cast<ast::IfStmt>(&s);
    std::optional<bool> c = evalCondition(*i->cond, env, "condition");
    if (!c)
      return Flow::Normal;
    return exec(*c ? i->then : i->otherwise, env);
  }
  case ast::Stmt::Kind::Return: {
    auto *r = cast<ast::ReturnStmt>(&s);
    std::vector<EvalValue> values;
    for (const auto &v : r->values)
      values.push_back(eval(*v, env));
    returnValue =
        values.size() == 1 ? values[0] : EvalValue::tuple(std::move(values));
    return Flow::Return;
  }
  case ast::Stmt::Kind::Error: {
    auto *e = cast<ast::ErrorStmt>(&s);
    error(s.getRange(), interpolate(e->message, s.getRange(), env, false));
    return Flow::Abort;
  }
  case ast::Stmt::Kind::Check: {
    auto *c = cast<ast::CheckStmt>(&s);
    std::optional<bool> v = evalCondition(*c->cond, env, "check condition");
    if (!v)
      return Flow::Normal;
    if (!*v) {
      error(c->cond->getRange(),
            c->message ? interpolate(*c->message, s.getRange(), env, false)
                       : "check failed");
      return Flow::Abort;
    }
    return Flow::Normal;
  }
  }
  return Flow::Normal;
}

std::optional<bool> Evaluator::evalCondition(const ast::Expr &e,
                                             const std::shared_ptr<Env> &env,
                                             const char *what) {
  EvalValue v = eval(e, env);
  if (v.isPoison())
    return std::nullopt;
  if (v.getKind() != EvalValue::Kind::Bool) {
    error(e.getRange(), fmt::format("{} must be a compile-time bool, got {}",
                                    what, v.typeName()));
    return std::nullopt;
  }
  return v.getBool();
}

namespace {
/// Structural equality of two layer bodies: same ops, attributes, result
/// types and operands, where values defined inside are matched by position
/// and values from outside must be the same value.
class BlockComparer {
public:
  bool equal(const ir::Block &a, const ir::Block &b) {
    if (a.getArguments().size() != b.getArguments().size() ||
        a.getOps().size() != b.getOps().size())
      return false;
    for (size_t i = 0; i < a.getArguments().size(); ++i)
      map[a.getArgument(i)] = b.getArgument(i);
    auto ia = a.getOps().begin(), ib = b.getOps().begin();
    for (; ia != a.getOps().end(); ++ia, ++ib) {
      const ir::Op &x = **ia, &y = **ib;
      if (x.getKind() != y.getKind() ||
          x.getAttrs().size() != y.getAttrs().size() ||
          x.getPresentOperands() != y.getPresentOperands() ||
          x.getNumOperands() != y.getNumOperands() ||
          x.getNumResults() != y.getNumResults() ||
          x.getRegions().size() != y.getRegions().size())
        return false;
      for (size_t k = 0; k < x.getNumOperands(); ++k) {
        auto it = map.find(x.getOperand(k));
        const ir::Value *want = it != map.end() ? it->second : x.getOperand(k);
        if (want != y.getOperand(k))
          return false;
      }
      for (auto ax = x.getAttrs().begin(), ay = y.getAttrs().begin();
           ax != x.getAttrs().end(); ++ax, ++ay)
        if (ax->first != ay->first || !sameAttr(ax->second, ay->second))
          return false;
      for (size_t k = 0; k < x.getNumResults(); ++k) {
        if (x.getResult(k)->type != y.getResult(k)->type)
          return false;
        map[x.getResult(k)] = y.getResult(k);
      }
      for (size_t k = 0; k < x.getRegions().size(); ++k)
        if (!equal(*x.getRegions()[k], *y.getRegions()[k]))
          return false;
    }
    return true;
  }

private:
  std::unordered_map<const ir::Value *, const ir::Value *> map;

  static bool sameAttr(const ir::Attr &a, const ir::Attr &b) {
    if (a.index() != b.index())
      return false;
    if (auto *da = std::get_if<std::shared_ptr<ir::AttrDict>>(&a)) {
      const auto &db = std::get<std::shared_ptr<ir::AttrDict>>(b);
      if ((*da)->entries.size() != db->entries.size())
        return false;
      for (auto x = (*da)->entries.begin(), y = db->entries.begin();
           x != (*da)->entries.end(); ++x, ++y)
        if (x->first != y->first || !sameAttr(x->second, y->second))
          return false;
      return true;
    }
    return a == b;
  }
};
} // namespace

Evaluator::Flow Evaluator::execFor(const ast::ForStmt &s,
                                   const std::shared_ptr<Env> &env) {
  EvalValue lo = eval(*s.lo, env), hi = eval(*s.hi, env);
  if (lo.isPoison() || hi.isPoison())
    return Flow::Normal;
  if (!lo.isInt() || !hi.isInt()) {
    error(!lo.isInt() ? s.lo->getRange() : s.hi->getRange(),
          fmt::format("layer loop bounds must be ints, got {}",
                      !lo.isInt() ? lo.typeName() : hi.typeName()));
    return Flow::Normal;
  }
  if (layer || expertCount) {
    error(s.getRange(), "layer loops cannot be nested in a layer loop or an "
                        "expert body");
    return Flow::Normal;
  }
  int64_t begin = lo.getInt(), end = hi.getInt();
  if (end - begin > kMaxLayers) {
    error(s.hi->getRange(),
          fmt::format("layer loop of {} iterations exceeds the limit of {}",
                      end - begin, kMaxLayers));
    return Flow::Normal;
  }
  if (end <= begin)
    return Flow::Normal;

  // Loop-carried values: names assigned in the body that exist before it.
  std::vector<std::string> assigned;
  collectAssigned(s.body, assigned);
  std::vector<std::string> carried;
  std::vector<ir::Value *> inits;
  for (const std::string &n : assigned) {
    EvalValue *v = env->lookup(n);
    if (!v || n == s.var.name)
      continue;
    if (v->isPoison())
      return Flow::Normal;
    if (!v->isTensor()) {
      error(s.getRange(),
            fmt::format("'{}' is a {} assigned inside the layer loop; only "
                        "tensors can be carried from layer to layer",
                        n, v->typeName()));
      return Flow::Normal;
    }
    carried.push_back(n);
    inits.push_back(v->getTensor());
  }

  struct Kind {
    std::unique_ptr<ir::Block> block;
    std::vector<int64_t> layers;
  };
  std::vector<Kind> kinds;
  ir::Block *savedBlock = block;
  Flow result = Flow::Normal;
  // Layer keys: the values of the pure expressions through which the loop
  // variable enters the body (LayerKeyCollector), each evaluated
  // speculatively for every layer. Layers with equal key tuples evaluate to
  // identical bodies, so each distinct tuple is evaluated once (a body that
  // never reads the variable has the empty key: one evaluation for all
  // layers).
  //
  // A key may fail to evaluate (poison): `layer_types[i]` when there is no
  // layer_types, `compress_ratios[i] == 4` on a config that gives
  // layer_types instead - the natural `if / else if` chain over optional
  // config fields. A failure is one more key value, equal only to a
  // failure, and that is sound:
  // - A key reads only the loop variable and names the body never assigns,
  //   and calls only pure functions (whose results depend on their
  //   arguments and on closures that are the same for every layer), so its
  //   speculative value is the value it has wherever the body evaluates it,
  //   a failure included (diagnostics never feed back into values).
  // - Every use of the variable in the body lies inside a key, and the
  //   evaluation is deterministic in the values it reads. Branch
  //   conditions are no exception: a condition that mentions the variable
  //   is a key or is built from keys, one that does not is the same on
  //   every layer. So two layers with equal key tuples take the same
  //   branches and compute the same values at every step: identical bodies.
  // - A failed key that the body does evaluate fails there too and reports
  //   its error; the loop then stops and nothing is memoised. A memoised
  //   failure is therefore a key in a branch the layer did not take, and an
  //   equal tuple makes the other layer skip it as well.
  // Tensor-valued keys (arithmetic with a tensor from outside the loop) are
  // not comparable across layers: such a layer is evaluated, not reused.
  // Names resolve in the arch whose code runs the loop (a used arch's own
  // defs and config inside its defs).
  PureCalls pureCalls(program.getDefs(), current);
  LayerKeyCollector keyExprs(s.var.name, s.body, pureCalls, env);
  struct Memo {
    std::vector<EvalValue> key;
    size_t kind;
    std::vector<size_t> weightDecls; ///< {i} declarations of that layer
  };
  std::vector<Memo> memos;
  auto sameKeyValue = [](const EvalValue &a, const EvalValue &b) {
    if (a.isPoison() || b.isPoison())
      return a.isPoison() && b.isPoison();
    return a.equals(b);
  };
  for (int64_t l = begin; l < end; ++l) {
    // Compute this layer's key speculatively: no diagnostics kept, and any
    // op a key creates goes to a scratch block that is dropped.
    std::vector<EvalValue> key;
    bool keyed = keyExprs.ok;
    if (keyed) {
      auto probeEnv = std::make_shared<Env>(env);
      probeEnv->define(s.var.name, EvalValue::index("i", l));
      DiagnosticEngine::Checkpoint cp = diags.save();
      ir::Block scratch;
      block = &scratch;
      for (const ast::Expr *k : keyExprs.keys) {
        EvalValue v = eval(*k, probeEnv);
        if (v.isTensor()) {
          keyed = false;
          break;
        }
        key.push_back(std::move(v));
      }
      block = savedBlock;
      diags.restore(cp);
    }
    if (keyed) {
      const Memo *hit = nullptr;
      for (const Memo &m : memos) {
        bool same = m.key.size() == key.size();
        for (size_t k = 0; same && k < key.size(); ++k)
          same = sameKeyValue(m.key[k], key[k]);
        if (same) {
          hit = &m;
          break;
        }
      }
      if (hit) {
        kinds[hit->kind].layers.push_back(l);
        for (size_t w : hit->weightDecls) {
          module.weights[w].layers.push_back(l);
          declared.emplace(std::make_pair(module.weights[w].pattern, l),
                           module.weights[w].loc);
        }
        ++stats.layerBodiesReused;
        continue;
      }
    }
    ++stats.layerBodiesEvaluated;
    std::vector<size_t> layersBefore;
    for (const ir::WeightDecl &w : module.weights)
      layersBefore.push_back(w.layers.size());
    auto body = std::make_unique<ir::Block>();
    auto inner = std::make_shared<Env>(env);
    inner->define(s.var.name, EvalValue::index("i", l));
    for (size_t k = 0; k < carried.size(); ++k)
      inner->define(carried[k], EvalValue::tensor(body->addArgument(
                                    ir::TensorType::unknown(), carried[k])));
    block = body.get();
    layer = l;
    size_t scopeDepth = scopes.size();
    if (s.scope)
      scopes.push_back(interpolate(*s.scope, s.scopeRange, inner, true));
    unsigned errorsBefore = diags.getNumErrors();
    Flow f = exec(s.body, inner);
    scopes.resize(scopeDepth);
    std::vector<ir::Value *> yields;
    for (const std::string &n : carried) {
      EvalValue *v = inner->lookup(n);
      if (v && v->isTensor())
        yields.push_back(v->getTensor());
    }
    createOp(OpKind::Yield, yields, s.getRange(), 0);
    layer.reset();
    block = savedBlock;
    if (f == Flow::Abort || diags.getNumErrors() != errorsBefore) {
      result = Flow::Abort;
      break;
    }
    // The {i} weights this layer declared (and whether it declared any
    // weight without {i}, which a second layer would redeclare: such a body
    // is always evaluated, so the duplicate is reported).
    std::vector<size_t> decls;
    bool reusable = keyed;
    for (size_t w = 0; w < module.weights.size(); ++w) {
      bool isNew = w >= layersBefore.size();
      if (module.weights[w].pattern.find("{i}") == std::string::npos) {
        if (isNew)
          reusable = false;
        continue;
      }
      if (isNew || module.weights[w].layers.size() > layersBefore[w])
        decls.push_back(w);
    }
    size_t kindIndex = kinds.size();
    for (size_t k = 0; k < kinds.size(); ++k)
      if (BlockComparer().equal(*kinds[k].block, *body)) {
        kindIndex = k;
        break;
      }
    if (kindIndex == kinds.size())
      kinds.push_back({std::move(body), {l}});
    else
      kinds[kindIndex].layers.push_back(l);
    if (reusable)
      memos.push_back({std::move(key), kindIndex, std::move(decls)});
  }
  for (Kind &k : kinds)
    std::sort(k.layers.begin(), k.layers.end());
  block = savedBlock;
  if (result == Flow::Abort)
    return Flow::Abort;

  auto op = std::make_unique<ir::Op>(OpKind::Repeat,
                                     ir::Location{s.getRange(), frame});
  op->operands = inits;
  op->setAttr("var", std::string("i"));
  op->setAttr("begin", begin);
  op->setAttr("end", end);
  for (Kind &k : kinds) {
    k.block->layers = k.layers;
    op->adoptRegion(std::move(k.block));
  }
  for (size_t k = 0; k < carried.size(); ++k)
    op->addResult();
  ir::Op *rep = block->push(std::move(op));
  for (size_t k = 0; k < carried.size(); ++k)
    env->assign(carried[k], EvalValue::tensor(rep->getResult(k)));
  return Flow::Normal;
}

//===----------------------------------------------------------------------===//
// Expressions
//===----------------------------------------------------------------------===//

EvalValue Evaluator::eval(const ast::Expr &e, const std::shared_ptr<Env> &env) {
  switch (e.getKind()) {
  case ast::Expr::Kind::Int:
    return EvalValue::integer(cast<ast::IntExpr>(&e)->value);
  case ast::Expr::Kind::Float:
    return EvalValue::floating(cast<ast::FloatExpr>(&e)->value);
  case ast::Expr::Kind::String:
    return EvalValue::string(cast<ast::StringExpr>(&e)->value);
  case ast::Expr::Kind::Bool:
    return EvalValue::boolean(cast<ast::BoolExpr>(&e)->value);
  case ast::Expr::Kind::None:
    return EvalValue::none();
  case ast::Expr::Kind::Name:
    return evalName(*cast<ast::NameExpr>(&e), env);
  case ast::Expr::Kind::List: {
    std::vector<EvalValue> elems;
    for (const auto &x : cast<ast::ListExpr>(&e)->elems)
      elems.push_back(eval(*x, env));
    return EvalValue::list(std::move(elems));
  }
  case ast::Expr::Kind::Member:
    return evalMember(*cast<ast::MemberExpr>(&e), env);
  case ast::Expr::Kind::Call:
    return evalCall(*cast<ast::CallExpr>(&e), env);
  case ast::Expr::Kind::Index:
    return evalIndex(*cast<ast::IndexExpr>(&e), env);
  case ast::Expr::Kind::Scope:
    return evalScope(*cast<ast::ScopeExpr>(&e), env);
  case ast::Expr::Kind::Unary:
    return evalUnary(*cast<ast::UnaryExpr>(&e), env);
  case ast::Expr::Kind::Binary:
    return evalBinary(*cast<ast::BinaryExpr>(&e), env);
  case ast::Expr::Kind::In: {
    auto *in = cast<ast::InExpr>(&e);
    EvalValue a = eval(*in->lhs, env), b = eval(*in->rhs, env);
    if (a.isPoison() || b.isPoison())
      return EvalValue::poison();
    bool found = false;
    if (b.getKind() == EvalValue::Kind::List ||
        b.getKind() == EvalValue::Kind::Tuple) {
      for (const EvalValue &x : b.getList())
        found |= x.equals(a);
    } else if (b.getKind() == EvalValue::Kind::Dict &&
               a.getKind() == EvalValue::Kind::String) {
      found = b.getDict().count(a.getString()) != 0;
    } else if (b.getKind() == EvalValue::Kind::String &&
               a.getKind() == EvalValue::Kind::String) {
      found = b.getString().find(a.getString()) != std::string::npos;
    } else if (b.isNone()) {
      found = false;
    } else {
      error(e.getRange(), fmt::format("'in' needs a list, dict or string on "
                                      "the right, got {}",
                                      b.typeName()));
      return EvalValue::poison();
    }
    return EvalValue::boolean(found != in->negated);
  }
  case ast::Expr::Kind::Cond: {
    auto *c = cast<ast::CondExpr>(&e);
    std::optional<bool> cond = evalCondition(*c->cond, env, "condition");
    if (!cond)
      return EvalValue::poison();
    return eval(*cond ? *c->then : *c->otherwise, env);
  }
  case ast::Expr::Kind::Fn: {
    auto *f = cast<ast::FnExpr>(&e);
    auto fn = std::make_shared<Callable>();
    fn->name = "fn";
    fn->params = &f->params;
    fn->body = &f->body;
    fn->range = f->getRange();
    fn->closure = env;
    fn->arch = current;
    return EvalValue::function(fn);
  }
  }
  return EvalValue::poison();
}

EvalValue Evaluator::evalName(const ast::NameExpr &e,
                              const std::shared_ptr<Env> &env) {
  if (EvalValue *v = env->lookup(e.name))
    return *v;
  if (e.name == "batch" || e.name == "seq" || e.name == "images" ||
      e.name == "max_images" || e.name == "image_tokens")
    return EvalValue::dim(ir::SymExpr::symbol(e.name));
  const ast::DefDecl *def = nullptr;
  bool archDef = false;
  if (auto it = current->defs.find(e.name); it != current->defs.end()) {
    def = it->second;
    archDef = true;
  } else if (auto g = program.getDefs().find(e.name);
             g != program.getDefs().end()) {
    def = g->second;
  }
  if (def) {
    auto fn = std::make_shared<Callable>();
    fn->name = def->name;
    fn->params = &def->params;
    fn->body = &def->body;
    fn->range = def->nameRange;
    // Top-level defs see only globals; arch defs see the config too.
    fn->closure = archDef ? nullptr : std::make_shared<Env>();
    if (archDef)
      fn->arch = current;
    return EvalValue::function(fn);
  }
  error(e.getRange(), fmt::format("'{}' is not defined at this point", e.name));
  return EvalValue::poison();
}

EvalValue Evaluator::evalMember(const ast::MemberExpr &e,
                                const std::shared_ptr<Env> &env) {
  EvalValue base = eval(*e.base, env);
  if (base.isPoison())
    return base;
  if (base.getKind() == EvalValue::Kind::Dict) {
    auto it = base.getDict().find(e.member);
    if (it == base.getDict().end()) {
      error(e.memberRange,
            fmt::format("dict has no key '{}' (use get(d, \"{}\", default) "
                        "for optional keys)",
                        e.member, e.member));
      return EvalValue::poison();
    }
    return it->second;
  }
  if (base.isTensor() && e.member == "rank")
    return EvalValue::poison(); // rank is not known before shape inference
  error(e.memberRange,
        fmt::format("a {} has no member '{}'", base.typeName(), e.member));
  return EvalValue::poison();
}

EvalValue Evaluator::evalIndex(const ast::IndexExpr &e,
                               const std::shared_ptr<Env> &env) {
  EvalValue base = eval(*e.base, env), idx = eval(*e.index, env);
  if (base.isPoison() || idx.isPoison())
    return EvalValue::poison();
  if (base.getKind() == EvalValue::Kind::List ||
      base.getKind() == EvalValue::Kind::Tuple) {
    if (!idx.isInt()) {
      error(e.index->getRange(),
            fmt::format("list index must be an int, got {}", idx.typeName()));
      return EvalValue::poison();
    }
    int64_t n = static_cast<int64_t>(base.getList().size());
    int64_t i = idx.getInt();
    if (i < 0)
      i += n;
    if (i < 0 || i >= n) {
      error(e.index->getRange(),
            fmt::format("index {} is out of range for a list of {} elements",
                        idx.getInt(), n));
      return EvalValue::poison();
    }
    return base.getList()[static_cast<size_t>(i)];
  }
  if (base.getKind() == EvalValue::Kind::String && idx.isInt()) {
    // One character, as a string (Nemotron-H's hybrid_override_pattern).
    const std::string &s = base.getString();
    int64_t n = static_cast<int64_t>(s.size());
    int64_t i = idx.getInt() < 0 ? idx.getInt() + n : idx.getInt();
    if (i < 0 || i >= n) {
      error(e.index->getRange(),
            fmt::format("index {} is out of range for a string of {} "
                        "characters",
                        idx.getInt(), n));
      return EvalValue::poison();
    }
    return EvalValue::string(s.substr(static_cast<size_t>(i), 1));
  }
  if (base.getKind() == EvalValue::Kind::Dict) {
    if (idx.getKind() != EvalValue::Kind::String) {
      error(e.index->getRange(), "dict keys are strings");
      return EvalValue::poison();
    }
    auto it = base.getDict().find(idx.getString());
    if (it == base.getDict().end()) {
      error(e.index->getRange(),
            fmt::format("dict has no key '{}'", idx.getString()));
      return EvalValue::poison();
    }
    return it->second;
  }
  if (base.isTensor() && idx.getKind() == EvalValue::Kind::Index &&
      idx.getIndexSymbol() == "e" && !idx.getIndexValue() && expertCount)
    return stackedExpertSlice(base.getTensor(), e.getRange());
  error(e.getRange(), fmt::format("cannot index a {}", base.typeName()));
  return EvalValue::poison();
}

EvalValue Evaluator::stackedExpertSlice(ir::Value *stacked, SourceRange range) {
  // `w[e]` in an expert body: w must be a checkpoint weight holding every
  // expert along its first axis, or a reshape of one to [experts, ...]
  // (DBRX stores its experts as [experts * I, D]).
  const ir::Op *def = stacked->getDefiningOp();
  std::vector<ir::SymExpr> dims = stacked->type.dims;
  if (def && def->getKind() == ir::OpKind::Reshape) {
    // The reshape's type is inferred later; its target dims are known.
    dims = def->attr<std::vector<ir::SymExpr>>("shape");
    def = def->getOperand(0)->getDefiningOp();
  }
  ir::TensorType t(stacked->type.dtype, dims);
  if (!def || def->getKind() != ir::OpKind::Param || t.rank() < 2 ||
      t.dims[0] != ir::SymExpr(expertCount)) {
    error(range, fmt::format("only a weight stacking all {} experts along its "
                             "first axis can be indexed by the expert index, "
                             "got {}",
                             expertCount, t.str()));
    return EvalValue::poison();
  }
  const std::string &pattern = def->attr<std::string>("name");
  for (size_t idx : weightIndex[pattern])
    if (module.weights[idx].type == def->getResult()->type)
      module.weights[idx].stackedExperts = true;
  ir::Op *op = createOp(ir::OpKind::ExpertSlice, {stacked}, range);
  return EvalValue::tensor(op->getResult());
}

EvalValue Evaluator::evalScope(const ast::ScopeExpr &e,
                               const std::shared_ptr<Env> &env) {
  std::string scope = interpolate(e.scope, e.scopeRange, env, true);
  if (auto *call = dyn_cast<ast::CallExpr>(e.inner.get())) {
    // `f(args) @ "s"` names what f declares; its arguments keep the
    // caller's scope.
    pendingCallScope = scope;
    return evalCall(*call, env);
  }
  scopes.push_back(scope);
  EvalValue v = eval(*e.inner, env);
  scopes.pop_back();
  return v;
}

EvalValue Evaluator::evalUnary(const ast::UnaryExpr &e,
                               const std::shared_ptr<Env> &env) {
  EvalValue v = eval(*e.operand, env);
  if (v.isPoison())
    return v;
  if (e.op == ast::UnaryOp::Not) {
    if (v.getKind() != EvalValue::Kind::Bool) {
      error(e.getRange(),
            fmt::format("'not' needs a bool, got {}", v.typeName()));
      return EvalValue::poison();
    }
    return EvalValue::boolean(!v.getBool());
  }
  if (v.isInt())
    return EvalValue::integer(-v.getInt());
  if (v.isNumber())
    return EvalValue::floating(-v.getNumber());
  if (v.getKind() == EvalValue::Kind::Dim)
    return EvalValue::dim(-v.getDim());
  if (v.isTensor()) {
    ir::Op *op = createOp(OpKind::Neg, {v.getTensor()}, e.getRange());
    return EvalValue::tensor(op->getResult());
  }
  error(e.getRange(), fmt::format("cannot negate a {}", v.typeName()));
  return EvalValue::poison();
}

EvalValue Evaluator::evalBinary(const ast::BinaryExpr &e,
                                const std::shared_ptr<Env> &env) {
  if (e.op == ast::BinaryOp::And || e.op == ast::BinaryOp::Or) {
    EvalValue a = eval(*e.lhs, env);
    if (a.isPoison())
      return a;
    if (a.getKind() != EvalValue::Kind::Bool) {
      error(e.lhs->getRange(), fmt::format("'{}' needs bools, got {}",
                                           ast::spelling(e.op), a.typeName()));
      return EvalValue::poison();
    }
    if (a.getBool() == (e.op == ast::BinaryOp::Or))
      return a; // short circuit
    EvalValue b = eval(*e.rhs, env);
    if (b.isPoison())
      return b;
    if (b.getKind() != EvalValue::Kind::Bool) {
      error(e.rhs->getRange(), fmt::format("'{}' needs bools, got {}",
                                           ast::spelling(e.op), b.typeName()));
      return EvalValue::poison();
    }
    return b;
  }
  EvalValue a = eval(*e.lhs, env);
  EvalValue b = eval(*e.rhs, env);
  return arith(e.op, a, b, e.getRange());
}

EvalValue Evaluator::arith(ast::BinaryOp op, const EvalValue &a,
                           const EvalValue &b, SourceRange range) {
  using B = ast::BinaryOp;
  if (a.isPoison() || b.isPoison())
    return EvalValue::poison();
  const char *sp = ast::spelling(op);
  // Equality works for every compile-time value; a tensor compared with
  // none tests whether an optional tensor argument was given.
  if (op == B::Eq || op == B::Ne) {
    if ((a.isTensor() && b.isNone()) || (a.isNone() && b.isTensor()))
      return EvalValue::boolean(op == B::Ne);
    if (a.isTensor() || b.isTensor()) {
      error(range, fmt::format("'{}' compares compile-time values, not "
                               "tensors",
                               sp));
      return EvalValue::poison();
    }
    return EvalValue::boolean(a.equals(b) == (op == B::Eq));
  }
  // Tensor arithmetic becomes IR.
  if (a.isTensor() || b.isTensor()) {
    OpKind kind;
    switch (op) {
    case B::Add:
      kind = OpKind::Add;
      break;
    case B::Sub:
      kind = OpKind::Sub;
      break;
    case B::Mul:
      kind = OpKind::Mul;
      break;
    case B::Div:
      kind = OpKind::Div;
      break;
    default:
      error(range, fmt::format("operator '{}' is not defined on tensors", sp));
      return EvalValue::poison();
    }
    ir::Value *x = asTensor(a, range), *y = asTensor(b, range);
    if (!x || !y)
      return EvalValue::poison();
    // An integral number added to, subtracted from or multiplying an integer
    // tensor (positions - 3) is an integer constant.
    auto adopt = [kind](const EvalValue &num, ir::Value *c,
                        const ir::Value *t) {
      bool integer = t->type.known &&
                     (t->type.dtype == ir::DType::I64 ||
                      t->type.dtype == ir::DType::I32) &&
                     kind != OpKind::Div;
      if (num.isNumber() && integer &&
          num.getNumber() ==
              static_cast<double>(static_cast<int64_t>(num.getNumber())))
        c->type = ir::TensorType(t->type.dtype, {});
    };
    if (b.isTensor())
      adopt(a, x, y);
    if (a.isTensor())
      adopt(b, y, x);
    return EvalValue::tensor(createOp(kind, {x, y}, range)->getResult());
  }
  // Symbolic dims.
  bool aDim = a.getKind() == EvalValue::Kind::Dim,
       bDim = b.getKind() == EvalValue::Kind::Dim;
  if (aDim || bDim) {
    if ((!aDim && !a.isInt()) || (!bDim && !b.isInt())) {
      error(range, fmt::format("cannot apply '{}' to {} and {}", sp,
                               a.typeName(), b.typeName()));
      return EvalValue::poison();
    }
    ir::SymExpr x = aDim ? a.getDim() : ir::SymExpr(a.getInt());
    ir::SymExpr y = bDim ? b.getDim() : ir::SymExpr(b.getInt());
    switch (op) {
    case B::Add:
      return EvalValue::dim(x + y);
    case B::Sub:
      return EvalValue::dim(x - y);
    case B::Mul:
      return EvalValue::dim(x * y);
    case B::Div:
      if (auto c = y.getConstant(); c && *c != 0)
        if (auto q = x.divExact(*c))
          return EvalValue::dim(*q);
      [[fallthrough]];
    default:
      error(range, fmt::format("'{}' is not defined on symbolic dims {} and "
                               "{} (dims are polynomials)",
                               sp, x.str(), y.str()));
      return EvalValue::poison();
    }
  }
  // String concatenation and comparison.
  if (a.getKind() == EvalValue::Kind::String &&
      b.getKind() == EvalValue::Kind::String) {
    if (op == B::Add)
      return EvalValue::string(a.getString() + b.getString());
    if (op == B::Lt || op == B::Le || op == B::Gt || op == B::Ge) {
      int c = a.getString().compare(b.getString());
      bool r = op == B::Lt   ? c < 0
               : op == B::Le ? c <= 0
               : op == B::Gt ? c > 0
                             : c >= 0;
      return EvalValue::boolean(r);
    }
  }
  if (a.getKind() == EvalValue::Kind::List &&
      b.getKind() == EvalValue::Kind::List && op == B::Add) {
    std::vector<EvalValue> l = a.getList();
    l.insert(l.end(), b.getList().begin(), b.getList().end());
    return EvalValue::list(std::move(l));
  }
  if (!a.isNumber() || !b.isNumber()) {
    error(range, fmt::format("cannot apply '{}' to {} and {}", sp, a.typeName(),
                             b.typeName()));
    return EvalValue::poison();
  }
  if (a.isInt() && b.isInt()) {
    int64_t x = a.getInt(), y = b.getInt();
    auto overflow = [&]() {
      error(range, fmt::format("integer overflow in {} {} {}", x, sp, y));
      return EvalValue::poison();
    };
    int64_t r;
    switch (op) {
    case B::Add:
      if (__builtin_add_overflow(x, y, &r))
        return overflow();
      return EvalValue::integer(r);
    case B::Sub:
      if (__builtin_sub_overflow(x, y, &r))
        return overflow();
      return EvalValue::integer(r);
    case B::Mul:
      if (__builtin_mul_overflow(x, y, &r))
        return overflow();
      return EvalValue::integer(r);
    case B::Div:
      if (y == 0)
        break;
      // Exact integer division stays an int; otherwise a float.
      if (x % y == 0)
        return EvalValue::integer(x / y);
      return EvalValue::floating(static_cast<double>(x) /
                                 static_cast<double>(y));
    case B::Mod: {
      if (y == 0)
        break;
      int64_t m = x % y;
      if (m != 0 && ((m < 0) != (y < 0)))
        m += y; // floored: the sign of the divisor
      return EvalValue::integer(m);
    }
    case B::Lt:
      return EvalValue::boolean(x < y);
    case B::Le:
      return EvalValue::boolean(x <= y);
    case B::Gt:
      return EvalValue::boolean(x > y);
    case B::Ge:
      return EvalValue::boolean(x >= y);
    default:
      break;
    }
    if (y == 0) {
      error(range, fmt::format("division by zero in {} {} {}", x, sp, y));
      return EvalValue::poison();
    }
  }
  double x = a.getNumber(), y = b.getNumber();
  switch (op) {
  case B::Add:
    return EvalValue::floating(x + y);
  case B::Sub:
    return EvalValue::floating(x - y);
  case B::Mul:
    return EvalValue::floating(x * y);
  case B::Div:
    if (y == 0) {
      error(range, "division by zero");
      return EvalValue::poison();
    }
    return EvalValue::floating(x / y);
  case B::Mod:
    if (y == 0) {
      error(range, "division by zero");
      return EvalValue::poison();
    }
    return EvalValue::floating(x - std::floor(x / y) * y);
  case B::Lt:
    return EvalValue::boolean(x < y);
  case B::Le:
    return EvalValue::boolean(x <= y);
  case B::Gt:
    return EvalValue::boolean(x > y);
  case B::Ge:
    return EvalValue::boolean(x >= y);
  default:
    break;
  }
  error(range, fmt::format("cannot apply '{}' to numbers", sp));
  return EvalValue::poison();
}

//===----------------------------------------------------------------------===//
// Calls
//===----------------------------------------------------------------------===//

bool Evaluator::bindArgs(const std::string &callee,
                         const std::vector<std::string_view> &paramNames,
                         const std::vector<bool> &required,
                         const std::vector<CallArg> &args,
                         const std::vector<SourceRange> &argRanges,
                         SourceRange callRange, std::vector<BoundArg> &out) {
  out.assign(paramNames.size(), BoundArg());
  size_t positional = 0;
  for (size_t i = 0; i < args.size(); ++i) {
    const auto &[name, value] = args[i];
    size_t k;
    if (name.empty()) {
      k = positional++;
      if (k >= paramNames.size()) {
        error(argRanges[i],
              fmt::format("too many arguments to '{}': expected at most {}, "
                          "got {}",
                          callee, paramNames.size(), args.size()));
        return false;
      }
    } else {
      k = std::find(paramNames.begin(), paramNames.end(), name) -
          paramNames.begin();
      if (k == paramNames.size()) {
        error(argRanges[i], fmt::format("'{}' has no parameter named '{}'",
                                        callee, std::string(name)));
        return false;
      }
      if (out[k].present) {
        error(argRanges[i], fmt::format("argument '{}' given more than once",
                                        std::string(name)));
        return false;
      }
    }
    out[k] = {value, argRanges[i], true};
  }
  for (size_t k = 0; k < paramNames.size(); ++k)
    if (!out[k].present && required[k]) {
      error(callRange, fmt::format("missing argument '{}' in call to '{}'",
                                   std::string(paramNames[k]), callee));
      return false;
    }
  return true;
}

EvalValue Evaluator::callFunction(const Callable &fn,
                                  const std::vector<CallArg> &args,
                                  const std::vector<SourceRange> &argRanges,
                                  SourceRange callRange,
                                  const std::vector<EvalValue> *) {
  if (callDepth >= kMaxCallDepth) {
    error(callRange, fmt::format("call nesting deeper than {} (recursive "
                                 "call to '{}'?)",
                                 kMaxCallDepth, fn.name));
    return EvalValue::poison();
  }
  std::vector<std::string_view> names;
  std::vector<bool> required;
  names.reserve(fn.params->size());
  required.reserve(fn.params->size());
  for (const ast::Param &p : *fn.params) {
    names.push_back(p.name);
    required.push_back(!p.defaultValue);
  }
  std::vector<BoundArg> bound;
  if (!bindArgs(fn.name, names, required, args, argRanges, callRange, bound))
    return EvalValue::poison();
  // Function bodies see their closure (arch config for arch defs) only, and
  // call the defs of the arch they belong to.
  std::shared_ptr<const ArchScope> savedArch = current;
  if (fn.arch)
    current = fn.arch;
  struct ArchGuard {
    std::shared_ptr<const ArchScope> &current, saved;
    ~ArchGuard() { current = saved; }
  } archGuard{current, savedArch};
  std::shared_ptr<Env> parent = fn.closure;
  if (!parent)
    parent = current->config;
  auto env = std::make_shared<Env>(parent);
  for (size_t k = 0; k < fn.params->size(); ++k) {
    const ast::Param &p = (*fn.params)[k];
    EvalValue v =
        bound[k].present ? bound[k].value : eval(*p.defaultValue, parent);
    if (p.type && !coerce(v, *p.type)) {
      SourceRange r = bound[k].present ? bound[k].range : callRange;
      Diagnostic &d = diags.error(
          r, fmt::format("argument '{}' of '{}' must be {}, got {}", p.name,
                         fn.name, p.type->str(), v.typeName()));
      d.notes.push_back({p.range, "parameter declared here"});
      for (const ir::InlineFrame *f = frame.get(); f; f = f->parent.get())
        d.notes.push_back(
            {f->callSite, "in call to '" + f->callee + "' from here"});
      return EvalValue::poison();
    }
    env->define(p.name, v);
  }
  auto savedFrame = frame;
  frame = std::make_shared<ir::InlineFrame>(
      ir::InlineFrame{callRange, fn.name, savedFrame});
  ++callDepth;
  EvalValue savedReturn = returnValue;
  returnValue = EvalValue::none();
  Flow f = exec(*fn.body, env);
  EvalValue result = f == Flow::Abort ? EvalValue::poison() : returnValue;
  returnValue = savedReturn;
  --callDepth;
  frame = savedFrame;
  return result;
}

EvalValue Evaluator::evalCall(const ast::CallExpr &e,
                              const std::shared_ptr<Env> &env) {
  std::optional<std::string> callScope = std::move(pendingCallScope);
  pendingCallScope.reset();
  // Evaluate arguments first (in the caller's scope); fn literals are
  // values and evaluated lazily by whoever calls them.
  std::vector<CallArg> args;
  std::vector<SourceRange> ranges;
  bool poisoned = false;
  for (const ast::Arg &a : e.args) {
    EvalValue v = eval(*a.value, env);
    poisoned |= v.isPoison();
    args.push_back({a.name, std::move(v)});
    ranges.push_back(a.name.empty() ? a.value->getRange()
                                    : SourceRange(a.nameRange.begin,
                                                  a.value->getRange().end));
  }
  if (poisoned)
    return EvalValue::poison();
  struct ScopeGuard {
    std::vector<std::string> &scopes;
    bool active;
    ~ScopeGuard() {
      if (active)
        scopes.pop_back();
    }
  } guard{scopes, callScope.has_value()};
  if (callScope)
    scopes.push_back(*callScope);

  const BuiltinSignature *sig = nullptr;
  bool isOp = false;
  if (auto *m = dyn_cast<ast::MemberExpr>(e.callee.get())) {
    if (auto *base = dyn_cast<ast::NameExpr>(m->base.get());
        base && base->name == "op" && !env->lookup("op")) {
      sig = lookupOpBuiltin(m->member);
      isOp = true;
      if (!sig) {
        error(m->memberRange, fmt::format("unknown op 'op.{}'", m->member));
        return EvalValue::poison();
      }
    }
  } else if (auto *n = dyn_cast<ast::NameExpr>(e.callee.get())) {
    if (!env->lookup(n->name) && !current->defs.count(n->name) &&
        !program.getDefs().count(n->name))
      sig = lookupFunctionBuiltin(n->name);
  }
  if (sig) {
    std::vector<std::string_view> names;
    std::vector<bool> required;
    names.reserve(sig->params.size());
    required.reserve(sig->params.size());
    for (const BuiltinParam &p : sig->params) {
      names.push_back(p.name);
      required.push_back(p.required);
    }
    std::string callee = isOp ? "op." + sig->name : sig->name;
    std::vector<BoundArg> bound;
    if (!bindArgs(callee, names, required, args, ranges, e.getRange(), bound))
      return EvalValue::poison();
    for (size_t k = 0; k < sig->params.size(); ++k)
      if (bound[k].present && !checkBuiltinArg(*sig, sig->params[k], bound[k]))
        return EvalValue::poison();
    return isOp ? callOpBuiltin(*sig, bound, e.getRange())
                : callFunctionBuiltin(*sig, bound, e.getRange());
  }
  EvalValue callee = eval(*e.callee, env);
  if (callee.isPoison())
    return callee;
  if (callee.getKind() != EvalValue::Kind::Function) {
    error(e.callee->getRange(),
          fmt::format("cannot call a {}", callee.typeName()));
    return EvalValue::poison();
  }
  return callFunction(*callee.getFunction(), args, ranges, e.getRange());
}

} // namespace archc
