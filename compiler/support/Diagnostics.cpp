//===- Diagnostics.cpp - Located, clang-style diagnostics -----------------===//
//
// This file implements diagnostic rendering: header line, source line, caret
// line with `^~~~` under the range, and notes.
//
//===----------------------------------------------------------------------===//
#include "support/Diagnostics.h"

#include <iostream>

namespace archc {

std::string formatLoc(const SourceMgr &sm, SourceLoc loc) {
  if (!loc.isValid())
    return "<unknown>";
  return fmt::format("{}:{}:{}", sm.getName(loc.fileId), loc.line, loc.col);
}

Diagnostic &DiagnosticEngine::report(Severity sev, SourceRange range,
                                     std::string message) {
  if (sev == Severity::Error)
    ++numErrors;
  Diagnostic d;
  d.severity = sev;
  d.range = range;
  d.message = std::move(message);
  auto &list = capturing ? captured : pending;
  if (!capturing && sev == Severity::Error && errorLimit &&
      numErrors > errorLimit) {
    // Past the limit: count but do not keep; return a scratch slot.
    ++suppressed;
    static thread_local Diagnostic scratch;
    scratch = std::move(d);
    return scratch;
  }
  list.push_back(std::move(d));
  return list.back();
}

static const char *severityName(Severity s) {
  switch (s) {
  case Severity::Error:
    return "error";
  case Severity::Warning:
    return "warning";
  case Severity::Note:
    return "note";
  }
  return "error";
}

void DiagnosticEngine::renderLocated(std::string &s, Severity sev,
                                     const SourceRange &range,
                                     const std::string &message) const {
  const char *name = severityName(sev);
  if (range.isValid())
    s += fmt::format("{}: {}: {}\n", formatLoc(sm, range.begin), name, message);
  else
    s += fmt::format("archc: {}: {}\n", name, message);
  if (!range.isValid())
    return;
  std::string_view line = sm.getLine(range.begin.fileId, range.begin.line);
  if (line.empty() && range.begin.line > sm.getNumLines(range.begin.fileId))
    return;
  // Long lines (minified JSON) are shown as a window around the column.
  size_t col = range.begin.col ? range.begin.col - 1 : 0;
  size_t start = 0;
  const size_t maxWidth = 160;
  if (line.size() > maxWidth && col > maxWidth / 2)
    start = col - maxWidth / 2;
  std::string_view shown = line.substr(start, maxWidth);
  std::string text(shown);
  for (char &c : text)
    if (c == '\t')
      c = ' ';
    else if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f)
      c = '?';
  s += text;
  s += '\n';
  size_t caretCol = col - start;
  size_t len = 1;
  if (range.end.isValid() && range.end.line == range.begin.line &&
      range.end.col > range.begin.col)
    len = range.end.col - range.begin.col;
  else if (range.end.isValid() && range.end.line > range.begin.line &&
           line.size() > col)
    len = line.size() - col;
  if (caretCol > text.size())
    caretCol = text.size();
  if (caretCol + len > text.size() + 1)
    len = std::max<size_t>(1, text.size() + 1 - caretCol);
  s += std::string(caretCol, ' ');
  s += '^';
  if (len > 1)
    s += std::string(len - 1, '~');
  s += '\n';
}

std::string DiagnosticEngine::render(const Diagnostic &d) const {
  std::string s;
  renderLocated(s, d.severity, d.range, d.message);
  for (const DiagNote &n : d.notes)
    renderLocated(s, Severity::Note, n.range, n.message);
  return s;
}

void DiagnosticEngine::flush() {
  if (capturing)
    return;
  std::ostream &os = out ? *out : std::cerr;
  for (const Diagnostic &d : pending)
    os << render(d);
  pending.clear();
  os.flush();
}

void DiagnosticEngine::printSummary() {
  flush();
  if (capturing || numErrors == 0)
    return;
  std::ostream &os = out ? *out : std::cerr;
  if (suppressed)
    os << fmt::format(
        "archc: note: {} more error{} not shown (--error-limit)\n", suppressed,
        suppressed == 1 ? "" : "s");
  os << fmt::format("{} error{} generated.\n", numErrors,
                    numErrors == 1 ? "" : "s");
}

} // namespace archc
