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
#include "support/OutputSet.h"
#include "support/VerifyDiagnostics.h"

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <sstream>
#include <stdexcept>

using namespace archc;

/// Flushes standard output; false (after printing why) when a write to it
/// failed: a full device or a closed pipe is an error, never exit 0.
static bool flushStdout() {
  errno = 0;
  std::cout.flush();
  bool ok = std::cout.good();
  int err = errno;
  if (std::fflush(stdout) != 0 || std::ferror(stdout)) {
    ok = false;
    err = errno ? errno : err;
  }
  if (!ok)
    std::fprintf(stderr, "archc: error: cannot write to standard output: %s\n",
                 std::strerror(err ? err : EIO));
  return ok;
}

int main(int argc, char **argv) {
  // A closed pipe on standard output is a write error (EPIPE, exit 1 with a
  // message), not a death by SIGPIPE.
  std::signal(SIGPIPE, SIG_IGN);
  Options opts;
  int exitCode = 1;
  if (!parseOptions(argc, argv, opts, exitCode)) {
    if (!opts.printAndExit.empty()) {
      SourceMgr sm;
      DiagnosticEngine diags(sm);
      if (!writeStandardOutput(opts.printAndExit, diags)) {
        diags.printSummary();
        return 1;
      }
    }
    return flushStdout() ? exitCode : 1;
  }
  if (opts.listArchs) {
    std::ostringstream list;
    printBundledArchs(list);
    SourceMgr sm;
    DiagnosticEngine diags(sm);
    if (writeStandardOutput(list.str(), diags))
      return 0;
    diags.printSummary();
    return 1;
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
  if (!flushStdout())
    ok = false;
  diags.printSummary();
  return ok && !diags.hasErrors() ? 0 : 1;
}
