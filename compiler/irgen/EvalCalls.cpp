//===- EvalCalls.cpp - Calls: argument binding and def inlining -----------===//
#include "irgen/Evaluator.h"

#include <fmt/format.h>

namespace archc {

namespace {
constexpr unsigned kMaxCallDepth = 64;
} // namespace

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
