//===- GrammarTest.cpp - Grammar, AST builder and operator table ----------===//
//
// Checks that grammar/Arch.g4, the AST builder's dispatch and the operator
// table (frontend/Operators.h) stay in step: every rule with alternatives
// labels them, every labeled alternative is built, every operator token of
// the grammar has a table entry (and every entry a token), the parser
// applies the table's precedence and associativity, docs/language.md shows
// the same table, and ANTLR headers stay inside the front end.
//
//===----------------------------------------------------------------------===//
#include "frontend/GrammarCheck.h"
#include "frontend/Operators.h"
#include "frontend/Parser.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <regex>
#include <set>
#include <sstream>

using namespace archc;

namespace {

std::string readSourceFile(const std::string &relative) {
  std::ifstream in(std::filesystem::path(ARCHC_SOURCE_DIR) / relative);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// Arch.g4 without `//` comments.
std::string grammarText() {
  std::string text = readSourceFile("grammar/Arch.g4"), out;
  bool inQuote = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (!inQuote && c == '/' && i + 1 < text.size() && text[i + 1] == '/') {
      while (i < text.size() && text[i] != '\n')
        ++i;
      out += '\n';
      continue;
    }
    if (c == '\'')
      inQuote = !inQuote;
    else if (c == '\\' && inQuote && i + 1 < text.size())
      out += text[i++];
    if (c == '\n')
      inQuote = false;
    out += c;
  }
  return out;
}

/// The parser rules of Arch.g4: name -> top-level alternatives.
std::map<std::string, std::vector<std::string>> parserRules() {
  std::map<std::string, std::vector<std::string>> rules;
  std::string text = grammarText();
  std::regex head(R"((^|\n)([a-z]\w*)\s*:)");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), head);
       it != std::sregex_iterator(); ++it) {
    size_t pos = it->position(0) + it->length(0);
    std::vector<std::string> alts(1);
    int depth = 0;
    bool inQuote = false;
    for (; pos < text.size(); ++pos) {
      char c = text[pos];
      if (inQuote) {
        if (c == '\\')
          alts.back() += text[pos++];
        else if (c == '\'')
          inQuote = false;
      } else if (c == '\'') {
        inQuote = true;
      } else if (c == '(') {
        ++depth;
      } else if (c == ')') {
        --depth;
      } else if (c == ';' && depth == 0) {
        break;
      } else if (c == '|' && depth == 0) {
        alts.emplace_back();
        continue;
      }
      alts.back() += c;
    }
    rules[(*it)[2]] = alts;
  }
  return rules;
}

/// The alternative labels (`# Label`) of Arch.g4.
std::set<std::string> grammarLabels() {
  std::set<std::string> labels;
  std::regex label(R"(#\s*([A-Za-z]\w*))");
  for (const auto &[rule, alts] : parserRules())
    for (const std::string &alt : alts)
      for (auto it = std::sregex_iterator(alt.begin(), alt.end(), label);
           it != std::sregex_iterator(); ++it)
        labels.insert((*it)[1]);
  return labels;
}

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

template <class To, class From> const To *dynOrNull(const From *v) {
  return v ? dyn_cast<To>(v) : nullptr;
}

const ast::Stmt *firstStmt(const ast::File &f) {
  if (f.defs.empty() || f.defs[0]->body.empty())
    return nullptr;
  return f.defs[0]->body[0].get();
}

/// The value of `def f(x, y) { return <expr> }`.
const ast::Expr *returned(const ast::File &f) {
  auto *ret = dynOrNull<ast::ReturnStmt>(firstStmt(f));
  return ret && !ret->values.empty() ? ret->values[0].get() : nullptr;
}

template <class T> bool returns(const ast::File &f) {
  return returned(f) && isa<T>(returned(f));
}

std::string ret(const std::string &e) {
  return "def f(x, y) { return " + e + " }";
}

/// One source text per labeled alternative of Arch.g4, with what the AST
/// must contain.
struct Sample {
  std::string label, text;
  std::function<bool(const ast::File &)> check;
};

