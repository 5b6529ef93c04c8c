//===- VerifyDiagnostics.h - --verify-diagnostics checking ------*- C++ -*-===//
//
// This file declares the checker behind `--verify-diagnostics`: it collects
// `expected-error {{...}}` (and -warning/-note) comments from the source
// files, compares them with the diagnostics archc captured, and reports every
// mismatch. Directive forms (clang/MLIR style):
//   // expected-error {{text}}        on this line
//   // expected-error@+1 {{text}}     on the next line (also @-N)
//   // expected-error@12 {{text}}     on line 12 of this file
//   // expected-error@* {{text}}      anywhere, in any file (config errors)
// `text` must be a substring of the emitted message.
//
//===----------------------------------------------------------------------===//
#ifndef ARCHC_SUPPORT_VERIFYDIAGNOSTICS_H
#define ARCHC_SUPPORT_VERIFYDIAGNOSTICS_H

#include "support/Diagnostics.h"

#include <ostream>

namespace archc {

/// Compares captured diagnostics with the expectations written in the source
/// files `fileIds`. Prints mismatches to `os`; returns true when all match.
bool verifyDiagnostics(const SourceMgr &sm,
                       const std::vector<uint32_t> &fileIds,
                       const std::vector<Diagnostic> &emitted,
                       std::ostream &os);

} // namespace archc

#endif // ARCHC_SUPPORT_VERIFYDIAGNOSTICS_H
