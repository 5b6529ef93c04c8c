//===- archc.cpp - The archc compiler driver ------------------------------===//
//
// This file implements main(): parse options, compile the module, and hand
// it to the emitter for the -emit target. Exit code 0 on success, 1 on any
// error (with diagnostics on stderr). Output files are written atomically.
//
//===----------------------------------------------------------------------===//
#include "driver/ArchCatalog.h"
#include "driver/Compiler.h"
#include "driver/Emit.h"
#include "support/VerifyDiagnostics.h"

#include <iostream>
#include <stdexcept>

using namespace archc;

int main(int argc, char **argv) {
  Options opts;
  int exitCode = 1;
  if (!parseOptions(argc, argv, opts, exitCode))
    return exitCode;
  if (opts.listArchs) {
    printBundledArchs(std::cout);
    return 0;
  }

  Compilation c;
  DiagnosticEngine &diags = *c.diags;
  diags.setErrorLimit(opts.verifyDiagnostics ? 0 : opts.errorLimit);
  diags.setCapture(opts.verifyDiagnostics);

  bool ok = false;
  try {
    ok = compileModule(opts, c, std::cout);
    if (ok && !opts.verifyDiagnostics)
      ok = emit(opts, c, std::cout);
  } catch (const std::bad_alloc &) {
    diags.error(SourceRange(), "out of memory");
    ok = false;
  } catch (const std::overflow_error &e) {
    // Symbolic dims whose coefficients overflow int64 outside the
    // evaluator's checked arithmetic (shape inference, the passes).
    diags.error(SourceRange(),
                std::string(e.what()) + ": a size does not fit in 64 bits");
    ok = false;
  } catch (const std::exception &e) {
    diags.error(SourceRange(), std::string("internal error: ") + e.what());
    ok = false;
  }

  if (opts.verifyDiagnostics) {
    std::vector<uint32_t> ids;
    for (size_t i = 1; i <= c.sourceMgr.getNumFiles(); ++i)
      ids.push_back(static_cast<uint32_t>(i));
    return verifyDiagnostics(c.sourceMgr, ids, diags.getCaptured(), std::cerr)
               ? 0
               : 1;
  }
  diags.printSummary();
  return ok && !diags.hasErrors() ? 0 : 1;
}
