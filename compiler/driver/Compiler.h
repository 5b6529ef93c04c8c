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

#include <memory>
#include <ostream>

namespace archc {

/// Everything a compilation produced (kept alive together: the IR points
/// into the AST for locations, and diagnostics into the SourceMgr).
struct Compilation {
  SourceMgr sourceMgr;
  std::unique_ptr<DiagnosticEngine> diags;
  Program program;
  std::unique_ptr<JsonSource> config;
  std::unique_ptr<ir::Module> module;
  const ast::ArchDecl *arch = nullptr;

  Compilation() : diags(std::make_unique<DiagnosticEngine>(sourceMgr)) {}
};

/// Which passes the emit target needs, unless --passes overrides.
std::vector<std::string> defaultPipeline(const Options &opts);

/// Runs the front half. Returns false after reporting errors. `irOut`
/// receives --print-ir-after output.
bool compileModule(const Options &opts, Compilation &c, std::ostream &irOut);

} // namespace archc

#endif // ARCHC_DRIVER_COMPILER_H
