//===- DiagnosticsTest.cpp - Diagnostic rendering and verification --------===//
#include "support/Diagnostics.h"
#include "support/VerifyDiagnostics.h"

#include <gtest/gtest.h>

#include <sstream>

using namespace archc;

TEST(Diagnostics, RendersLocationSourceLineAndCaret) {
  SourceMgr sm;
  uint32_t id = sm.addBuffer("m.arch", "line one\n  x = foo(bar)\n");
  DiagnosticEngine d(sm);
  d.setCapture(true);
  d.error(SourceRange({id, 2, 7}, {id, 2, 10}), "unknown name 'foo'");
  ASSERT_EQ(d.getCaptured().size(), 1u);
  EXPECT_EQ(d.render(d.getCaptured()[0]),
            "m.arch:2:7: error: unknown name 'foo'\n"
            "  x = foo(bar)\n"
            "      ^~~\n");
}

TEST(Diagnostics, NotesFollowTheirError) {
  SourceMgr sm;
  uint32_t id = sm.addBuffer("m.arch", "a\nb\n");
  DiagnosticEngine d(sm);
  d.setCapture(true);
  d.error(SourceRange({id, 2, 1}), "second")
      .notes.push_back({SourceRange({id, 1, 1}), "first is here"});
  std::string s = d.render(d.getCaptured()[0]);
  EXPECT_NE(s.find("m.arch:2:1: error: second"), std::string::npos);
  EXPECT_NE(s.find("m.arch:1:1: note: first is here"), std::string::npos);
  EXPECT_LT(s.find("error"), s.find("note"));
}

TEST(Diagnostics, UnlocatedErrorsNameTheTool) {
  SourceMgr sm;
  DiagnosticEngine d(sm);
  d.setCapture(true);
  d.error(SourceRange(), "cannot read 'x'");
  EXPECT_EQ(d.render(d.getCaptured()[0]), "archc: error: cannot read 'x'\n");
}

TEST(Diagnostics, ErrorLimitSuppressesButCounts) {
  SourceMgr sm;
  DiagnosticEngine d(sm);
  std::ostringstream os;
  d.setOutput(os);
  d.setErrorLimit(2);
  for (int i = 0; i < 5; ++i)
    d.error(SourceRange(), "e" + std::to_string(i));
  d.printSummary();
  EXPECT_EQ(d.getNumErrors(), 5u);
  EXPECT_NE(os.str().find("e1"), std::string::npos);
  EXPECT_EQ(os.str().find("e2"), std::string::npos);
  EXPECT_NE(os.str().find("3 more errors not shown"), std::string::npos);
  EXPECT_NE(os.str().find("5 errors generated."), std::string::npos);
}

TEST(Diagnostics, CaretStopsAtTheEndOfALongRangeLine) {
  SourceMgr sm;
  uint32_t id = sm.addBuffer("m.arch", "abc\ndef\n");
  DiagnosticEngine d(sm);
  d.setCapture(true);
  d.error(SourceRange({id, 1, 2}, {id, 2, 2}), "spans lines");
  EXPECT_NE(d.render(d.getCaptured()[0]).find("abc\n ^~\n"), std::string::npos);
}

TEST(VerifyDiagnostics, MatchesRelativeAndWildcardDirectives) {
  SourceMgr sm;
  uint32_t id =
      sm.addBuffer("t.arch", "// expected-error@+1 {{unknown name}}\n"
                             "x = y\n"
                             "// expected-error@* {{missing field}}\n");
  std::vector<Diagnostic> seen(2);
  seen[0].range = SourceRange({id, 2, 5});
  seen[0].message = "unknown name 'y'";
  seen[1].message = "missing field 'hidden_size'";
  std::ostringstream os;
  EXPECT_TRUE(verifyDiagnostics(sm, {id}, seen, os)) << os.str();
}

TEST(VerifyDiagnostics, ReportsMissingAndUnexpected) {
  SourceMgr sm;
  uint32_t id = sm.addBuffer("t.arch", "x = y // expected-error {{other}}\n");
  std::vector<Diagnostic> seen(1);
  seen[0].range = SourceRange({id, 1, 5});
  seen[0].message = "unknown name 'y'";
  std::ostringstream os;
  EXPECT_FALSE(verifyDiagnostics(sm, {id}, seen, os));
  EXPECT_NE(os.str().find("expected but not seen"), std::string::npos);
  EXPECT_NE(os.str().find("seen but not expected"), std::string::npos);
}
