//===- Pass.h - Passes and the pass manager ---------------------*- C++ -*-===//
//
// This file declares the Pass interface, the PassContext a pass runs with,
// and the PassManager that runs a pipeline with optional verification and
// IR printing after each pass. Passes are created by factories listed in
// Passes.h; each pass lives in its own file.
//
//===----------------------------------------------------------------------===//
#ifndef ARCHC_PASSES_PASS_H
#define ARCHC_PASSES_PASS_H

#include "ir/IR.h"
#include "support/Diagnostics.h"

#include <memory>
#include <ostream>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace archc {

/// What a pass can reach besides the module.
struct PassContext {
  DiagnosticEngine &diags;
  const SourceMgr &sourceMgr;
};

class Pass {
public:
  virtual ~Pass() = default;
  /// The name used by --passes and --print-ir-after.
  virtual std::string_view getArgument() const = 0;
  virtual std::string_view getSummary() const = 0;
  /// Transforms the module. On failure the pass must have reported at least
  /// one error.
  virtual bool run(ir::Module &m, PassContext &ctx) = 0;
};

/// Runs passes in order; stops at the first failure.
class PassManager {
public:
  void addPass(std::unique_ptr<Pass> p) { passes.push_back(std::move(p)); }
  /// Verify the module after every pass (default on).
  void setVerifyEach(bool v) { verifyEach = v; }
  /// Print the IR after the named passes ("all" for every pass).
  void setPrintIRAfter(std::set<std::string> names, std::ostream *os,
                       bool printLocations) {
    printAfter = std::move(names);
    printStream = os;
    printLoc = printLocations;
  }
  bool run(ir::Module &m, PassContext &ctx);
  size_t size() const { return passes.size(); }

private:
  std::vector<std::unique_ptr<Pass>> passes;
  bool verifyEach = true;
  std::set<std::string> printAfter;
  std::ostream *printStream = nullptr;
  bool printLoc = false;
};

} // namespace archc

#endif // ARCHC_PASSES_PASS_H
