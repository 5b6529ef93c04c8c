//===- VerifyDiagnostics.cpp - --verify-diagnostics checking --------------===//
//
// This file implements expectation parsing and matching for
// --verify-diagnostics.
//
//===----------------------------------------------------------------------===//
#include "support/VerifyDiagnostics.h"

#include <regex>

namespace archc {

namespace {
struct Expectation {
  Severity severity;
  uint32_t fileId; // 0 = any file
  int line;        // -1 = any line
  std::string text;
  SourceLoc where; // the directive itself
  bool matched = false;
};

struct Seen {
  Severity severity;
  SourceLoc loc;
  std::string message;
  bool matched = false;
};

const char *kindName(Severity s) {
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
} // namespace

bool verifyDiagnostics(const SourceMgr &sm,
                       const std::vector<uint32_t> &fileIds,
                       const std::vector<Diagnostic> &emitted,
                       std::ostream &os) {
  static const std::regex directive(
      R"(expected-(error|warning|note)(@([+-]?[0-9]+|\*))?\s*\{\{(.*?)\}\})");
  std::vector<Expectation> expected;
  bool ok = true;
  bool sawNoDiagnostics = false;
  for (uint32_t fid : fileIds) {
    uint32_t n = sm.getNumLines(fid);
    for (uint32_t line = 1; line <= n; ++line) {
      std::string text(sm.getLine(fid, line));
      if (text.find("expected-no-diagnostics") != std::string::npos)
        sawNoDiagnostics = true;
      for (auto it = std::sregex_iterator(text.begin(), text.end(), directive);
           it != std::sregex_iterator(); ++it) {
        const std::smatch &m = *it;
        Expectation e;
        std::string kind = m[1];
        e.severity = kind == "error"     ? Severity::Error
                     : kind == "warning" ? Severity::Warning
                                         : Severity::Note;
        e.fileId = fid;
        e.line = static_cast<int>(line);
        e.where = {fid, line, static_cast<uint32_t>(m.position(0) + 1)};
        if (m[3].matched) {
          std::string off = m[3];
          if (off == "*") {
            e.fileId = 0;
            e.line = -1;
          } else if (off[0] == '+' || off[0] == '-') {
            e.line = static_cast<int>(line) + std::stoi(off);
          } else {
            e.line = std::stoi(off);
          }
        }
        e.text = m[4];
        expected.push_back(e);
      }
    }
  }

  std::vector<Seen> seen;
  for (const Diagnostic &d : emitted) {
    seen.push_back({d.severity, d.range.begin, d.message});
    for (const DiagNote &n : d.notes)
      seen.push_back({Severity::Note, n.range.begin, n.message});
  }

  // Exact-line expectations first, then wildcards.
  for (int pass = 0; pass < 2; ++pass) {
    for (Expectation &e : expected) {
      if (e.matched || (pass == 0) != (e.line >= 0))
        continue;
      for (Seen &s : seen) {
        if (s.matched || s.severity != e.severity)
          continue;
        if (e.fileId && (s.loc.fileId != e.fileId ||
                         static_cast<int>(s.loc.line) != e.line))
          continue;
        if (s.message.find(e.text) == std::string::npos)
          continue;
        s.matched = e.matched = true;
        break;
      }
    }
  }

  for (Severity sev : {Severity::Error, Severity::Warning, Severity::Note}) {
    std::string missing, extra;
    for (const Expectation &e : expected)
      if (!e.matched && e.severity == sev)
        missing += fmt::format("  {}: expected {} {}: {}\n",
                               formatLoc(sm, e.where), kindName(sev),
                               e.line >= 0 ? fmt::format("on line {}", e.line)
                                           : std::string("anywhere"),
                               e.text);
    for (const Seen &s : seen)
      if (!s.matched && s.severity == sev)
        extra += fmt::format("  {}: {}\n", formatLoc(sm, s.loc), s.message);
    if (!missing.empty()) {
      ok = false;
      os << "error: '" << kindName(sev)
         << "' diagnostics expected but not seen:\n"
         << missing;
    }
    if (!extra.empty()) {
      ok = false;
      os << "error: '" << kindName(sev)
         << "' diagnostics seen but not expected:\n"
         << extra;
    }
  }
  if (expected.empty() && !sawNoDiagnostics && emitted.empty()) {
    os << "error: no expected directives found: use expected-no-diagnostics "
          "when no diagnostics are expected\n";
    ok = false;
  }
  return ok;
}

} // namespace archc