std::vector<Sample> samples() {
  using K = ast::ConfigEntry::Kind;
  auto configKind = [](K kind) {
    return [kind](const ast::File &f) {
      if (f.archs.empty())
        return false;
      for (const auto &e : f.archs[0]->config)
        if (e.kind == kind)
          return true;
      return false;
    };
  };
  auto stmt = [](ast::Stmt::Kind kind) {
    return [kind](const ast::File &f) {
      return firstStmt(f) && firstStmt(f)->getKind() == kind;
    };
  };
  const std::string config =
      "arch a { config { n: int = 1 alias \"num\"\n let m = 2\n check n > 0, "
      "\"m\" } }";
  return {
      {"ImportItem", "import \"std/x.arch\"",
       [](const ast::File &f) {
         return f.imports.size() == 1 && f.imports[0].path == "std/x.arch";
       }},
      {"ArchItem", "arch a { }",
       [](const ast::File &f) { return f.archs.size() == 1; }},
      {"DefItem", "def g() { return 1 }",
       [](const ast::File &f) { return f.defs.size() == 1; }},
      {"ConfigMember", config,
       [](const ast::File &f) {
         return f.archs.size() == 1 && f.archs[0]->config.size() == 3;
       }},
      {"ConfigField", config, configKind(K::Field)},
      {"ConfigLet", config, configKind(K::Let)},
      {"ConfigCheck", config, configKind(K::Check)},
      {"ConfigDirective", "arch a { config { inert x, \"y.z\"\n keep n } }",
       [](const ast::File &f) {
         if (f.archs.size() != 1 || f.archs[0]->config.size() != 2)
           return false;
         const auto &c = f.archs[0]->config;
         return c[0].kind == K::Inert &&
                c[0].names == std::vector<std::string>{"x", "y.z"} &&
                c[1].kind == K::Keep &&
                c[1].names == std::vector<std::string>{"n"};
       }},
      {"UseMember", "arch a { use b as t\n use c }",
       [](const ast::File &f) {
         return f.archs.size() == 1 && f.archs[0]->uses.size() == 2 &&
                f.archs[0]->uses[0].arch == "b" &&
                f.archs[0]->uses[0].alias == "t" &&
                f.archs[0]->uses[1].alias == "c";
       }},
      {"DefMember", "arch a { def g() { return 1 } }",
       [](const ast::File &f) {
         return f.archs.size() == 1 && f.archs[0]->defs.size() == 1;
       }},
      {"ModelMember", "arch a { model(x: f32[2]) -> (y) { y = x } }",
       [](const ast::File &f) {
         return f.archs.size() == 1 && f.archs[0]->model &&
                f.archs[0]->model->outputs.size() == 1;
       }},
      {"ModelMember", "arch a { model v(x: f32[2]) -> (y) { y = x } }",
       [](const ast::File &f) {
         return f.archs.size() == 1 && !f.archs[0]->model &&
                f.archs[0]->graphs.size() == 1 &&
                f.archs[0]->graphs[0]->name == "v";
       }},
      {"AssignStmt", "def f(x) { a, b = x }",
       [](const ast::File &f) {
         auto *a = dynOrNull<ast::AssignStmt>(firstStmt(f));
         return a && a->targets.size() == 2 && a->targets[1].name == "b";
       }},
      {"AugAssignStmt", "def f(x) { x -= 1 }",
       [](const ast::File &f) {
         auto *a = dynOrNull<ast::AugAssignStmt>(firstStmt(f));
         return a && a->op == ast::BinaryOp::Sub;
       }},
      {"ForStmt", "def f(x) { for i in 0 .. 2 @ \"l.{i}\" { x = i } }",
       [](const ast::File &f) {
         auto *s = dynOrNull<ast::ForStmt>(firstStmt(f));
         return s && s->scope == "l.{i}" && isa<ast::IntExpr>(s->hi.get());
       }},
      {"IfStmt", "def f(x) { if x { x = 1 } else if x { x = 2 } else { } }",
       [](const ast::File &f) {
         auto *s = dynOrNull<ast::IfStmt>(firstStmt(f));
         return s && s->hasElse && s->otherwise.size() == 1 &&
                isa<ast::IfStmt>(s->otherwise[0].get());
       }},
      {"ReturnStmt", "def f(x) { return x, 1 }",
       [](const ast::File &f) {
         auto *s = dynOrNull<ast::ReturnStmt>(firstStmt(f));
         return s && s->values.size() == 2;
       }},
      {"ErrorStmt", "def f(x) { error \"no\" }", stmt(ast::Stmt::Kind::Error)},
      {"CheckStmt", "def f(x) { check x, \"m\" }",
       stmt(ast::Stmt::Kind::Check)},
      {"InfixOp", ret("x * 2"), returns<ast::BinaryExpr>},
      {"MembershipOp", ret("x not in y"),
       [](const ast::File &f) {
         auto *e = dynOrNull<ast::InExpr>(returned(f));
         return e && e->negated;
       }},
      {"PrefixUnary", ret("-x"), returns<ast::UnaryExpr>},
      {"PostfixUnary", ret("x"), returns<ast::NameExpr>},
      {"MemberOp", ret("x.y"), returns<ast::MemberExpr>},
      {"CallOp", ret("g(x, k: 1)"),
       [](const ast::File &f) {
         auto *e = dynOrNull<ast::CallExpr>(returned(f));
         return e && e->args.size() == 2 && e->args[1].name == "k";
       }},
      {"IndexOp", ret("x[0]"), returns<ast::IndexExpr>},
      {"ScopeOp", ret("g(x) @ \"s\""), returns<ast::ScopeExpr>},
      {"IntLit", ret("3"), returns<ast::IntExpr>},
      {"FloatLit", ret("1.5"), returns<ast::FloatExpr>},
      {"StringLit", ret("\"s\""), returns<ast::StringExpr>},
      {"BoolLit", ret("false"),
       [](const ast::File &f) {
         auto *e = dynOrNull<ast::BoolExpr>(returned(f));
         return e && !e->value;
       }},
      {"NoneLit", ret("none"), returns<ast::NoneExpr>},
      {"NameRef", ret("y"), returns<ast::NameExpr>},
      {"ParenExpr", ret("(x + 1)"), returns<ast::BinaryExpr>},
      {"ListLit", ret("[1, x,]"),
       [](const ast::File &f) {
         auto *e = dynOrNull<ast::ListExpr>(returned(f));
         return e && e->elems.size() == 2;
       }},
      {"FnLit", ret("fn(t) { return t }"), returns<ast::FnExpr>},
  };
}

} // namespace

