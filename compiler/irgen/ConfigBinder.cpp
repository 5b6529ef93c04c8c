//===- ConfigBinder.cpp - Bind config.json to an arch's schema ------------===//
//
// This file implements config binding. Defaults and lets may refer to other
// fields in any order: entries are resolved on demand by a depth-first walk
// over the names their expressions mention, with cycle detection.
//
//===----------------------------------------------------------------------===//
#include "irgen/ConfigBinder.h"

#include "frontend/AstQueries.h"

#include "irgen/Evaluator.h"

#include <fmt/format.h>

#include <set>

namespace archc {

EvalValue jsonToValue(const nlohmann::json &j, SourceRange where,
                      DiagnosticEngine &diags, unsigned depth) {
  if (depth > 64) {
    diags.error(where, "config value nested more than 64 levels deep");
    return EvalValue::poison();
  }
  switch (j.type()) {
  case nlohmann::json::value_t::null:
    return EvalValue::none();
  case nlohmann::json::value_t::boolean:
    return EvalValue::boolean(j.get<bool>());
  case nlohmann::json::value_t::number_integer:
    return EvalValue::integer(j.get<int64_t>());
  case nlohmann::json::value_t::number_unsigned: {
    uint64_t u = j.get<uint64_t>();
    if (u > static_cast<uint64_t>(INT64_MAX)) {
      diags.error(where, "config integer {} does not fit in 64 bits", u);
      return EvalValue::poison();
    }
    return EvalValue::integer(static_cast<int64_t>(u));
  }
  case nlohmann::json::value_t::number_float:
    return EvalValue::floating(j.get<double>());
  case nlohmann::json::value_t::string:
    return EvalValue::string(j.get<std::string>());
  case nlohmann::json::value_t::array: {
    std::vector<EvalValue> elems;
    for (const auto &e : j) {
      EvalValue v = jsonToValue(e, where, diags, depth + 1);
      if (v.isPoison())
        return v;
      elems.push_back(std::move(v));
    }
    return EvalValue::list(std::move(elems));
  }
  case nlohmann::json::value_t::object: {
    std::map<std::string, EvalValue> entries;
    for (auto it = j.begin(); it != j.end(); ++it) {
      EvalValue v = jsonToValue(it.value(), where, diags, depth + 1);
      if (v.isPoison())
        return v;
      entries[it.key()] = std::move(v);
    }
    return EvalValue::dict(std::move(entries));
  }
  default:
    diags.error(where, "unsupported JSON value");
    return EvalValue::poison();
  }
}

namespace {

/// Finds `path` ("a" or "a.b.c") in `obj`; returns the value and its JSON
/// pointer, or null.
const nlohmann::json *findPath(const nlohmann::json &obj,
                               const std::string &path, std::string prefix,
                               std::string &pointer) {
  const nlohmann::json *cur = &obj;
  size_t start = 0;
  while (true) {
    size_t dot = path.find('.', start);
    std::string key = path.substr(
        start, dot == std::string::npos ? std::string::npos : dot - start);
    if (!cur->is_object())
      return nullptr;
    auto it = cur->find(key);
    if (it == cur->end())
      return nullptr;
    prefix += "/" + key;
    cur = &*it;
    if (dot == std::string::npos)
      break;
    start = dot + 1;
  }
  pointer = prefix;
  return cur;
}

class Binder {
public:
  Binder(const ast::ArchDecl &arch, const JsonSource &cfg, Evaluator &eval,
         DiagnosticEngine &diags, std::shared_ptr<Env> parent = nullptr)
      : arch(arch), cfg(cfg), eval(eval), diags(diags),
        env(std::make_shared<Env>(std::move(parent))) {
    for (const ast::ConfigEntry *e : arch.allConfig)
      if (e->kind != ast::ConfigEntry::Kind::Check)
        entries[e->name] = e;
  }

  std::shared_ptr<Env> run() {
    for (const ast::ConfigEntry *e : arch.allConfig)
      if (e->kind != ast::ConfigEntry::Kind::Check)
        resolve(e->name);
    if (diags.getNumErrors() != errorsAtStart)
      return nullptr;
    for (const ast::ConfigEntry *entry : arch.allConfig) {
      const ast::ConfigEntry &e = *entry;
      if (e.kind != ast::ConfigEntry::Kind::Check)
        continue;
      EvalValue v = eval.eval(*e.value, env);
      if (v.isPoison())
        continue;
      if (v.getKind() != EvalValue::Kind::Bool) {
        diags.error(e.value->getRange(), "config check must be a bool, got {}",
                    v.typeName());
        continue;
      }
      if (!v.getBool()) {
        std::string msg =
            e.message ? eval.interpolate(*e.message, e.range, env, false)
                      : "config check failed";
        diags.error(e.value->getRange(), msg)
            .notes.push_back({cfg.fileStart(), "with the config in " +
                                                   diags.getSourceMgr().getName(
                                                       cfg.getFileId())});
      }
    }
    if (diags.getNumErrors() != errorsAtStart)
      return nullptr;
    return env;
  }

private:
  const ast::ArchDecl &arch;
  const JsonSource &cfg;
  Evaluator &eval;
  DiagnosticEngine &diags;
  std::shared_ptr<Env> env;
  std::map<std::string, const ast::ConfigEntry *> entries;
  std::map<std::string, int> state; // 1 = in progress, 2 = done
  std::vector<std::string> stack;
  unsigned errorsAtStart = diags.getNumErrors();

