//===- Program.cpp - A .arch file with its imports ------------------------===//
//
// This file implements import resolution and arch selection.
//
//===----------------------------------------------------------------------===//
#include "frontend/Program.h"

#include "frontend/Parser.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>

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
      R"re(\barch\s+([A-Za-z_][A-Za-z0-9_]*)\s+matches\s+("[^"]*"(\s*,\s*"[^"]*")*))re");
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
    for (auto m = std::sregex_iterator(text.begin(), text.end(), matchesClause);
         m != std::sregex_iterator(); ++m) {
      BundledArch a;
      a.file = f.string();
      a.name = (*m)[1];
      std::string list = (*m)[2];
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
  return loadFile(path, SourceRange(), includeDirs, sm, diags, 0) &&
         !diags.hasErrors();
}

bool Program::loadFile(const std::string &path, SourceRange importedAt,
                       const std::vector<std::string> &includeDirs,
                       SourceMgr &sm, DiagnosticEngine &diags, unsigned depth) {
  if (depth == 0) {
    std::error_code e2;
    loadedCanonical.insert(fs::weakly_canonical(path, e2).string());
  }
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
  auto file = parseArchFile(id, sm, diags);
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
    std::vector<fs::path> candidates;
    fs::path p(imp.path);
    if (p.is_absolute()) {
      candidates.push_back(p);
    } else {
      candidates.push_back(fs::path(path).parent_path() / p);
      for (const std::string &dir : includeDirs)
        candidates.push_back(fs::path(dir) / p);
      candidates.push_back(fs::path(bundledArchsDir()) / p);
    }
    std::string found, canonical;
    for (const fs::path &c : candidates)
      if (fs::is_regular_file(c, ec)) {
        found = c.lexically_normal().string();
        canonical = fs::weakly_canonical(c, ec).string();
        break;
      }
    if (found.empty()) {
      diags.error(imp.range, "cannot find imported file '{}'", imp.path)
          .notes.push_back(
              {SourceRange(), "searched next to the importing file, in -I "
                              "directories and in " +
                                  bundledArchsDir()});
      ok = false;
      continue;
    }
    if (!loadedCanonical.insert(canonical).second)
      continue; // already loaded (or an import cycle)
    ok &= loadFile(found, imp.range, includeDirs, sm, diags, depth + 1);
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
