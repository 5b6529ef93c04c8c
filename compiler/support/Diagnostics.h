//===- Diagnostics.h - Located, clang-style diagnostics ---------*- C++ -*-===//
//
// This file declares the DiagnosticEngine. Every user-facing error in archc
// goes through it: `file:line:col: error: message`, the source line, a caret
// under the range, then notes. The engine either prints diagnostics as they
// come or captures them (for --verify-diagnostics and unit tests).
//
//===----------------------------------------------------------------------===//
#ifndef ARCHC_SUPPORT_DIAGNOSTICS_H
#define ARCHC_SUPPORT_DIAGNOSTICS_H

#include "support/SourceMgr.h"

#include <fmt/format.h>

#include <functional>
#include <ostream>
#include <string>
#include <vector>

namespace archc {

enum class Severity { Error, Warning, Note };

/// A note attached to a diagnostic (optionally located).
struct DiagNote {
  SourceRange range;
  std::string message;
};

/// One reported problem.
struct Diagnostic {
  Severity severity = Severity::Error;
  SourceRange range;
  std::string message;
  std::vector<DiagNote> notes;
};

/// Collects and renders diagnostics.
class DiagnosticEngine {
public:
  explicit DiagnosticEngine(const SourceMgr &sm) : sm(sm) {}

  /// Reports a diagnostic. Returns a reference so notes can be added before
  /// it is flushed.
  Diagnostic &report(Severity sev, SourceRange range, std::string message);
  Diagnostic &error(SourceRange range, std::string message) {
    return report(Severity::Error, range, std::move(message));
  }
  Diagnostic &warning(SourceRange range, std::string message) {
    return report(Severity::Warning, range, std::move(message));
  }
  template <typename... Args>
  Diagnostic &error(SourceRange range, fmt::format_string<Args...> f,
                    Args &&...args) {
    return error(range, fmt::format(f, std::forward<Args>(args)...));
  }

  /// A point to roll back to: diagnostics reported after it can be dropped
  /// (used when the evaluator tries an expression speculatively).
  struct Checkpoint {
    size_t pending, captured;
    unsigned errors, suppressed;
  };
  Checkpoint save() const {
    return {pending.size(), captured.size(), numErrors, suppressed};
  }
  void restore(const Checkpoint &c) {
    pending.resize(c.pending);
    captured.resize(c.captured);
    numErrors = c.errors;
    suppressed = c.suppressed;
  }

  /// Prints pending diagnostics (in report order) when not capturing.
  void flush();

  /// Keeps diagnostics instead of printing them.
  void setCapture(bool capture) { capturing = capture; }
  const std::vector<Diagnostic> &getCaptured() const { return captured; }

  void setOutput(std::ostream &os) { out = &os; }
  void setErrorLimit(unsigned limit) { errorLimit = limit; }
  void setColor(bool c) { color = c; }

  unsigned getNumErrors() const { return numErrors; }
  bool hasErrors() const { return numErrors != 0; }
  /// True once the error limit is reached; callers may stop early.
  bool reachedLimit() const { return errorLimit && numErrors >= errorLimit; }

  /// Prints "N errors generated." when there were errors.
  void printSummary();

  /// Renders one diagnostic as text (no trailing summary).
  std::string render(const Diagnostic &d) const;

  const SourceMgr &getSourceMgr() const { return sm; }

private:
  const SourceMgr &sm;
  std::vector<Diagnostic> pending;
  std::vector<Diagnostic> captured;
  std::ostream *out = nullptr;
  unsigned numErrors = 0;
  unsigned errorLimit = 20;
  unsigned suppressed = 0;
  bool capturing = false;
  bool color = false;
  void renderLocated(std::string &s, Severity sev, const SourceRange &range,
                     const std::string &message) const;
};

/// Formats a location as `file:line:col`.
std::string formatLoc(const SourceMgr &sm, SourceLoc loc);

} // namespace archc

#endif // ARCHC_SUPPORT_DIAGNOSTICS_H
