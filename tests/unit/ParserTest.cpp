//===- ParserTest.cpp - Front end -----------------------------------------===//
#include "frontend/Parser.h"
#include "frontend/GrammarCheck.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

using namespace archc;

namespace {
struct Parsed {
  SourceMgr sm;
  std::unique_ptr<DiagnosticEngine> diags;
  std::unique_ptr<ast::File> file;
  std::string errors() const {
    std::string s;
    for (auto &d : diags->getCaptured())
      s += diags->render(d);
    return s;
  }
};

std::unique_ptr<Parsed> parse(const std::string &text) {
  auto p = std::make_unique<Parsed>();
  uint32_t id = p->sm.addBuffer("t.arch", text);
  p->diags = std::make_unique<DiagnosticEngine>(p->sm);
  p->diags->setCapture(true);
  p->file = parseArchFile(id, p->sm, *p->diags);
  return p;
}
} // namespace

TEST(Parser, BuildsArchConfigAndModel) {
  auto p = parse(R"(
arch a matches "A", "B" {
  config {
    n: int = 2 alias "num"
    let m = n * 2
    check n > 0, "n positive"
  }
  model(ids: i64[batch, seq]) -> (y) {
    for i in 0 .. n @ "layers.{i}" { y = ids }
  }
})");
  ASSERT_TRUE(p->file) << p->errors();
  ASSERT_EQ(p->file->archs.size(), 1u);
  const ast::ArchDecl &a = *p->file->archs[0];
  EXPECT_EQ(a.matches, (std::vector<std::string>{"A", "B"}));
  ASSERT_EQ(a.config.size(), 3u);
  EXPECT_EQ(a.config[0].aliases, std::vector<std::string>{"num"});
  EXPECT_EQ(a.config[1].kind, ast::ConfigEntry::Kind::Let);
  EXPECT_EQ(a.config[2].kind, ast::ConfigEntry::Kind::Check);
  ASSERT_TRUE(a.model);
  auto *loop = dyn_cast<ast::ForStmt>(a.model->body[0].get());
  ASSERT_TRUE(loop);
  ASSERT_TRUE(loop->scope.has_value());
  EXPECT_EQ(*loop->scope, "layers.{i}");
  EXPECT_TRUE(isa<ast::NameExpr>(loop->hi.get()));
}

TEST(Parser, RangesPointAtTokens) {
  auto p = parse("def f(x) {\n  return x + 1\n}\n");
  ASSERT_TRUE(p->file) << p->errors();
  auto *ret = cast<ast::ReturnStmt>(p->file->defs[0]->body[0].get());
  SourceRange r = ret->values[0]->getRange();
  EXPECT_EQ(r.begin.line, 2u);
  EXPECT_EQ(r.begin.col, 10u);
  EXPECT_EQ(r.end.col, 15u);
}

TEST(Parser, SyntaxErrorIsLocated) {
  auto p = parse("def f(x) {\n  y = (x + \n}\n");
  EXPECT_FALSE(p->file);
  EXPECT_NE(p->errors().find("t.arch:3:1: error:"), std::string::npos)
      << p->errors();
}

TEST(Parser, PrecedenceOfScopeAndArithmetic) {
  auto p = parse("def f(x) { return x + g(x) @ \"s\" * 2 }");
  ASSERT_TRUE(p->file) << p->errors();
  auto *ret = cast<ast::ReturnStmt>(p->file->defs[0]->body[0].get());
  auto *add = dyn_cast<ast::BinaryExpr>(ret->values[0].get());
  ASSERT_TRUE(add);
  EXPECT_EQ(add->op, ast::BinaryOp::Add);
  auto *mul = dyn_cast<ast::BinaryExpr>(add->rhs.get());
  ASSERT_TRUE(mul);
  EXPECT_EQ(mul->op, ast::BinaryOp::Mul);
  EXPECT_TRUE(isa<ast::ScopeExpr>(mul->lhs.get()));
}

TEST(Parser, DeepNestingIsAnErrorNotACrash) {
  std::string deep = "def f(x) { return " + std::string(5000, '(') + "x" +
                     std::string(5000, ')') + " }";
  auto p = parse(deep);
  EXPECT_FALSE(p->file);
  EXPECT_NE(p->errors().find("nested too deeply"), std::string::npos);
  std::string unary = "def f(x) { return " + std::string(5000, '-') + "x }";
  auto q = parse(unary);
  EXPECT_FALSE(q->file);
  EXPECT_NE(q->errors().find("nested too deeply"), std::string::npos);
}

TEST(Parser, InvalidUtf8IsLocated) {
  auto p = parse("def f(x) {\n  return x \xff\xfe\n}");
  EXPECT_FALSE(p->file);
  EXPECT_NE(p->errors().find("t.arch:2:12: error: file is not valid UTF-8"),
            std::string::npos)
      << p->errors();
}

TEST(Parser, HugeIntegerLiteralIsAnError) {
  auto p = parse("def f(x) { return 99999999999999999999999 }");
  EXPECT_FALSE(p->file);
  EXPECT_NE(p->errors().find("integer literal"), std::string::npos);
}

namespace {
std::string compareWithGeneratedLexer(const std::string &text) {
  auto ours = lexArch(text), theirs = grammarcheck::lexWithGeneratedLexer(text);
  for (size_t i = 0; i < std::max(ours.size(), theirs.size()); ++i) {
    if (i >= ours.size() || i >= theirs.size())
      return "token streams differ in length";
    const LexedToken &a = ours[i], &b = theirs[i];
    if (a.type != b.type || a.text != b.text || a.line != b.line ||
        a.column != b.column)
      return "token " + std::to_string(i) + ": archc type " +
             std::to_string(a.type) + " '" + a.text + "' at " +
             std::to_string(a.line) + ":" + std::to_string(a.column) +
             " vs ANTLR type " + std::to_string(b.type) + " '" + b.text +
             "' at " + std::to_string(b.line) + ":" + std::to_string(b.column);
  }
  return "";
}
} // namespace

TEST(Lexer, MatchesTheGeneratedLexerOnEveryBundledFile) {
  namespace fs = std::filesystem;
  size_t files = 0;
  for (const char *dir : {"archs", "archs/std", "lit/diagnostics"})
    for (const auto &e :
         fs::directory_iterator(fs::path(ARCHC_SOURCE_DIR) / dir)) {
      if (e.path().extension() != ".arch")
        continue;
      std::ifstream in(e.path());
      std::stringstream ss;
      ss << in.rdbuf();
      EXPECT_EQ(compareWithGeneratedLexer(ss.str()), "") << e.path();
      ++files;
    }
  EXPECT_GT(files, 30u);
}

TEST(Lexer, MatchesTheGeneratedLexerOnTrickyInput) {
  const char *cases[] = {
      "x = 1..n 1.5e-3 2e5 3.e 4e 0.5 07 a_b1 _c",
      "a += b -= c *= d // e\n/* block\n comment */ f->g <= >= == != && || !h",
      "s = \"esc\\\"aped\" t = \"\" u = \"a\\\\b\"",
      "if not x in y and z or w { return a.b[c](d: e) @ \"s.{i}\" }",
      "é = 1",
      "\"unterminated",
      "a ~ b",
      "x = 1 /* open comment",
      "matches importx arch_ let_ in2 fn() none true false",
      // `//` always opens a comment, also with nothing after it (there is
      // no `//` operator: floor division is floor(a / b)).
      "a = b //\nc = d //",
      "a = b//c\n//\n//\r\nx",
  };
  for (const char *c : cases)
    EXPECT_EQ(compareWithGeneratedLexer(c), "") << c;
}
