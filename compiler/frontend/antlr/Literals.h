//===- Literals.h - Literal tokens to values --------------------*- C++ -*-===//
//
// Private to the front end. The values of the grammar's literal tokens, with
// located errors for those out of range.
//
//===----------------------------------------------------------------------===//
#ifndef ARCHC_FRONTEND_ANTLR_LITERALS_H
#define ARCHC_FRONTEND_ANTLR_LITERALS_H

#include "support/Diagnostics.h"

#include <cstdint>
#include <string>

namespace archc::frontend {

/// A string literal's text without its quotes, `\n`, `\t` and `\x`
/// escapes resolved (`\x` is `x`).
std::string unescape(const std::string &quoted);

/// An integer literal's value; out of int64's range: an error at `at`, 0.
int64_t parseIntLiteral(const std::string &text, SourceRange at,
                        DiagnosticEngine &diags);

/// A floating-point literal's value; not finite: an error at `at`, 0.
double parseFloatLiteral(const std::string &text, SourceRange at,
                         DiagnosticEngine &diags);

} // namespace archc::frontend

#endif // ARCHC_FRONTEND_ANTLR_LITERALS_H
