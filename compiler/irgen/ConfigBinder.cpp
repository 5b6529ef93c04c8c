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

#include <cmath>
#include <set>

namespace archc {

EvalValue jsonToValue(const nlohmann::json &j, SourceRange where,
                      DiagnosticEngine &diags, unsigned depth,
                      const std::shared_ptr<ConfigUse> &use,
                      const std::string &pointer, bool allowInfinity) {
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
  case nlohmann::json::value_t::number_float: {
    double d = j.get<double>();
    if (std::isnan(d) || (std::isinf(d) && !allowInfinity)) {
      diags.error(where,
                  "config value '{}' is {}; a model computed with it would "
                  "give {}, so archc refuses it",
                  pointer.empty() ? std::string("?") : pointer.substr(1),
                  std::isnan(d) ? "NaN"
                  : d > 0       ? "Infinity"
                                : "-Infinity",
                  std::isnan(d) ? "NaN" : "non-finite values");
      return EvalValue::poison();
    }
    return EvalValue::floating(d);
  }
  case nlohmann::json::value_t::string:
    return EvalValue::string(j.get<std::string>());
  case nlohmann::json::value_t::array: {
    std::vector<EvalValue> elems;
    size_t index = 0;
    for (const auto &e : j) {
      // A list may hold an infinite bound ([min, max]).
      EvalValue v = jsonToValue(e, where, diags, depth + 1, use,
                                pointer + "/" + std::to_string(index++),
                                /*allowInfinity=*/true);
      if (v.isPoison())
        return v;
      elems.push_back(std::move(v));
    }
    return EvalValue::list(std::move(elems));
  }
  case nlohmann::json::value_t::object: {
    std::map<std::string, EvalValue> entries;
    for (auto it = j.begin(); it != j.end(); ++it) {
      EvalValue v = jsonToValue(it.value(), where, diags, depth + 1, use,
                                pointer + "/" + it.key(), allowInfinity);
      if (v.isPoison())
        return v;
      entries[it.key()] = std::move(v);
    }
    std::shared_ptr<const ConfigOrigin> origin;
    if (use)
      origin = std::make_shared<const ConfigOrigin>(ConfigOrigin{use, pointer});
    return EvalValue::dict(std::move(entries), std::move(origin));
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

/// The arch whose own config block holds `entry` (for messages), or "".
std::string ownerOf(const ast::ConfigEntry *entry, const Program *program) {
  if (!program)
    return "";
  for (const auto &f : program->getFiles())
    for (const auto &a : f->archs)
      for (const ast::ConfigEntry &e : a->config)
        if (&e == entry)
          return a->name;
  return "";
}

class Binder {
public:
  Binder(const ast::ArchDecl &arch, const JsonSource &cfg, Evaluator &eval,
         DiagnosticEngine &diags, const BindLog &log, const Program *program,
         std::shared_ptr<Env> parent = nullptr)
      : arch(arch), cfg(cfg), eval(eval), diags(diags), log(log),
        program(program), env(std::make_shared<Env>(std::move(parent))) {
    for (const ast::ConfigEntry *e : arch.allConfig)
      if (e->declaresName())
        entries[e->name] = e;
  }

  std::shared_ptr<Env> run() {
    const nlohmann::json &root = cfg.root();
    auto tc = root.find("text_config");
    bool hasText = tc != root.end() && tc->is_object();
    if (log.use && hasText)
      log.use->open("/text_config");
    for (const ast::ConfigEntry *e : arch.allConfig)
      if (e->declaresName())
        resolve(e->name);
    // Inert keys: present or not, they change nothing; where present they
    // are accounted for (in text_config and at the top level).
    for (const std::string &name : arch.allInert) {
      // A field of the same name (a child honouring what its base ignores)
      // is the reading; the inert declaration only accounts for the key.
      auto field = entries.find(name);
      if (field != entries.end() &&
          field->second->kind == ast::ConfigEntry::Kind::Field)
        continue;
      std::vector<std::string> pointers;
      if (hasText)
        pointers.push_back(configPathPointer(name, "/text_config"));
      pointers.push_back(configPathPointer(name));
      for (const std::string &pointer : pointers) {
        const nlohmann::json *j = at(pointer);
        if (!j)
          continue;
        if (log.use) {
          log.use->consume(pointer);
          openParents(pointer);
        }
        // An inert key changes nothing: an infinity there is harmless.
        if (log.fields)
          log.fields->push_back(
              {arch.name, name,
               jsonToValue(*j, cfg.rangeOf(pointer), diags, 0, nullptr, pointer,
                           /*allowInfinity=*/true),
               BoundField::Source::Inert, pointer, ""});
      }
    }
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
        Diagnostic &d = diags.error(e.value->getRange(), msg);
        // The config keys the check read, where config.json sets them.
        noteConfigKeysRead(d, *e.value);
        d.notes.push_back({cfg.fileStart(),
                           "with the config in " +
                               diags.getSourceMgr().getName(cfg.getFileId())});
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
  const BindLog &log;
  const Program *program;
  std::shared_ptr<Env> env;
  std::map<std::string, const ast::ConfigEntry *> entries;
  std::map<std::string, int> state; // 1 = in progress, 2 = done
  /// Fields read from config.json: name -> JSON pointer of the key.
  std::map<std::string, std::string> fromConfig;
  std::vector<std::string> stack;
  unsigned errorsAtStart = diags.getNumErrors();

  /// The JSON value at `pointer`, or null.
  const nlohmann::json *at(const std::string &pointer) const {
    const nlohmann::json *cur = &cfg.root();
    size_t start = 1;
    while (start <= pointer.size()) {
      size_t slash = pointer.find('/', start);
      std::string key =
          pointer.substr(start, slash == std::string::npos ? std::string::npos
                                                           : slash - start);
      if (!cur->is_object())
        return nullptr;
      auto it = cur->find(key);
      if (it == cur->end())
        return nullptr;
      cur = &*it;
      if (slash == std::string::npos)
        break;
      start = slash + 1;
    }
    return cur;
  }

  /// A key read at `pointer` through nested objects (a dotted alias) opens
  /// them: their other keys must be accounted for one by one.
  void openParents(const std::string &pointer) {
    size_t slash = pointer.rfind('/');
    if (slash != std::string::npos && slash > 0)
      log.use->open(pointer.substr(0, slash));
  }

  /// Looks a field up in text_config, then the root, then under aliases.
  const nlohmann::json *lookup(const ast::ConfigEntry &e,
                               std::string &pointer) {
    const nlohmann::json &root = cfg.root();
    std::vector<std::string> names = {e.name};
    names.insert(names.end(), e.aliases.begin(), e.aliases.end());
    auto tc = root.find("text_config");
    for (const std::string &n : names) {
      // "/path": the top level only (a vision-language class's own field
      // that its text_config also has).
      if (!n.empty() && n[0] == '/') {
        if (auto *v = findPath(root, n.substr(1), "", pointer))
          return v;
        continue;
      }
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

  void record(const ast::ConfigEntry &e, const EvalValue &v,
              BoundField::Source source, const std::string &pointer) {
    if (!log.fields)
      return;
    log.fields->push_back(
        {arch.name, e.name, v, source, pointer,
         source == BoundField::Source::Default ? ownerOf(&e, program) : ""});
  }

  /// Adds to `d` a note for each config key `expr` reads, where config.json
  /// sets it.
  void noteConfigKeysRead(Diagnostic &d, const ast::Expr &expr) {
    std::set<std::string> names;
    ast::collectNamesRead(expr, names);
    for (const std::string &n : names) {
      auto it = fromConfig.find(n);
      if (it == fromConfig.end())
        continue;
      const EvalValue *val = env->lookup(n);
      std::string shown = val ? val->str() : std::string("?");
      if (shown.size() > 60)
        shown = shown.substr(0, 57) + "...";
      d.notes.push_back(
          {cfg.rangeOf(it->second),
           fmt::format("'{}' is set to {} here", it->second.substr(1), shown)});
    }
  }

  /// The keys that state how many positions the model takes: clients
  /// size their context from them (genai_config.json's context_length,
  /// Whisper's max_length), and learned-position families their tables.
  /// A value below 1 gives a package no client can run, so it is refused
  /// where the config states it.
  bool checkContextLength(const std::string &pointer, const EvalValue &v,
                          SourceRange where, const ast::ConfigEntry &e) {
    static const std::set<std::string> contextKeys = {
        "max_position_embeddings", "n_positions", "max_seq_len",
        "max_target_positions", "max_source_positions"};
    std::string key = pointer.substr(pointer.rfind('/') + 1);
    if (!contextKeys.count(key) || !v.isInt() || v.getInt() >= 1)
      return true;
    diags
        .error(where,
               "config field '{}' is {}: the model must take at least one "
               "position (clients size their context from it)",
               pointer.substr(1), v.getInt())
        .notes.push_back({e.range, "'" + e.name + "' declared here"});
    return false;
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
    if (j && log.use) {
      // A dict-typed field's keys are accounted for as the code reads them;
      // any other value is read whole.
      if (j->is_object() && !log.use->isConsumed(pointer))
        log.use->open(pointer);
      else
        log.use->consume(pointer);
      openParents(pointer);
    }
    auto notInherited = arch.defaultsNotInherited.find(e.name);
    if (j && !j->is_null()) {
      SourceRange where = cfg.rangeOf(pointer);
      EvalValue v = jsonToValue(*j, where, diags, 0,
                                j->is_object() ? log.use : nullptr, pointer);
      if (v.isPoison())
        return v;
      fromConfig[e.name] = pointer;
      record(e, v, BoundField::Source::Config, pointer);
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
      if (!checkContextLength(pointer, v, where, e))
        return EvalValue::poison();
      return v;
    }
    // An explicit null in an optional field means "none", even when the
    // field has a default for the absent case (Mistral: sliding_window).
    if (j && e.type->optional) {
      record(e, EvalValue::none(), BoundField::Source::Config, pointer);
      return EvalValue::none();
    }
    if (notInherited != arch.defaultsNotInherited.end() &&
        (e.value || e.type->optional)) {
      // The base's default describes the base's models, not this family's.
      Diagnostic &d =
          diags.error(cfg.fileStart(), "{} config field '{}' in {}",
                      j ? "null value for" : "missing", e.name, cfgName);
      d.notes.push_back(
          {arch.nameRange,
           fmt::format("'{}' inherits '{}' from '{}' without its default: "
                       "state {}'s default in its config block, or `keep "
                       "{}` when the base's is also {}'s",
                       arch.name, e.name, notInherited->second, arch.name,
                       e.name, arch.name)});
      d.notes.push_back({e.range, "'" + e.name + "' is declared here"});
      return EvalValue::poison();
    }
    if (e.value) {
      resolveDeps(*e.value);
      EvalValue v = eval.eval(*e.value, env);
      if (!Evaluator::coerce(v, *e.type)) {
        diags.error(e.value->getRange(),
                    "default of config field '{}' must be {}, got {} ({})",
                    e.name, e.type->str(), v.typeName(), v.str());
        return EvalValue::poison();
      }
      record(e, v, BoundField::Source::Default, "");
      return v;
    }
    if (e.type->optional) {
      record(e, EvalValue::none(), BoundField::Source::Default, "");
      return EvalValue::none();
    }
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
                                DiagnosticEngine &diags, const BindLog &log) {
  Binder b(arch, config, eval, diags, log, nullptr);
  return b.run();
}

std::string configPathPointer(const std::string &path,
                              const std::string &prefix) {
  std::string pointer = prefix + "/" + path;
  for (size_t k = prefix.size() + 1; k < pointer.size(); ++k)
    if (pointer[k] == '.')
      pointer[k] = '/';
  return pointer;
}

namespace {
std::shared_ptr<Env> bindWithUses(const ast::ArchDecl &arch,
                                  const JsonSource &config, Evaluator &eval,
                                  DiagnosticEngine &diags,
                                  const Program &program, const BindLog &log,
                                  unsigned depth) {
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
          bindWithUses(*used, config, eval, diags, program, log, depth + 1);
      if (!env)
        return nullptr;
      uses->define(u.alias, Evaluator::archNamespace(*used, env));
    }
  }
  Binder b(arch, config, eval, diags, log, &program, uses);
  return b.run();
}
} // namespace

std::shared_ptr<Env> bindConfig(const ast::ArchDecl &arch,
                                const JsonSource &config, Evaluator &eval,
                                DiagnosticEngine &diags, const Program &program,
                                const BindLog &log) {
  return bindWithUses(arch, config, eval, diags, program, log, 0);
}

} // namespace archc
