//===- Literals.cpp - Literal tokens to values ----------------------------===//
//
// This file implements the literal conversions of Literals.h.
//
//===----------------------------------------------------------------------===//
#include "frontend/antlr/Literals.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>

namespace archc::frontend {

namespace {
/// A literal's text for a message, shortened.
std::string clip(const std::string &text) {
  return text.size() > 40 ? text.substr(0, 40) + "..." : text;
}
} // namespace

std::string unescape(const std::string &quoted) {
  std::string out;
  for (size_t i = 1; i + 1 < quoted.size(); ++i) {
    char c = quoted[i];
    if (c == '\\' && i + 2 < quoted.size()) {
      char n = quoted[++i];
      switch (n) {
      case 'n':
        out += '\n';
        break;
      case 't':
        out += '\t';
        break;
      default:
        out += n;
      }
    } else {
      out += c;
    }
  }
  return out;
}

int64_t parseIntLiteral(const std::string &text, SourceRange at,
                        DiagnosticEngine &diags) {
  errno = 0;
  long long v = std::strtoll(text.c_str(), nullptr, 10);
  if (errno == ERANGE) {
    diags.error(at, "integer literal '{}' is too large (the limit is {})",
                clip(text), INT64_MAX);
    return 0;
  }
  return v;
}

double parseFloatLiteral(const std::string &text, SourceRange at,
                         DiagnosticEngine &diags) {
  double v = std::strtod(text.c_str(), nullptr);
  if (!std::isfinite(v)) {
    diags.error(at, "floating-point literal '{}' is out of range", clip(text));
    return 0;
  }
  return v;
}

} // namespace archc::frontend
