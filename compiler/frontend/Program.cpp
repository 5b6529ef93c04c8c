//===- Program.cpp - A .arch file with its imports ------------------------===//
//
// This file implements import resolution and arch selection.
//
//===----------------------------------------------------------------------===//
#include "frontend/Program.h"

#include "frontend/Builtins.h"
#include "frontend/BundledSnapshot.h"
#include "frontend/Parser.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <regex>
#include <set>

namespace fs = std::filesystem;

namespace archc {

std::string bundledArchsDir() {
  if (const char *env = std::getenv("ARCHC_ARCHS_DIR"))
    return env;
#ifdef ARCHC_DEFAULT_ARCHS_DIR
  return ARCHC_DEFAULT_ARCHS_DIR;
#else
  return "archs";
#endif
}

std::vector<BundledArch> listBundledArchs() {
  // `arch NAME matches "A", "B"` (possibly over several lines): a textual
  // scan is enough to choose the file, which is then parsed properly.
  static const std::regex matchesClause(
      R"re(\barch\s+([A-Za-z_][A-Za-z0-9_]*)(?:\s+extends\s+[A-Za-z_][A-Za-z0-9_]*)?(?:\s+model_type\s+("[^"]*"(?:\s*,\s*"[^"]*")*))?\s+matches\s+("[^"]*"(\s*,\s*"[^"]*")*))re");
  static const std::regex quoted(R"re("([^"]*)")re");
  std::vector<fs::path> files;
  std::error_code ec;
  for (const auto &e : fs::directory_iterator(bundledArchsDir(), ec))
    if (e.path().extension() == ".arch")
      files.push_back(e.path());
  std::sort(files.begin(), files.end());
  std::vector<BundledArch> out;
  for (const fs::path &f : files) {
    std::ifstream in(f);
    std::string text((std::istreambuf_iterator<char>(in)),
                     std::istreambuf_iterator<char>());
    // The clause starts with the keyword, so the pattern is tried only where
    // `arch` starts a word (std::regex tried at every offset of the files
    // cost ~95 M instructions a run); matches do not overlap, as with
    // sregex_iterator.
    for (size_t at = text.find("arch"); at != std::string::npos;
         at = text.find("arch", at)) {
      auto wordChar = [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
      };
      std::smatch m;
      if ((at > 0 && wordChar(text[at - 1])) ||
          !std::regex_search(text.cbegin() + at, text.cend(), m, matchesClause,
                             std::regex_constants::match_continuous)) {
        at += 4;
        continue;
      }
      at += m.length(0);
      BundledArch a;
      a.file = f.string();
      a.name = m[1];
      std::string types = m[2], list = m[3];
      for (auto q = std::sregex_iterator(types.begin(), types.end(), quoted);
           q != std::sregex_iterator(); ++q)
        a.modelTypes.push_back((*q)[1]);
      for (auto q = std::sregex_iterator(list.begin(), list.end(), quoted);
           q != std::sregex_iterator(); ++q)
        a.matches.push_back((*q)[1]);
      out.push_back(std::move(a));
    }
  }
  return out;
}

std::string findBundledArch(const std::string &architecture,
                            std::vector<std::string> &known) {
  std::string found;
  for (const BundledArch &a : listBundledArchs())
    for (const std::string &m : a.matches) {
      known.push_back(m);
      if (m == architecture && found.empty())
        found = a.file;
    }
  std::sort(known.begin(), known.end());
  return found;
}

bool Program::load(const std::string &path,
                   const std::vector<std::string> &includeDirs, SourceMgr &sm,
                   DiagnosticEngine &diags) {
  std::error_code ec;
  std::string canonical = fs::weakly_canonical(path, ec).string();
  loadedCanonical.insert(canonical);
  return loadFile(path, canonical, SourceRange(), includeDirs, sm, diags, 0) &&
         loadBases(includeDirs, sm, diags) && resolveArchs(diags) &&
         !diags.hasErrors();
}

namespace {
/// Where an import of `rel` from the file `from` resolves: next to `from`,
/// then in the include directories, then in the bundled archs/ directory;
/// "" when none holds it.
std::string findImport(const std::string &rel, const std::string &from,
                       const std::vector<std::string> &includeDirs) {
  std::vector<fs::path> candidates;
  fs::path p(rel);
  if (p.is_absolute()) {
    candidates.push_back(p);
  } else {
    candidates.push_back(fs::path(from).parent_path() / p);
    for (const std::string &dir : includeDirs)
      candidates.push_back(fs::path(dir) / p);
    candidates.push_back(fs::path(bundledArchsDir()) / p);
  }
  std::error_code ec;
  for (const fs::path &c : candidates)
    if (fs::is_regular_file(c, ec))
      return c.lexically_normal().string();
  return "";
}
} // namespace

bool Program::loadBases(const std::vector<std::string> &includeDirs,
                        SourceMgr &sm, DiagnosticEngine &diags) {
  // A base that no loaded file declares is loaded from `<base>.arch`,
  // found like an import of that name from the child's file; until no new
  // file comes in (a loaded base may extend another).
  bool ok = true;
  for (bool loaded = true; loaded && ok;) {
    loaded = false;
    std::set<std::string> declared;
    for (const auto &f : files)
      for (const auto &a : f->archs)
        declared.insert(a->name);
    std::vector<std::pair<std::string, const ast::ArchDecl *>> wanted;
    for (const auto &f : files)
      for (const auto &a : f->archs)
        if (!a->base.empty() && !declared.count(a->base))
          wanted.push_back({sm.getName(f->fileId), a.get()});
    for (const auto &[from, a] : wanted) {
      std::string found = findImport(a->base + ".arch", from, includeDirs);
      std::error_code ec;
      std::string canonical =
          found.empty() ? "" : fs::weakly_canonical(found, ec).string();
      if (found.empty() || !loadedCanonical.insert(canonical).second)
        continue; // reported by resolveArchs
      baseFiles.emplace(a->base, found);
      ok &= loadFile(found, canonical, a->baseRange, includeDirs, sm, diags, 1);
      loaded = true;
    }
  }
  return ok;
}

namespace {
/// Orders a package's graphs by data flow: each next graph is the first, in
/// the given order, that reads (by input name) no output of a graph still to
/// be placed (vision_encoder's image_features feed embedding, whose
/// inputs_embeds feed decoder); in a cycle, the first left. So a child's new
/// graphs take their place in the pipeline wherever the base declared its
/// own.
void orderByDataFlow(std::vector<const ast::ModelDecl *> &graphs) {
  std::vector<const ast::ModelDecl *> left = graphs, ordered;
  auto produces = [](const ast::ModelDecl *g, const std::string &name) {
    for (const ast::Target &t : g->outputs)
      if (t.name == name)
        return true;
    return false;
  };
  while (!left.empty()) {
    auto ready = std::find_if(left.begin(), left.end(), [&](auto *g) {
      for (const ast::ModelInput &in : g->inputs)
        for (const ast::ModelDecl *other : left)
          if (other != g && produces(other, in.name))
            return false;
      return true;
    });
    if (ready == left.end())
      ready = left.begin(); // a cycle: declaration order
    ordered.push_back(*ready);
    left.erase(ready);
  }
  graphs = std::move(ordered);
}

/// Sets an arch's effective members from its own and (when it extends one)
/// its resolved base's.
void inherit(ast::ArchDecl &a, const ast::ArchDecl *base,
             DiagnosticEngine &diags) {
  a.allConfig.clear();
  a.allDefs.clear();
  a.allInert.clear();
  a.defaultsNotInherited.clear();
  std::map<std::string, const ast::ConfigEntry *> ownEntries;
  std::map<std::string, SourceRange> kept;
  // `keep all`: every inherited field keeps the base's default (a head of
  // the same configuration class: BertForMaskedLM on BertModel's fields).
  bool keepAll = false;
  for (const ast::ConfigEntry &e : a.config) {
    if (e.declaresName())
      ownEntries.emplace(e.name, &e);
    else if (e.kind == ast::ConfigEntry::Kind::Keep)
      for (const std::string &n : e.names) {
        if (n == "all")
          keepAll = true;
        else
          kept.emplace(n, e.nameRange);
      }
  }
  std::map<std::string, const ast::DefDecl *> ownDefs;
  for (const auto &d : a.defs)
    ownDefs.emplace(d->name, d.get());
  std::set<const void *> placed;
  if (base) {
    a.allInert = base->allInert;
    // A redeclared field or let takes the base entry's place. A base field
    // the arch neither redeclares nor keeps loses its default: the base's
    // value for an absent key is the base's model's, not necessarily this
    // family's, so the key must then be in config.json.
    for (const ast::ConfigEntry *e : base->allConfig) {
      auto it = e->kind == ast::ConfigEntry::Kind::Check
                    ? ownEntries.end()
                    : ownEntries.find(e->name);
      if (it == ownEntries.end()) {
        a.allConfig.push_back(e);
        if (e->kind == ast::ConfigEntry::Kind::Field && !kept.count(e->name) &&
            (!keepAll || base->defaultsNotInherited.count(e->name))) {
          auto inherited = base->defaultsNotInherited.find(e->name);
          a.defaultsNotInherited[e->name] =
              inherited != base->defaultsNotInherited.end() ? inherited->second
                                                            : base->name;
        }
        continue;
      }
      a.allConfig.push_back(it->second);
      placed.insert(it->second);
    }
    for (const ast::DefDecl *d : base->allDefs) {
      auto it = ownDefs.find(d->name);
      a.allDefs.push_back(it == ownDefs.end() ? d : it->second);
      if (it != ownDefs.end())
        placed.insert(it->second);
    }
  }
  // `keep` names a field the arch inherits and does not redeclare.
  for (const auto &[keptName, range] : kept) {
    // (A named copy: clang 14 cannot capture a structured binding.)
    const std::string &name = keptName;
    bool inheritedField =
        base && std::any_of(base->allConfig.begin(), base->allConfig.end(),
                            [&](const ast::ConfigEntry *e) {
                              return e->kind == ast::ConfigEntry::Kind::Field &&
                                     e->name == name;
                            });
    if (!inheritedField)
      diags.error(range, "keep '{}': {} inherits no config field of that name",
                  name, a.name);
    else if (ownEntries.count(name))
      diags.error(range, "keep '{}': {} redeclares it", name, a.name)
          .notes.push_back({ownEntries[name]->nameRange, "declared here"});
    else if (base->defaultsNotInherited.count(name))
      diags.error(range,
                  "keep '{}': {} itself has no default for it ({} does not "
                  "keep {}'s)",
                  name, base->name, base->name,
                  base->defaultsNotInherited.at(name));
  }
  for (const ast::ConfigEntry &e : a.config) {
    if (e.kind == ast::ConfigEntry::Kind::Inert)
      a.allInert.insert(a.allInert.end(), e.names.begin(), e.names.end());
    if (e.kind == ast::ConfigEntry::Kind::Inert ||
        e.kind == ast::ConfigEntry::Kind::Keep)
      continue;
    if (!placed.count(&e))
      a.allConfig.push_back(&e);
  }
  for (const auto &d : a.defs)
    if (!placed.count(d.get()))
      a.allDefs.push_back(d.get());
  a.effectiveModel = a.model ? a.model.get()
                     : base  ? base->effectiveModel
                             : nullptr;
  // Uses (by alias) and named graphs (by name): the base's, this arch's
  // replacing those of the same name in place, then this arch's new ones.
  a.allUses.clear();
  a.allGraphs.clear();
  if (base) {
    for (const ast::UseDecl *u : base->allUses) {
      auto own = std::find_if(
          a.uses.begin(), a.uses.end(),
          [&](const ast::UseDecl &o) { return o.alias == u->alias; });
      a.allUses.push_back(own == a.uses.end() ? u : &*own);
    }
    for (const ast::ModelDecl *g : base->allGraphs) {
      auto own = std::find_if(a.graphs.begin(), a.graphs.end(),
                              [&](const std::unique_ptr<ast::ModelDecl> &o) {
                                return o->name == g->name;
                              });
      a.allGraphs.push_back(own == a.graphs.end() ? g : own->get());
    }
  }
  for (const ast::UseDecl &u : a.uses)
    if (std::find(a.allUses.begin(), a.allUses.end(), &u) == a.allUses.end())
      a.allUses.push_back(&u);
  for (const auto &g : a.graphs)
    if (std::find(a.allGraphs.begin(), a.allGraphs.end(), g.get()) ==
        a.allGraphs.end())
      a.allGraphs.push_back(g.get());
  orderByDataFlow(a.allGraphs);
}
} // namespace

bool Program::resolveArchs(DiagnosticEngine &diags) {
  std::map<std::string, ast::ArchDecl *> byName;
  bool ok = true;
  for (auto &f : files)
    for (auto &a : f->archs) {
      auto [it, inserted] = byName.emplace(a->name, a.get());
      if (!inserted) {
        diags.error(a->nameRange, "redefinition of arch '{}'", a->name)
            .notes.push_back(
                {it->second->nameRange, "previous definition is here"});
        ok = false;
      }
    }
  if (!ok)
    return false;
  // Depth-first over `extends`, so a base is resolved before its children;
  // `chain` holds the archs being resolved, to report a cycle.
  std::map<const ast::ArchDecl *, bool> done;
  std::vector<const ast::ArchDecl *> chain;
  std::function<bool(ast::ArchDecl &)> resolve = [&](ast::ArchDecl &a) {
    if (done.count(&a))
      return done[&a];
    if (std::find(chain.begin(), chain.end(), &a) != chain.end()) {
      std::string path;
      for (auto it = std::find(chain.begin(), chain.end(), &a);
           it != chain.end(); ++it)
        path += (*it)->name + " -> ";
      diags.error(a.baseRange, "arch '{}' extends itself: {}{}", a.name, path,
                  a.name);
      return false;
    }
    const ast::ArchDecl *base = nullptr;
    if (!a.base.empty()) {
      auto it = byName.find(a.base);
      if (it == byName.end()) {
        std::vector<std::string> names;
        for (auto &[n, d] : byName)
          names.push_back(n);
        Diagnostic &d =
            diags.error(a.baseRange, "unknown base arch '{}'", a.base);
        if (auto s = suggestName(a.base, names))
          d.notes.push_back({a.baseRange, "did you mean '" + *s + "'?"});
        auto file = baseFiles.find(a.base);
        d.notes.push_back(
            {SourceRange(),
             file != baseFiles.end()
                 ? file->second + " was loaded for it but declares no arch '" +
                       a.base + "'"
                 : "no loaded file declares it, and no " + a.base +
                       ".arch was found next to this file, in -I directories "
                       "or in the bundled archs/ (a base is loaded from "
                       "<base>.arch unless an import brings in the file "
                       "declaring it)"});
        done[&a] = false;
        return false;
      }
      chain.push_back(&a);
      bool baseOk = resolve(*it->second);
      chain.pop_back();
      if (!baseOk) {
        done[&a] = false;
        return false;
      }
      base = it->second;
    }
    unsigned errors = diags.getNumErrors();
    inherit(a, base, diags);
    done[&a] = diags.getNumErrors() == errors;
    return done[&a];
  };
  for (auto &f : files)
    for (auto &a : f->archs)
      ok &= resolve(*a);
  return ok;
}

namespace {
const char *describe(AstSnapshot::Miss miss) {
  switch (miss) {
  case AstSnapshot::Miss::NoEntry:
    return "not in the snapshot";
  case AstSnapshot::Miss::TextDiffers:
    return "text differs from the snapshot's";
  case AstSnapshot::Miss::CorruptEntry:
    return "corrupt snapshot entry";
  }
  return "?";
}
} // namespace

std::unique_ptr<ast::File>
Program::restoreOrParse(const std::string &canonicalPath, uint32_t fileId,
                        SourceMgr &sm, DiagnosticEngine &diags) {
  const char *why = "no AST snapshot";
  if (!astSnapshotSet || astSnapshot) {
    if (bundledDirPrefix.empty()) {
      std::error_code ec;
      bundledDirPrefix =
          fs::weakly_canonical(bundledArchsDir(), ec).string() + "/";
    }
    std::string_view relative(canonicalPath);
    // The snapshot is read only once a bundled file is loaded.
    const AstSnapshot *snapshot = nullptr;
    if (relative.starts_with(bundledDirPrefix))
      snapshot = astSnapshotSet ? astSnapshot : bundledAstSnapshot();
    else
      why = "not a bundled file";
    if (snapshot) {
      relative.remove_prefix(bundledDirPrefix.size());
      AstSnapshot::Miss miss;
      if (auto file =
              snapshot->find(relative, sm.getText(fileId), fileId, &miss)) {
        if (astSnapshotTrace)
          *astSnapshotTrace << "archc: ast-snapshot: " << sm.getName(fileId)
                            << ": from the snapshot\n";
        return file;
      }
      why = describe(miss);
    }
  }
  if (astSnapshotTrace)
    *astSnapshotTrace << "archc: ast-snapshot: " << sm.getName(fileId)
                      << ": parsed (" << why << ")\n";
  return parseArchFile(fileId, sm, diags);
}

bool Program::loadFile(const std::string &path,
                       const std::string &canonicalPath, SourceRange importedAt,
                       const std::vector<std::string> &includeDirs,
                       SourceMgr &sm, DiagnosticEngine &diags, unsigned depth) {
  if (depth > 32) {
    diags.error(importedAt, "imports nested too deeply (more than 32 levels)");
    return false;
  }
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    diags.error(importedAt, "'{}' is a directory, not an .arch file", path);
    return false;
  }
  std::string err;
  uint32_t id = sm.addFile(path, err);
  if (!id) {
    if (importedAt.isValid())
      diags.error(importedAt, "cannot read imported file '{}': {}", path, err);
    else
      diags.error(SourceRange(), "cannot read '{}': {}", path, err);
    return false;
  }
  auto file = restoreOrParse(canonicalPath, id, sm, diags);
  if (!file)
    return false;
  ast::File *f = file.get();
  files.push_back(std::move(file));
  bool ok = true;
  for (auto &def : f->defs) {
    auto [it, inserted] = defs.emplace(def->name, def.get());
    if (!inserted) {
      diags.error(def->nameRange, "redefinition of '{}'", def->name)
          .notes.push_back(
              {it->second->nameRange, "previous definition is here"});
      ok = false;
    }
  }
  for (const ast::ImportDecl &imp : f->imports) {
    std::string found = findImport(imp.path, path, includeDirs);
    if (found.empty()) {
      diags.error(imp.range, "cannot find imported file '{}'", imp.path)
          .notes.push_back(
              {SourceRange(), "searched next to the importing file, in -I "
                              "directories and in " +
                                  bundledArchsDir()});
      ok = false;
      continue;
    }
    std::string canonical = fs::weakly_canonical(found, ec).string();
    if (!loadedCanonical.insert(canonical).second)
      continue; // already loaded (or an import cycle)
    ok &= loadFile(found, canonical, imp.range, includeDirs, sm, diags,
                   depth + 1);
  }
  return ok;
}

const ast::ArchDecl *Program::selectArch(const std::string &architecture,
                                         DiagnosticEngine &diags) const {
  const ast::File &main = getMainFile();
  if (main.archs.empty()) {
    diags.error(SourceRange(SourceLoc{main.fileId, 1, 1}),
                "no 'arch' declaration in this file");
    return nullptr;
  }
  if (main.archs.size() == 1)
    return main.archs.front().get();
  for (const auto &a : main.archs)
    for (const std::string &m : a->matches)
      if (m == architecture)
        return a.get();
  // Without a class to match (-emit=config of the file alone), the one arch
  // that claims classes: the others are its parts (a text model, a base);
  // or the one that every other claiming arch extends (a family and its
  // task heads, BertModel's arch and BertForMaskedLM's).
  if (architecture.empty()) {
    std::vector<const ast::ArchDecl *> claiming;
    for (const auto &a : main.archs)
      if (!a->matches.empty())
        claiming.push_back(a.get());
    if (claiming.size() == 1)
      return claiming.front();
    auto derives = [&](const ast::ArchDecl *a, const std::string &root) {
      for (const ast::ArchDecl *b = a; b && !b->base.empty();
           b = findArch(b->base))
        if (b->base == root)
          return true;
      return false;
    };
    for (const ast::ArchDecl *root : claiming) {
      bool all = true;
      for (const ast::ArchDecl *a : claiming)
        all &= a == root || derives(a, root->name);
      if (all)
        return root;
    }
  }
  auto &d = diags.error(SourceRange(SourceLoc{main.fileId, 1, 1}),
                        "several archs in this file and none matches the "
                        "config's architecture '{}'",
                        architecture);
  for (const auto &a : main.archs)
    d.notes.push_back({a->nameRange, "candidate arch '" + a->name + "'"});
  return nullptr;
}

const ast::ArchDecl *Program::findArch(const std::string &name) const {
  for (const auto &f : files)
    for (const auto &a : f->archs)
      if (a->name == name)
        return a.get();
  return nullptr;
}

std::vector<uint32_t> Program::getFileIds() const {
  std::vector<uint32_t> ids;
  for (const auto &f : files)
    ids.push_back(f->fileId);
  return ids;
}

} // namespace archc