TEST(Grammar, EveryRuleWithAlternativesLabelsThem) {
  auto rules = parserRules();
  ASSERT_GT(rules.size(), 20u);
  ASSERT_EQ(rules.count("stmt"), 1u);
  EXPECT_EQ(rules["stmt"].size(), 7u);
  for (const auto &[rule, alts] : rules) {
    if (alts.size() < 2)
      continue;
    for (const std::string &alt : alts)
      EXPECT_NE(alt.find('#'), std::string::npos)
          << "rule '" << rule << "' has an unlabeled alternative:" << alt;
  }
}

TEST(Grammar, EveryLabeledAlternativeIsBuilt) {
  std::set<std::string> labels = grammarLabels();
  ASSERT_GT(labels.size(), 30u);
  std::set<std::string> sampled;
  for (const Sample &s : samples()) {
    sampled.insert(s.label);
    std::string error;
    std::vector<std::string> alts =
        grammarcheck::alternativesInParseTree(s.text, error);
    EXPECT_EQ(error, "") << s.text;
    EXPECT_NE(std::find(alts.begin(), alts.end(), s.label), alts.end())
        << s.label << " does not occur in the parse tree of: " << s.text;
    auto p = parse(s.text);
    ASSERT_TRUE(p->file) << s.label << ": " << p->errors();
    EXPECT_TRUE(s.check(*p->file)) << s.label << ": " << s.text;
  }
  // A label added to the grammar needs a sample here (and a visit method in
  // the AST builder, which the compiler demands).
  EXPECT_EQ(sampled, labels);
}

TEST(Grammar, BuilderRejectsRulesOutsideItsDispatch) {
  const std::string text = "def f(x: int) { return x + 1 }";
  EXPECT_EQ(grammarcheck::buildExpressionAt(text, "expr"), "");
  EXPECT_EQ(grammarcheck::buildExpressionAt(text, "chain"), "");
  EXPECT_EQ(grammarcheck::buildExpressionAt(text, "unary"), "");
  EXPECT_EQ(grammarcheck::buildExpressionAt(text, "primary"), "");
  EXPECT_EQ(grammarcheck::buildExpressionAt(text, "param"),
            "the AST builder expected a rule alternative but found rule "
            "'param'");
  EXPECT_EQ(grammarcheck::buildExpressionAt(text, "binaryOp"),
            "the AST builder expected an expression but found rule "
            "'binaryOp'");
  EXPECT_EQ(grammarcheck::buildExpressionAt(text, "stmt"),
            "the AST builder expected an expression but found rule 'stmt'");
}

