//===- EvalExpressions.cpp - Expressions of .arch code --------------------===//
#include "irgen/Evaluator.h"
#include "support/CheckedArith.h"

#include <fmt/format.h>

#include <stdexcept>

namespace archc {

using ir::OpKind;

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
      found = b.readDictKey(a.getString()) != nullptr;
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
      e.name == "max_images" || e.name == "image_tokens" || e.name == "enc_seq")
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
    const EvalValue *entry = base.readDictKey(e.member);
    if (!entry) {
      error(e.memberRange,
            fmt::format("dict has no key '{}' (use get(d, \"{}\", default) "
                        "for optional keys)",
                        e.member, e.member));
      return EvalValue::poison();
    }
    return *entry;
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
    const EvalValue *entry = base.readDictKey(idx.getString());
    if (!entry) {
      error(e.index->getRange(),
            fmt::format("dict has no key '{}'", idx.getString()));
      return EvalValue::poison();
    }
    return *entry;
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
  if (v.isInt()) {
    if (auto r = checkedNeg(v.getInt()))
      return EvalValue::integer(*r);
    error(e.getRange(), fmt::format("integer overflow in -({})", v.getInt()));
    return EvalValue::poison();
  }
  if (v.isNumber())
    return EvalValue::floating(-v.getNumber());
  if (v.getKind() == EvalValue::Kind::Dim) {
    try {
      return EvalValue::dim(-v.getDim());
    } catch (const std::overflow_error &) {
      error(e.getRange(),
            fmt::format("integer overflow in -{}", v.getDim().str()));
      return EvalValue::poison();
    }
  }
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

} // namespace archc
