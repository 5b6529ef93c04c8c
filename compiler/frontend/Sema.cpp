//===- Sema.cpp - Static checks of .arch programs -------------------------===//
//
// This file implements the static checks of runSema(). Scopes are resolved
// by collecting, per function body, every name it binds (parameters,
// assignment targets, loop variables); use-before-assignment is left to the
// evaluator, which knows the order of execution.
//
//===----------------------------------------------------------------------===//
#include "frontend/Sema.h"

#include "frontend/AstWalk.h"

#include "frontend/Builtins.h"

#include <algorithm>
#include <set>

namespace archc {

bool isKnownTypeName(const std::string &n) {
  static const std::set<std::string> names = {
      "int",  "float",  "bool", "string",   "list",
      "dict", "tensor", "dim",  "function", "any"};
  return names.count(n) != 0;
}

std::vector<std::pair<std::string, size_t>>
findPlaceholders(const std::string &text) {
  std::vector<std::pair<std::string, size_t>> out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '{')
      continue;
    size_t close = text.find('}', i);
    if (close == std::string::npos) {
      out.emplace_back("", i);
      break;
    }
    out.emplace_back(text.substr(i + 1, close - i - 1), i);
    i = close;
  }
  return out;
}

namespace {

// Symbolic dims of graph inputs: the batch and new tokens of a decoder
// call, and the images, image slots per row (padded [batch, max_images, ...]
// inputs) and image tokens (rows of image_features) of a vision-language
// package, and the encoder positions an encoder-decoder's decoder attends to
// (enc_seq: the length of encoder_hidden_states).
const std::set<std::string> kDims = {"batch",      "seq",          "images",
                                     "max_images", "image_tokens", "enc_seq"};

struct Scope {
  std::set<std::string> names;
  const Scope *parent = nullptr;
  bool contains(const std::string &n) const {
    for (const Scope *s = this; s; s = s->parent)
      if (s->names.count(n))
        return true;
    return false;
  }
  void collect(std::vector<std::string> &out) const {
    for (const Scope *s = this; s; s = s->parent)
      out.insert(out.end(), s->names.begin(), s->names.end());
  }
};

class SemaChecker {
public:
  SemaChecker(const Program &p, DiagnosticEngine &d) : program(p), diags(d) {}

  /// Checks an arch; one that is only used by another (`use pretrained`)
  /// may be a config block without a model.
  void checkArch(const ast::ArchDecl &arch, bool used = false) {
    // Duplicates among this arch's own members (a base's are overridden,
    // not duplicated).
    std::map<std::string, SourceRange> seen;
    for (const ast::ConfigEntry &e : arch.config) {
      if (!e.declaresName())
        continue;
      auto [it, inserted] = seen.emplace(e.name, e.nameRange);
      if (!inserted)
        diags.error(e.nameRange, "duplicate config field '{}'", e.name)
            .notes.push_back({it->second, "previous declaration is here"});
    }
    // The effective uses (inherited ones included); an alias may not
    // shadow a config field or let.
    std::map<std::string, SourceRange> names;
    for (const ast::ConfigEntry *e : arch.allConfig)
      if (e->declaresName())
        names.emplace(e->name, e->nameRange);
    for (const ast::UseDecl *use : arch.allUses) {
      const ast::UseDecl &u = *use;
      const ast::ArchDecl *used = program.findArch(u.arch);
      if (!used) {
        auto &d =
            diags.error(u.archRange, "no arch named '{}' is loaded", u.arch);
        std::vector<std::string> known;
        for (const auto &f : program.getFiles())
          for (const auto &a : f->archs)
            known.push_back(a->name);
        if (auto sug = suggestName(u.arch, known))
          d.notes.push_back({u.archRange, "did you mean '" + *sug + "'?"});
        else
          d.notes.push_back({u.archRange, "import the file that declares it"});
        continue;
      }
      if (used == &arch) {
        diags.error(u.archRange, "arch '{}' cannot use itself", u.arch);
        continue;
      }
      auto [it, inserted] = names.emplace(u.alias, u.aliasRange);
      if (!inserted) {
        diags
            .error(u.aliasRange, "'{}' is already declared in this arch",
                   u.alias)
            .notes.push_back({it->second, "previous declaration is here"});
        continue;
      }
      archScope.names.insert(u.alias);
      uses[u.alias] = used;
    }
    std::map<std::string, const ast::DefDecl *> ownDefs;
    for (const auto &def : arch.defs) {
      auto [it, inserted] = ownDefs.emplace(def->name, def.get());
      if (!inserted)
        diags.error(def->nameRange, "redefinition of '{}'", def->name)
            .notes.push_back(
                {it->second->nameRange, "previous definition is here"});
    }
    // Arch scope: the effective config names and arch defs (inherited ones
    // included), each checked in this arch's scope.
    archScope.parent = &globalScope;
    for (const ast::ConfigEntry *e : arch.allConfig)
      if (e->declaresName())
        archScope.names.insert(e->name);
    for (const ast::DefDecl *def : arch.allDefs) {
      archScope.names.insert(def->name);
      localDefs[def->name] = def;
    }
    for (const ast::ConfigEntry *e : arch.allConfig) {
      if (e->type)
        checkType(*e->type);
      if (e->value)
        checkExpr(*e->value, archScope);
    }
    for (const ast::DefDecl *def : arch.allDefs)
      checkDef(*def, archScope);
    if (!arch.effectiveModel) {
      if (!used)
        diags.error(arch.nameRange, "arch '{}' has no model", arch.name);
      return;
    }
    checkModel(*arch.effectiveModel);
    for (const ast::ModelDecl *g : arch.allGraphs)
      checkModel(*g);
  }