namespace {
std::set<std::string> spellings(ast::OperatorKind kind, bool firstWord) {
  std::set<std::string> out;
  for (const ast::OperatorInfo &o : ast::kOperators)
    if (o.kind == kind) {
      std::string s(o.spelling);
      out.insert(firstWord ? s.substr(0, s.find(' ')) : s);
    }
  return out;
}

std::set<std::string> setOf(const std::vector<std::string> &v) {
  return {v.begin(), v.end()};
}
} // namespace

TEST(OperatorTable, EveryOperatorIsAGrammarToken) {
  std::set<std::string> literals = setOf(grammarcheck::literalTokens());
  for (const ast::OperatorInfo &o : ast::kOperators) {
    std::istringstream words{std::string(o.spelling)};
    std::string word;
    while (words >> word)
      EXPECT_EQ(literals.count(word), 1u) << o.spelling;
  }
}

TEST(OperatorTable, MatchesTheGrammarsOperatorTokens) {
  using K = ast::OperatorKind;
  // Chain operators: the tokens binaryOp can begin with.
  std::set<std::string> chain = spellings(K::Binary, false);
  for (const std::string &s : spellings(K::Membership, true))
    chain.insert(s);
  EXPECT_EQ(setOf(grammarcheck::firstTokens("binaryOp")), chain);
  // Prefix operators: what unary can begin with that postfix cannot.
  std::set<std::string> prefix = setOf(grammarcheck::firstTokens("unary"));
  for (const std::string &s : grammarcheck::firstTokens("postfix"))
    prefix.erase(s);
  EXPECT_EQ(prefix, spellings(K::Prefix, false));
  // Compound assignments: the grammar's `op=` tokens that are not
  // comparisons.
  std::set<std::string> compound;
  for (const std::string &lit : grammarcheck::literalTokens())
    if (lit.size() >= 2 && lit.back() == '=' &&
        !spellings(K::Binary, false).count(lit))
      compound.insert(lit);
  EXPECT_EQ(compound, spellings(K::Compound, false));
}

TEST(OperatorTable, IsConsistent) {
  using K = ast::OperatorKind;
  int last = 100;
  for (const ast::OperatorInfo &o : ast::kOperators) {
    if (o.kind == K::Binary || o.kind == K::Membership) {
      EXPECT_GE(o.precedence, 2) << o.spelling << ": level 1 is `?:`";
      EXPECT_LE(o.precedence, last) << o.spelling << ": tightest first";
      last = o.precedence;
    }
    if (o.kind == K::Compound) {
      EXPECT_EQ(std::string(ast::spelling(o.binary)) + "=", o.spelling);
    }
  }
  // Every operation has a canonical spelling, the first of its entries.
  for (int op = 0; op <= static_cast<int>(ast::BinaryOp::Or); ++op) {
    auto b = static_cast<ast::BinaryOp>(op);
    const ast::OperatorInfo *first = nullptr;
    for (const ast::OperatorInfo &o : ast::kOperators)
      if (!first && o.kind == K::Binary && o.binary == b)
        first = &o;
    ASSERT_TRUE(first) << op;
    EXPECT_EQ(ast::spelling(b), first->spelling);
  }
  EXPECT_STREQ(ast::spelling(ast::BinaryOp::And), "&&");
}

TEST(OperatorTable, ParserAppliesPrecedenceAndAssociativity) {
  using K = ast::OperatorKind;
  std::vector<const ast::OperatorInfo *> chainOps;
  for (const ast::OperatorInfo &o : ast::kOperators)
    if (o.kind == K::Binary || o.kind == K::Membership)
      chainOps.push_back(&o);
  ASSERT_EQ(chainOps.size(), 17u);
  // The node an operator builds, checked against its entry.
  auto isOp = [](const ast::Expr *e, const ast::OperatorInfo &o) {
    if (o.kind == K::Membership) {
      auto *in = dynOrNull<ast::InExpr>(e);
      return in && in->negated == o.negated;
    }
    auto *b = dynOrNull<ast::BinaryExpr>(e);
    return b && b->op == o.binary;
  };
  auto lhs = [](const ast::Expr *e) -> const ast::Expr * {
    if (auto *b = dyn_cast<ast::BinaryExpr>(e))
      return b->lhs.get();
    return cast<ast::InExpr>(e)->lhs.get();
  };
  auto rhs = [](const ast::Expr *e) -> const ast::Expr * {
    if (auto *b = dyn_cast<ast::BinaryExpr>(e))
      return b->rhs.get();
    return cast<ast::InExpr>(e)->rhs.get();
  };
  for (const ast::OperatorInfo *p : chainOps)
    for (const ast::OperatorInfo *q : chainOps) {
      std::string text = ret("x " + std::string(p->spelling) + " y " +
                             std::string(q->spelling) + " z");
      auto parsed = parse(text);
      ASSERT_TRUE(parsed->file) << text << parsed->errors();
      const ast::Expr *root = returned(*parsed->file);
      bool pFirst =
          p->precedence > q->precedence ||
          (p->precedence == q->precedence && q->assoc == ast::Assoc::Left);
      if (pFirst) {
        // (x p y) q z
        ASSERT_TRUE(isOp(root, *q)) << text;
        EXPECT_TRUE(isOp(lhs(root), *p)) << text;
        EXPECT_TRUE(isa<ast::NameExpr>(rhs(root))) << text;
      } else {
        // x p (y q z)
        ASSERT_TRUE(isOp(root, *p)) << text;
        EXPECT_TRUE(isOp(rhs(root), *q)) << text;
        EXPECT_TRUE(isa<ast::NameExpr>(lhs(root))) << text;
      }
    }
}

