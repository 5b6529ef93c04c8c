//===- Verifier.h - Structural IR verification ------------------*- C++ -*-===//
//
// This file declares verifyModule(): SSA dominance (every operand defined
// earlier in its block or an enclosing one), terminators, weight references
// and each op's own rules (OpRules). Errors point back at the .arch source.
//
//===----------------------------------------------------------------------===//
#ifndef ARCHC_IR_VERIFIER_H
#define ARCHC_IR_VERIFIER_H

#include "ir/IR.h"
#include "support/Diagnostics.h"

namespace archc::ir {

/// Verifies the module; reports and returns false on error.
bool verifyModule(const Module &m, DiagnosticEngine &diags);

} // namespace archc::ir

#endif // ARCHC_IR_VERIFIER_H
