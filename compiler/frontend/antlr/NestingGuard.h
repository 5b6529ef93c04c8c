//===- NestingGuard.h - Limits on nesting before parsing -------*- C++ -*-===//
//
// Private to the front end. This file declares checkNesting(), which rejects
// token streams whose nesting would exhaust the (recursive) parser's or the
// evaluator's stack, with a located error, before the parser sees them.
//
//===----------------------------------------------------------------------===//
#ifndef ARCHC_FRONTEND_ANTLR_NESTINGGUARD_H
#define ARCHC_FRONTEND_ANTLR_NESTINGGUARD_H

#include "frontend/antlr/TokenLocations.h"
#include "support/Diagnostics.h"

#include "antlr4-runtime.h"

namespace archc::frontend {

/// Counts bracket depth, runs of prefix operators and operators in one
/// expression over `tokens` (already filled); reports the first token past
/// a limit (kMaxNestingDepth in Parser.h) and returns false.
bool checkNesting(antlr4::CommonTokenStream &tokens,
                  const antlr4::dfa::Vocabulary &vocabulary,
                  const TokenLocations &locations, DiagnosticEngine &diags);

} // namespace archc::frontend

#endif // ARCHC_FRONTEND_ANTLR_NESTINGGUARD_H