  /// Looks a field up in text_config, then the root, then under aliases.
  const nlohmann::json *lookup(const ast::ConfigEntry &e,
                               std::string &pointer) {
    const nlohmann::json &root = cfg.root();
    std::vector<std::string> names = {e.name};
    names.insert(names.end(), e.aliases.begin(), e.aliases.end());
    auto tc = root.find("text_config");
    for (const std::string &n : names) {
      if (tc != root.end() && tc->is_object())
        if (auto *v = findPath(*tc, n, "/text_config", pointer))
          return v;
      if (auto *v = findPath(root, n, "", pointer))
        return v;
    }
    return nullptr;
  }

  void resolve(const std::string &name) {
    auto it = entries.find(name);
    if (it == entries.end() || state[name] == 2)
      return;
    const ast::ConfigEntry &e = *it->second;
    if (state[name] == 1) {
      Diagnostic &d =
          diags.error(e.nameRange, "config field '{}' depends on itself", name);
      for (const std::string &s : stack)
        d.notes.push_back(
            {entries[s]->nameRange, "through '" + s + "' declared here"});
      env->define(name, EvalValue::poison());
      state[name] = 2;
      return;
    }
    state[name] = 1;
    stack.push_back(name);
    env->define(name, bind(e));
    stack.pop_back();
    state[name] = 2;
  }

  void resolveDeps(const ast::Expr &expr) {
    std::set<std::string> names;
    ast::collectNamesRead(expr, names);
    for (const std::string &n : names)
      resolve(n);
  }

  EvalValue bind(const ast::ConfigEntry &e) {
    const std::string &cfgName = diags.getSourceMgr().getName(cfg.getFileId());
    if (e.kind == ast::ConfigEntry::Kind::Let) {
      resolveDeps(*e.value);
      EvalValue v = eval.eval(*e.value, env);
      if (e.type && !Evaluator::coerce(v, *e.type)) {
        diags.error(e.value->getRange(),
                    "'{}' is declared {} but evaluates "
                    "to {} ({})",
                    e.name, e.type->str(), v.typeName(), v.str());
        return EvalValue::poison();
      }
      return v;
    }
    std::string pointer;
    const nlohmann::json *j = lookup(e, pointer);
    if (j && !j->is_null()) {
      SourceRange where = cfg.rangeOf(pointer);
      EvalValue v = jsonToValue(*j, where, diags);
      if (v.isPoison())
        return v;
      if (!Evaluator::coerce(v, *e.type)) {
        std::string shown = j->dump();
        if (shown.size() > 60)
          shown = shown.substr(0, 57) + "...";
        diags
            .error(where, "config field '{}' must be {}, got {} {}",
                   pointer.substr(1), e.type->str(), v.typeName(), shown)
            .notes.push_back({e.range, "'" + e.name + "' declared here"});
        return EvalValue::poison();
      }
      return v;
    }
    // An explicit null in an optional field means "none", even when the
    // field has a default for the absent case (Mistral: sliding_window).
    if (j && e.type->optional)
      return EvalValue::none();
    if (e.value) {
      resolveDeps(*e.value);
      EvalValue v = eval.eval(*e.value, env);
      if (!Evaluator::coerce(v, *e.type)) {
        diags.error(e.value->getRange(),
                    "default of config field '{}' must be {}, got {} ({})",
                    e.name, e.type->str(), v.typeName(), v.str());
        return EvalValue::poison();
      }
      return v;
    }
    if (e.type->optional)
      return EvalValue::none();
    Diagnostic &d = diags.error(
        cfg.fileStart(), "{} config field '{}' in {}",
        j ? "null value for required" : "missing required", e.name, cfgName);
    if (!e.aliases.empty()) {
      std::string al;
      for (const std::string &a : e.aliases)
        al += (al.empty() ? "'" : ", '") + a + "'";
      d.notes.push_back({e.range, "'" + e.name + "' (also read as " + al +
                                      ") is declared here"});
    } else {
      d.notes.push_back({e.range, "'" + e.name + "' is declared here"});
    }
    return EvalValue::poison();
  }
};

} // namespace

std::shared_ptr<Env> bindConfig(const ast::ArchDecl &arch,
                                const JsonSource &config, Evaluator &eval,
                                DiagnosticEngine &diags) {
  Binder b(arch, config, eval, diags);
  return b.run();
}

namespace {
std::shared_ptr<Env> bindWithUses(const ast::ArchDecl &arch,
                                  const JsonSource &config, Evaluator &eval,
                                  DiagnosticEngine &diags,
                                  const Program &program, unsigned depth) {
  std::shared_ptr<Env> uses;
  if (!arch.allUses.empty()) {
    if (depth > 16) {
      diags.error(arch.allUses.front()->range,
                  "'use' chain deeper than 16 archs (archs using each "
                  "other?)");
      return nullptr;
    }
    uses = std::make_shared<Env>();
    for (const ast::UseDecl *use : arch.allUses) {
      const ast::UseDecl &u = *use;
      const ast::ArchDecl *used = program.findArch(u.arch);
      if (!used) {
        diags.error(u.archRange, "no arch named '{}' is loaded", u.arch);
        return nullptr;
      }
      std::shared_ptr<Env> env =
          bindWithUses(*used, config, eval, diags, program, depth + 1);
      if (!env)
        return nullptr;
      uses->define(u.alias, Evaluator::archNamespace(*used, env));
    }
  }
  Binder b(arch, config, eval, diags, uses);
  return b.run();
}
} // namespace

std::shared_ptr<Env> bindConfig(const ast::ArchDecl &arch,
                                const JsonSource &config, Evaluator &eval,
                                DiagnosticEngine &diags,
                                const Program &program) {
  return bindWithUses(arch, config, eval, diags, program, 0);
}

} // namespace archc