  /// The archs this one uses, by alias.
  const std::map<std::string, const ast::ArchDecl *> &getUses() const {
    return uses;
  }

  /// The global names (top-level defs, built-ins, dims).
  void initGlobals() {
    for (auto &[name, def] : program.getDefs())
      globalScope.names.insert(name);
    for (const std::string &n : functionBuiltinNames())
      globalScope.names.insert(n);
    globalScope.names.insert(kDims.begin(), kDims.end());
    globalScope.names.insert("op");
  }

  void checkTopLevel() {
    initGlobals();
    for (const auto &file : program.getFiles())
      for (const auto &def : file->defs)
        checkDef(*def, globalScope);
  }

private:
  const Program &program;
  DiagnosticEngine &diags;
  Scope globalScope;
  Scope archScope;
  std::map<std::string, const ast::DefDecl *> localDefs;
  std::map<std::string, const ast::ArchDecl *> uses;
  unsigned loopDepth = 0;
  bool inModel = false;

  void checkType(const ast::TypeRef &t) {
    if (!isKnownTypeName(t.name)) {
      std::vector<std::string> known = {"int",      "float", "bool",   "string",
                                        "list",     "dict",  "tensor", "dim",
                                        "function", "any"};
      auto &d = diags.error(t.range, "unknown type '{}'", t.name);
      if (auto s = suggestName(t.name, known))
        d.notes.push_back({t.range, "did you mean '" + *s + "'?"});
    }
    if (t.elem) {
      if (t.name != "list")
        diags.error(t.range, "only 'list' takes an element type");
      checkType(*t.elem);
    }
  }

  static void collectBound(const std::vector<ast::StmtPtr> &body,
                           std::set<std::string> &out) {
    for (const auto &s : body) {
      if (auto *a = dyn_cast<ast::AssignStmt>(s.get())) {
        for (auto &t : a->targets)
          out.insert(t.name);
      } else if (auto *a = dyn_cast<ast::AugAssignStmt>(s.get())) {
        out.insert(a->target.name);
      } else if (auto *f = dyn_cast<ast::ForStmt>(s.get())) {
        out.insert(f->var.name);
        collectBound(f->body, out);
      } else if (auto *i = dyn_cast<ast::IfStmt>(s.get())) {
        collectBound(i->then, out);
        collectBound(i->otherwise, out);
      }
    }
  }

