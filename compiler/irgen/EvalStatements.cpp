//===- EvalStatements.cpp - Statements of .arch code ----------------------===//
#include "irgen/Evaluator.h"

#include "frontend/AstQueries.h"

#include <fmt/format.h>

namespace archc {

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
      Diagnostic &d =
          error(c->cond->getRange(),
                c->message ? interpolate(*c->message, s.getRange(), env, false)
                           : "check failed");
      // A config.json object the check read: where the config sets it.
      std::set<std::string> names;
      ast::collectNamesRead(*c->cond, names);
      for (const std::string &n : names) {
        EvalValue *val = env->lookup(n);
        if (!val || val->getKind() != EvalValue::Kind::Dict)
          continue;
        const auto &origin = val->getDictOrigin();
        if (origin && origin->use && origin->use->locate &&
            !origin->pointer.empty())
          d.notes.push_back(
              {origin->use->locate(origin->pointer),
               "'" + origin->pointer.substr(1) + "' is set here"});
      }
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

} // namespace archc
