//===- AstQueriesTest.cpp - AST children and name queries -----------------===//
#include "frontend/AstQueries.h"
#include "frontend/AstWalk.h"
#include "frontend/Parser.h"

#include <gtest/gtest.h>

using namespace archc;

namespace {
/// Parses `text` (a file of defs) and keeps it alive with its buffers.
struct Parsed {
  SourceMgr sm;
  std::unique_ptr<DiagnosticEngine> diags;
  std::unique_ptr<ast::File> file;
  explicit Parsed(const std::string &text) {
    uint32_t id = sm.addBuffer("t.arch", text);
    diags = std::make_unique<DiagnosticEngine>(sm);
    diags->setCapture(true);
    file = parseArchFile(id, sm, *diags);
  }
  const std::vector<ast::StmtPtr> &body(size_t def = 0) const {
    return file->defs.at(def)->body;
  }
  /// The value of the `index`-th statement, an assignment or a return.
  const ast::Expr &value(size_t index, size_t def = 0) const {
    const ast::Stmt *s = body(def).at(index).get();
    if (auto *a = dyn_cast<ast::AssignStmt>(s))
      return *a->value;
    return *cast<ast::ReturnStmt>(s)->values.at(0);
  }
};

size_t childCount(const ast::Expr &e) {
  size_t n = 0;
  ast::forEachChild(e, [&](const ast::Expr &) { ++n; });
  return n;
}
} // namespace

TEST(AstWalk, ChildrenOfEveryExpressionKind) {
  Parsed p(R"(def f(x, y) {
  a = 1
  b = [x, y, 2]
  c = x.w
  d = g(x, k: y)
  e = x[y]
  h = x @ "s.{i}"
  j = -x
  k = x + y
  l = x in y
  m = x ? y : 3
  n = fn(u, v = y) { return u }
  return x
})");
  ASSERT_TRUE(p.file && p.diags->getCaptured().empty());
  const size_t expected[] = {0, 3, 1, 3, 2, 1, 1, 2, 2, 3, 1, 0};
  for (size_t i = 0; i < std::size(expected); ++i)
    EXPECT_EQ(childCount(p.value(i)), expected[i]) << "statement " << i;
  // A function's body is a statement list, not a child expression.
  EXPECT_NE(ast::functionBody(p.value(10)), nullptr);
  EXPECT_EQ(ast::functionBody(p.value(9)), nullptr);
  // allChildren stops at the first false.
  size_t visited = 0;
  EXPECT_FALSE(ast::allChildren(p.value(1), [&](const ast::Expr &) {
    ++visited;
    return false;
  }));
  EXPECT_EQ(visited, 1u);
}

TEST(AstWalk, ChildrenOfEveryStatementKind) {
  Parsed p(R"(def f(x) {
  a = x
  a += 1
  for i in 0..x { b = i }
  if x > 1 { c = 1 } else { c = 2 }
  check x > 0, "positive"
  return a, x
})");
  ASSERT_TRUE(p.file && p.diags->getCaptured().empty());
  const std::pair<size_t, size_t> expected[] = {{1, 0}, {1, 0}, {2, 1},
                                                {1, 2}, {1, 0}, {2, 0}};
  for (size_t i = 0; i < std::size(expected); ++i) {
    size_t exprs = 0, bodies = 0;
    ast::allChildren(
        *p.body()[i], [&](const ast::Expr &) { return ++exprs, true; },
        [&](const std::vector<ast::StmtPtr> &) { return ++bodies, true; });
    EXPECT_EQ(exprs, expected[i].first) << "statement " << i;
    EXPECT_EQ(bodies, expected[i].second) << "statement " << i;
  }
}

TEST(AstQueries, AssignedNamesInOrderThroughLoopsAndBranches) {
  Parsed p(R"(def f(x) {
  a = x
  for i in 0..2 { b = a  a = b }
  if x { c = 1 } else { d, e = g() }
  z += 1
  h = fn() { inner = 1  return inner }
  return a
})");
  ASSERT_TRUE(p.file && p.diags->getCaptured().empty());
  std::vector<std::string> names;
  ast::collectAssignedNames(p.body(), names);
  EXPECT_EQ(names,
            (std::vector<std::string>{"a", "b", "c", "d", "e", "z", "h"}));
}

TEST(AstQueries, MentionsNameSeesEveryReadButNotScopeStrings) {
  Parsed p(R"(def f(x) {
  a = y @ "layers.{x}"
  b = fn(u = x) { return u }
  c = fn() { return [1, g(k: x)] }
  x = 2
  return w
})");
  ASSERT_TRUE(p.file && p.diags->getCaptured().empty());
  EXPECT_FALSE(ast::mentionsName(p.value(0), "x"));
  EXPECT_TRUE(ast::mentionsName(p.value(0), "y"));
  EXPECT_TRUE(ast::mentionsName(p.value(1), "x")); // a parameter's default
  EXPECT_TRUE(ast::mentionsName(p.value(2), "x")); // inside the body
  EXPECT_TRUE(ast::mentionsName(p.value(2), "g"));
  // In statements an assignment counts as a mention.
  EXPECT_TRUE(ast::mentionsName(p.body(), "x"));
  EXPECT_TRUE(ast::mentionsName(p.body(), "w"));
  EXPECT_FALSE(ast::mentionsName(p.body(), "q"));
}

TEST(AstQueries, NamesReadStopAtAnonymousFunctions) {
  Parsed p(R"(def f() {
  return a.b + c[d] - (e ? g(h) : fn() { return z })
})");
  ASSERT_TRUE(p.file && p.diags->getCaptured().empty());
  std::set<std::string> names;
  ast::collectNamesRead(p.value(0), names);
  EXPECT_EQ(names, (std::set<std::string>{"a", "c", "d", "e", "g", "h"}));
}