  void checkParams(const std::vector<ast::Param> &params, const Scope &outer,
                   Scope &inner) {
    std::map<std::string, SourceRange> seen;
    bool sawDefault = false;
    for (const ast::Param &p : params) {
      auto [it, inserted] = seen.emplace(p.name, p.range);
      if (!inserted)
        diags.error(p.range, "duplicate parameter '{}'", p.name)
            .notes.push_back({it->second, "previous parameter is here"});
      if (p.type)
        checkType(*p.type);
      if (p.defaultValue) {
        sawDefault = true;
        checkExpr(*p.defaultValue, outer);
      } else if (sawDefault) {
        diags.error(p.range,
                    "parameter '{}' without a default follows one with a "
                    "default",
                    p.name);
      }
      inner.names.insert(p.name);
    }
  }

  void checkDef(const ast::DefDecl &def, const Scope &outer) {
    Scope scope;
    scope.parent = &outer;
    checkParams(def.params, outer, scope);
    collectBound(def.body, scope.names);
    bool savedModel = inModel;
    inModel = false;
    checkBlock(def.body, scope);
    inModel = savedModel;
  }

  void checkModel(const ast::ModelDecl &model) {
    Scope scope;
    scope.parent = &archScope;
    std::set<std::string> inputNames;
    for (const ast::ModelInput &in : model.inputs) {
      if (!inputNames.insert(in.name).second)
        diags.error(in.range, "duplicate model input '{}'", in.name);
      static const std::set<std::string> dtypes = {
          "f32", "f16", "bf16", "i64", "i32", "i8", "u8", "bool", "float"};
      if (!dtypes.count(in.dtype))
        diags.error(in.dtypeRange,
                    "unknown element type '{}' (expected one of f32, f16, "
                    "bf16, i64, i32, i8, u8, bool, or float: the model's "
                    "activation dtype)",
                    in.dtype);
      for (const auto &d : in.dims)
        checkExpr(*d, archScope);
      scope.names.insert(in.name);
    }
    collectBound(model.body, scope.names);
    inModel = true;
    checkBlock(model.body, scope);
    inModel = false;
    std::set<std::string> bound;
    collectBound(model.body, bound);
    for (const ast::Target &out : model.outputs)
      if (!bound.count(out.name) && !inputNames.count(out.name))
        diags.error(out.range, "model output '{}' is never assigned", out.name);
  }

  void checkBlock(const std::vector<ast::StmtPtr> &body, const Scope &scope) {
    for (const auto &s : body)
      checkStmt(*s, scope);
  }

  void checkStmt(const ast::Stmt &s, const Scope &scope) {
    if (auto *a = dyn_cast<ast::AssignStmt>(&s)) {
      checkExpr(*a->value, scope);
      for (const ast::Target &t : a->targets)
        checkNotReserved(t);
    } else if (auto *a = dyn_cast<ast::AugAssignStmt>(&s)) {
      checkExpr(*a->value, scope);
    } else if (auto *f = dyn_cast<ast::ForStmt>(&s)) {
      checkExpr(*f->lo, scope);
      checkExpr(*f->hi, scope);
      if (f->scope)
        checkPlaceholders(*f->scope, f->scopeRange, scope);
      ++loopDepth;
      checkBlock(f->body, scope);
      --loopDepth;
    } else if (auto *i = dyn_cast<ast::IfStmt>(&s)) {
      checkExpr(*i->cond, scope);
      checkBlock(i->then, scope);
      checkBlock(i->otherwise, scope);
    } else if (auto *r = dyn_cast<ast::ReturnStmt>(&s)) {
      if (inModel)
        diags.error(r->getRange(),
                    "'return' is not allowed in a model body; outputs are "
                    "bound by name in the model signature");
      else if (loopDepth)
        diags.error(r->getRange(), "'return' inside a layer loop");
      for (const auto &v : r->values)
        checkExpr(*v, scope);
    } else if (auto *e = dyn_cast<ast::ErrorStmt>(&s)) {
      checkPlaceholders(e->message, e->getRange(), scope);
    } else if (auto *c = dyn_cast<ast::CheckStmt>(&s)) {
      checkExpr(*c->cond, scope);
      if (c->message)
        checkPlaceholders(*c->message, c->getRange(), scope);
    }
  }

