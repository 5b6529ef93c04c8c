//===- Compiler.h - Front half of the archc pipeline ------------*- C++ -*-===//
//
// This file declares compileModule(): load the .arch program and its
// imports, bind config.json, run Sema, evaluate the model into IR, verify,
// and run the pass pipeline that the emit target needs. The driver and the
// unit tests share it.
//
//===----------------------------------------------------------------------===//
#ifndef ARCHC_DRIVER_COMPILER_H
#define ARCHC_DRIVER_COMPILER_H

#include "config/JsonSource.h"
#include "driver/Options.h"
#include "frontend/Program.h"
#include "ir/IR.h"
#include "irgen/ConfigBinder.h"

#include <memory>
#include <ostream>

namespace archc {

/// One named graph of a several-graph package (`model vision_encoder(...)`
/// of a vision-language arch), compiled into its own module.
struct NamedGraph {
  std::string name;
  std::unique_ptr<ir::Module> module;
};

/// Everything a compilation produced (kept alive together: the IR points
/// into the AST for locations, and diagnostics into the SourceMgr).
struct Compilation {
  SourceMgr sourceMgr;
  std::unique_ptr<DiagnosticEngine> diags;
  Program program;
  std::unique_ptr<JsonSource> config;
  /// The arch's main graph (`model (...)`; a vision-language model's text
  /// model).
  std::unique_ptr<ir::Module> module;
  /// Its named graphs, in declaration order (empty for one-graph archs).
  std::vector<NamedGraph> graphs;
  const ast::ArchDecl *arch = nullptr;
  /// The config.json keys the compilation read (closed-world binding).
  std::shared_ptr<ConfigUse> configUse = std::make_shared<ConfigUse>();
  /// Every config field as bound, for -emit=config.
  std::vector<BoundField> boundFields;

  Compilation() : diags(std::make_unique<DiagnosticEngine>(sourceMgr)) {}
};

/// Which passes the emit target needs, unless --passes overrides.
std::vector<std::string> defaultPipeline(const Options &opts);

/// Whether a graph keeps decode-time state (a cache, conv or recurrent
/// state): only such graphs get the kv-cache / attention-mask passes of the
/// default pipeline.
bool hasDecodeState(const ir::Module &m);

/// Runs the front half. Returns false after reporting errors. `irOut`
/// receives --print-ir-after output.
bool compileModule(const Options &opts, Compilation &c, std::ostream &irOut);

} // namespace archc

#endif // ARCHC_DRIVER_COMPILER_H
