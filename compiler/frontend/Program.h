//===- Program.h - A .arch file with its imports ----------------*- C++ -*-===//
//
// This file declares Program: the main .arch file, every file it imports
// (transitively, each once), the top-level `def`s they declare, and the
// selected `arch`. Imports resolve relative to the importing file, then the
// include directories (`-I`), then archc's bundled `archs/` directory; the
// base of `arch child extends base` that no loaded file declares is loaded
// from `base.arch`, found the same way.
//
//===----------------------------------------------------------------------===//
#ifndef ARCHC_FRONTEND_PROGRAM_H
#define ARCHC_FRONTEND_PROGRAM_H

#include "frontend/Ast.h"
#include "support/Diagnostics.h"

#include <map>
#include <memory>
#include <ostream>
#include <set>
#include <string>
#include <vector>

namespace archc {

class AstSnapshot;

class Program {
public:
  /// Where load() takes the ASTs of bundled files from instead of parsing
  /// them: a file under bundledArchsDir() whose text `snapshot` holds is
  /// decoded from it (AstSnapshot.h), every other file is parsed. Without
  /// this call, the snapshot beside the executable (bundledAstSnapshot());
  /// null parses every file. `trace`, when given, receives one line per
  /// file saying how it was loaded and why.
  void setAstSnapshot(const AstSnapshot *snapshot,
                      std::ostream *trace = nullptr) {
    astSnapshot = snapshot;
    astSnapshotSet = true;
    astSnapshotTrace = trace;
  }

  /// Loads `path` and its imports. Returns false after reporting errors.
  bool load(const std::string &path,
            const std::vector<std::string> &includeDirs, SourceMgr &sm,
            DiagnosticEngine &diags);

  /// Chooses the arch to compile: the only one in the main file, or the one
  /// whose `matches` list names `architecture` (from config.json).
  const ast::ArchDecl *selectArch(const std::string &architecture,
                                  DiagnosticEngine &diags) const;

  /// The arch called `name` in any loaded file (`use NAME`); null when no
  /// file declares it.
  const ast::ArchDecl *findArch(const std::string &name) const;

  const ast::File &getMainFile() const { return *files.front(); }
  const std::vector<std::unique_ptr<ast::File>> &getFiles() const {
    return files;
  }
  /// Top-level defs of all files by name.
  const std::map<std::string, const ast::DefDecl *> &getDefs() const {
    return defs;
  }
  std::vector<uint32_t> getFileIds() const;

private:
  std::vector<std::unique_ptr<ast::File>> files;
  std::map<std::string, const ast::DefDecl *> defs;
  std::set<std::string> loadedCanonical;
  /// The file loaded for each `extends` base no import brought in.
  std::map<std::string, std::string> baseFiles;
  const AstSnapshot *astSnapshot = nullptr;
  bool astSnapshotSet = false;
  std::ostream *astSnapshotTrace = nullptr;
  std::string bundledDirPrefix; ///< canonical bundledArchsDir() + '/'
  /// Resolves `extends` across every loaded file: each arch's effective
  /// members (ast::ArchDecl::allConfig, allDefs, effectiveModel).
  bool resolveArchs(DiagnosticEngine &diags);
  /// Loads `<base>.arch` for every `extends` base that no loaded file
  /// declares (searched like an import from the child's file).
  bool loadBases(const std::vector<std::string> &includeDirs, SourceMgr &sm,
                 DiagnosticEngine &diags);
  /// The AST of the loaded file `fileId`: from the AST snapshot when it
  /// holds this bundled file's text, else parsed.
  std::unique_ptr<ast::File> restoreOrParse(const std::string &canonicalPath,
                                            uint32_t fileId, SourceMgr &sm,
                                            DiagnosticEngine &diags);
  bool loadFile(const std::string &path, const std::string &canonicalPath,
                SourceRange importedAt,
                const std::vector<std::string> &includeDirs, SourceMgr &sm,
                DiagnosticEngine &diags, unsigned depth);
};

/// The directory holding archc's bundled architectures (with std/), set at
/// build time and overridable with the ARCHC_ARCHS_DIR environment variable.
std::string bundledArchsDir();

/// One `arch` declaration of a bundled .arch file.
struct BundledArch {
  std::string file;                    ///< path of the .arch file
  std::string name;                    ///< the arch's name
  std::vector<std::string> matches;    ///< the HF `architectures` it matches
  std::vector<std::string> modelTypes; ///< the HF `model_type`s it claims
};

/// Every arch of the bundled archs/ folder, by file name.
std::vector<BundledArch> listBundledArchs();

/// The bundled .arch file whose `matches` list names `architecture` (a
/// Hugging Face class such as "LlamaForCausalLM"), or "" when none does.
/// `known` receives every class the bundled files name, sorted.
std::string findBundledArch(const std::string &architecture,
                            std::vector<std::string> &known);

} // namespace archc

#endif // ARCHC_FRONTEND_PROGRAM_H