  void checkNotReserved(const ast::Target &t) {
    if (t.name == "op" || kDims.count(t.name))
      diags.error(t.range, "cannot assign to reserved name '{}'", t.name);
  }

  void checkPlaceholders(const std::string &text, SourceRange range,
                         const Scope &scope) {
    for (auto &[name, offset] : findPlaceholders(text)) {
      SourceRange r = range;
      if (range.begin.line == range.end.line && range.isValid()) {
        // Point at the placeholder inside the string literal (+1 for '"').
        SourceLoc b = range.begin;
        b.col += static_cast<uint32_t>(offset + 1);
        SourceLoc e = b;
        e.col += static_cast<uint32_t>(name.size() + 2);
        if (e.col <= range.end.col)
          r = SourceRange(b, e);
      }
      if (name.empty() || !isIdentifier(name)) {
        diags.error(r,
                    "malformed placeholder '{{{}}}': expected '{{name}}' "
                    "with a variable name",
                    name);
        continue;
      }
      if (!scope.contains(name)) {
        auto &d = diags.error(r,
                              "placeholder '{{{}}}' does not name a "
                              "variable in scope",
                              name);
        if (name == "i" || name == "e")
          d.notes.push_back(
              {SourceRange(), name == "i"
                                  ? "'{i}' is only valid inside a layer loop "
                                    "`for i in ...`"
                                  : "'{e}' is only valid inside an expert "
                                    "body `fn(t, e) { ... }`"});
      }
    }
  }