TEST(OperatorTable, ParserMapsPrefixAndCompoundTokens) {
  for (const ast::OperatorInfo &o : ast::kOperators) {
    if (o.kind == ast::OperatorKind::Prefix) {
      std::string text = ret(std::string(o.spelling) + " x");
      auto p = parse(text);
      ASSERT_TRUE(p->file) << text << p->errors();
      auto *u = dynOrNull<ast::UnaryExpr>(returned(*p->file));
      ASSERT_TRUE(u) << text;
      EXPECT_EQ(u->op, o.unary) << text;
    } else if (o.kind == ast::OperatorKind::Compound) {
      std::string text = "def f(x) { x " + std::string(o.spelling) + " 2 }";
      auto p = parse(text);
      ASSERT_TRUE(p->file) << text << p->errors();
      auto *a = dynOrNull<ast::AugAssignStmt>(firstStmt(*p->file));
      ASSERT_TRUE(a) << text;
      EXPECT_EQ(a->op, o.binary) << text;
    }
  }
}

TEST(OperatorTable, MatchesTheLanguageReference) {
  // docs/language.md: `| 7 | `*` `/` `//` `%` |` and `| prefix | ... |`.
  std::map<std::string, std::vector<std::string>> doc;
  std::istringstream lines(readSourceFile("docs/language.md"));
  std::regex row(R"(^\| (\d+|prefix) \| (.*) \|$)");
  std::regex code(R"(`([^`]+)`)");
  std::string line;
  while (std::getline(lines, line)) {
    std::smatch m;
    if (!std::regex_match(line, m, row) || m[1] == "1") // 1: `c ? a : b`
      continue;
    std::string cells = m[2];
    for (auto it = std::sregex_iterator(cells.begin(), cells.end(), code);
         it != std::sregex_iterator(); ++it) {
      std::string s = (*it)[1];
      s = std::regex_replace(s, std::regex(R"(\\\|)"), "|");
      doc[m[1]].push_back(s);
    }
  }
  std::map<std::string, std::vector<std::string>> table;
  for (const ast::OperatorInfo &o : ast::kOperators) {
    if (o.kind == ast::OperatorKind::Prefix)
      table["prefix"].emplace_back(o.spelling);
    else if (o.kind != ast::OperatorKind::Compound)
      table[std::to_string(o.precedence)].emplace_back(o.spelling);
  }
  EXPECT_EQ(doc, table);
}

TEST(Layering, AntlrStaysInsideTheFrontEnd) {
  namespace fs = std::filesystem;
  fs::path root = fs::path(ARCHC_SOURCE_DIR) / "compiler";
  std::regex antlrInclude(
      R"(#include\s+["<](antlr4-runtime\.h|Arch(Lexer|Parser|Visitor|BaseVisitor)\.h))");
  size_t files = 0;
  for (const auto &e : fs::recursive_directory_iterator(root)) {
    std::string ext = e.path().extension().string();
    if (ext != ".h" && ext != ".cpp")
      continue;
    ++files;
    std::string rel = fs::relative(e.path(), root).generic_string();
    std::ifstream in(e.path());
    std::stringstream ss;
    ss << in.rdbuf();
    std::string text = ss.str();
    bool allowed =
        rel.rfind("frontend/antlr/", 0) == 0 || rel == "frontend/Parser.cpp";
    if (!allowed) {
      EXPECT_FALSE(std::regex_search(text, antlrInclude))
          << rel << " includes an ANTLR header";
    }
  }
  EXPECT_GT(files, 50u);
}