  static bool isIdentifier(const std::string &s) {
    if (s.empty() ||
        !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_'))
      return false;
    for (char c : s)
      if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_'))
        return false;
    return true;
  }

  const ast::DefDecl *findDef(const std::string &name) const {
    auto it = localDefs.find(name);
    if (it != localDefs.end())
      return it->second;
    auto g = program.getDefs().find(name);
    return g == program.getDefs().end() ? nullptr : g->second;
  }

  /// The arch a name refers to when it is a `use` alias not shadowed by a
  /// local name; null otherwise.
  const ast::ArchDecl *usedArch(const ast::Expr &base,
                                const Scope &scope) const {
    auto *n = dyn_cast<ast::NameExpr>(&base);
    if (!n)
      return nullptr;
    auto it = uses.find(n->name);
    if (it == uses.end())
      return nullptr;
    for (const Scope *s = &scope; s && s != &archScope; s = s->parent)
      if (s->names.count(n->name))
        return nullptr;
    return it->second;
  }

  /// `text.name` on a `use` alias must name a config field, let or def of
  /// the used arch.
  void checkUsedMember(const ast::MemberExpr &m, const Scope &scope) {
    const ast::ArchDecl *used = usedArch(*m.base, scope);
    if (!used)
      return;
    std::vector<std::string> names;
    for (const ast::ConfigEntry *e : used->allConfig)
      if (e->declaresName())
        names.push_back(e->name);
    for (const ast::DefDecl *def : used->allDefs)
      names.push_back(def->name);
    for (const ast::UseDecl *u : used->allUses)
      names.push_back(u->alias);
    if (std::find(names.begin(), names.end(), m.member) != names.end())
      return;
    auto &d =
        diags.error(m.memberRange, "arch '{}' has no config field or def '{}'",
                    used->name, m.member);
    if (auto sug = suggestName(m.member, names))
      d.notes.push_back({m.memberRange, "did you mean '" + *sug + "'?"});
    d.notes.push_back(
        {used->nameRange, "arch '" + used->name + "' declared here"});
  }

  /// The def `text.name` calls on a `use` alias, for argument checks.
  const ast::DefDecl *usedDef(const ast::MemberExpr &m,
                              const Scope &scope) const {
    const ast::ArchDecl *used = usedArch(*m.base, scope);
    if (!used)
      return nullptr;
    for (const ast::DefDecl *def : used->allDefs)
      if (def->name == m.member)
        return def;
    return nullptr;
  }

  void unknownName(const std::string &name, SourceRange r, const Scope &scope) {
    auto &d = diags.error(r, "use of undeclared name '{}'", name);
    std::vector<std::string> cands;
    scope.collect(cands);
    if (auto s = suggestName(name, cands))
      d.notes.push_back({r, "did you mean '" + *s + "'?"});
  }

  /// Checks argument count and names against a parameter list.
  template <typename ParamList, typename NameOf, typename IsRequired>
  void checkArgs(const ast::CallExpr &call, const std::string &callee,
                 const ParamList &params, NameOf nameOf, IsRequired required,
                 SourceRange declRange) {
    std::vector<bool> bound(params.size(), false);
    size_t positional = 0;
    bool sawNamed = false;
    for (const ast::Arg &a : call.args) {
      if (a.name.empty()) {
        if (sawNamed) {
          diags.error(a.value->getRange(),
                      "positional argument after a named argument");
          continue;
        }
        if (positional >= params.size()) {
          auto &d = diags.error(
              a.value->getRange(),
              "too many arguments to '{}': expected at most {}, got {}", callee,
              params.size(), call.args.size());
          if (declRange.isValid())
            d.notes.push_back({declRange, "'" + callee + "' declared here"});
          return;
        }
        bound[positional++] = true;
        continue;
      }
      sawNamed = true;
      size_t k = 0;
      while (k < params.size() && nameOf(params[k]) != a.name)
        ++k;
      if (k == params.size()) {
        std::vector<std::string> names;
        for (auto &p : params)
          names.push_back(nameOf(p));
        auto &d = diags.error(a.nameRange, "'{}' has no parameter named '{}'",
                              callee, a.name);
        if (auto s = suggestName(a.name, names))
          d.notes.push_back({a.nameRange, "did you mean '" + *s + "'?"});
        continue;
      }
      if (bound[k]) {
        diags.error(a.nameRange, "argument '{}' given more than once", a.name);
        continue;
      }
      bound[k] = true;
    }
    for (size_t k = 0; k < params.size(); ++k)
      if (!bound[k] && required(params[k])) {
        auto &d = diags.error(call.getRange(),
                              "missing argument '{}' in call to '{}'",
                              nameOf(params[k]), callee);
        if (declRange.isValid())
          d.notes.push_back({declRange, "'" + callee + "' declared here"});
      }
  }

  void checkCall(const ast::CallExpr &call, const Scope &scope) {
    for (const ast::Arg &a : call.args)
      checkExpr(*a.value, scope);
    const ast::Expr *callee = call.callee.get();
    if (auto *m = dyn_cast<ast::MemberExpr>(callee)) {
      if (auto *base = dyn_cast<ast::NameExpr>(m->base.get());
          base && base->name == "op") {
        const BuiltinSignature *sig = lookupOpBuiltin(m->member);
        if (!sig) {
          auto &d =
              diags.error(m->memberRange, "unknown op 'op.{}'", m->member);
          if (auto s = suggestName(m->member, opBuiltinNames()))
            d.notes.push_back(
                {m->memberRange, "did you mean 'op." + *s + "'?"});
          return;
        }
        checkArgs(
            call, "op." + sig->name, sig->params,
            [](const BuiltinParam &p) { return p.name; },
            [](const BuiltinParam &p) { return p.required; }, SourceRange());
        return;
      }
      checkExpr(*callee, scope);
      if (const ast::DefDecl *def = usedDef(*m, scope))
        checkArgs(
            call, def->name, def->params,
            [](const ast::Param &p) { return p.name; },
            [](const ast::Param &p) { return !p.defaultValue; },
            def->nameRange);
      return;
    }
    if (auto *n = dyn_cast<ast::NameExpr>(callee)) {
      // A local variable may hold a function: checked at run time.
      bool isLocal = false;
      for (const Scope *s = &scope; s && s != &archScope && s != &globalScope;
           s = s->parent)
        if (s->names.count(n->name))
          isLocal = true;
      if (isLocal)
        return;
      if (const ast::DefDecl *def = findDef(n->name)) {
        checkArgs(
            call, def->name, def->params,
            [](const ast::Param &p) { return p.name; },
            [](const ast::Param &p) { return !p.defaultValue; },
            def->nameRange);
        return;
      }
      if (const BuiltinSignature *sig = lookupFunctionBuiltin(n->name)) {
        checkArgs(
            call, sig->name, sig->params,
            [](const BuiltinParam &p) { return p.name; },
            [](const BuiltinParam &p) { return p.required; }, SourceRange());
        return;
      }
      if (!scope.contains(n->name)) {
        auto &d = diags.error(n->getRange(), "call to undeclared function '{}'",
                              n->name);
        std::vector<std::string> cands;
        for (auto &[k, v] : program.getDefs())
          cands.push_back(k);
        for (auto &[k, v] : localDefs)
          cands.push_back(k);
        for (auto &f : functionBuiltinNames())
          cands.push_back(f);
        if (auto s = suggestName(n->name, cands))
          d.notes.push_back({n->getRange(), "did you mean '" + *s + "'?"});
      }
      return;
    }
    checkExpr(*callee, scope);
  }

  void checkExpr(const ast::Expr &e, const Scope &scope) {
    switch (e.getKind()) {
    case ast::Expr::Kind::Name: {
      auto *n = cast<ast::NameExpr>(&e);
      if (n->name == "op") {
        diags.error(e.getRange(),
                    "'op' is the namespace of built-in ops; call one, e.g. "
                    "'op.matmul(a, b)'");
        return;
      }
      if (!scope.contains(n->name) && !findDef(n->name))
        unknownName(n->name, e.getRange(), scope);
      return;
    }
    case ast::Expr::Kind::Member: {
      auto *m = cast<ast::MemberExpr>(&e);
      if (auto *base = dyn_cast<ast::NameExpr>(m->base.get());
          base && base->name == "op") {
        diags.error(e.getRange(), "'op.{}' must be called", m->member);
        return;
      }
      checkExpr(*m->base, scope);
      checkUsedMember(*m, scope);
      return;
    }
    case ast::Expr::Kind::Call:
      checkCall(*cast<ast::CallExpr>(&e), scope);
      return;
    case ast::Expr::Kind::Scope: {
      auto *s = cast<ast::ScopeExpr>(&e);
      checkPlaceholders(s->scope, s->scopeRange, scope);
      checkExpr(*s->inner, scope);
      return;
    }
    case ast::Expr::Kind::Fn: {
      auto *f = cast<ast::FnExpr>(&e);
      Scope inner;
      inner.parent = &scope;
      checkParams(f->params, scope, inner);
      collectBound(f->body, inner.names);
      bool savedModel = inModel;
      unsigned savedLoop = loopDepth;
      inModel = false;
      loopDepth = 0;
      checkBlock(f->body, inner);
      inModel = savedModel;
      loopDepth = savedLoop;
      return;
    }
    default: // literals, operators, lists, indexing
      ast::forEachChild(e, [&](const ast::Expr &x) { checkExpr(x, scope); });
      return;
    }
  }
};

} // namespace

bool runSema(const Program &program, const ast::ArchDecl *arch,
             DiagnosticEngine &diags) {
  unsigned before = diags.getNumErrors();
  SemaChecker checker(program, diags);
  checker.checkTopLevel();
  if (arch) {
    checker.checkArch(*arch);
    // The archs it uses (each once, whatever the chain of uses).
    std::set<const ast::ArchDecl *> done = {arch};
    std::vector<const ast::ArchDecl *> todo;
    for (auto &[alias, used] : checker.getUses())
      todo.push_back(used);
    while (!todo.empty()) {
      const ast::ArchDecl *a = todo.back();
      todo.pop_back();
      if (!done.insert(a).second)
        continue;
      SemaChecker inner(program, diags);
      inner.initGlobals();
      inner.checkArch(*a, /*used=*/true);
      for (auto &[alias, used] : inner.getUses())
        todo.push_back(used);
    }
  }
  return diags.getNumErrors() == before;
}

} // namespace archc
