//===- GrammarCheck.cpp - Grammar introspection for tests -----------------===//
//
// This file implements the test support of GrammarCheck.h with the
// generated ArchLexer and ArchParser. archc itself uses a hand-written lexer
// for speed; this library (archc_grammar_check) keeps the generated lexer
// and its start-up ATN deserialisation out of archc.
//
//===----------------------------------------------------------------------===//
#include "frontend/GrammarCheck.h"

#include "frontend/antlr/AstBuilder.h"
#include "frontend/antlr/TokenLocations.h"

#include "ArchLexer.h"
#include "ArchParser.h"
#include "antlr4-runtime.h"

#include <cxxabi.h>

#include <cctype>
#include <cstdlib>
#include <functional>
#include <set>

namespace archc::grammarcheck {
namespace {

using grammar::ArchLexer;
using grammar::ArchParser;

/// A vocabulary entry as written in the grammar: the literal without
/// quotes, else the symbolic name.
std::string tokenName(const antlr4::dfa::Vocabulary &v, size_t type) {
  std::string lit = v.getLiteralName(type);
  if (lit.size() >= 2 && lit.front() == '\'' && lit.back() == '\'')
    return lit.substr(1, lit.size() - 2);
  return v.getSymbolicName(type);
}

/// The generated lexer and parser over one text, parsed without error
/// recovery.
struct GeneratedParse {
  explicit GeneratedParse(const std::string &text)
      : input(text.data(), text.size()), lexer(&input), tokens(&lexer),
        parser(&tokens) {
    lexer.removeErrorListeners();
    parser.removeErrorListeners();
    parser.setErrorHandler(std::make_shared<antlr4::BailErrorStrategy>());
  }
  /// The tree, or null (and `error` set) on a syntax error.
  ArchParser::FileContext *parse(std::string &error) {
    try {
      return parser.file();
    } catch (const antlr4::ParseCancellationException &) {
      error = "syntax error";
    } catch (const std::exception &e) {
      error = e.what();
    }
    return nullptr;
  }
  antlr4::ANTLRInputStream input;
  ArchLexer lexer;
  antlr4::CommonTokenStream tokens;
  ArchParser parser;
};

/// Calls `f` on every rule context of the tree under `node`, parents first.
void forEachRule(antlr4::tree::ParseTree *node,
                 const std::function<void(antlr4::ParserRuleContext *)> &f) {
  if (auto *rule = dynamic_cast<antlr4::ParserRuleContext *>(node)) {
    f(rule);
    for (auto *child : rule->children)
      forEachRule(child, f);
  }
}

/// The generated class name of a context without namespace and `Context`:
/// `ForStmt` for ArchParser::ForStmtContext.
std::string contextName(antlr4::ParserRuleContext *ctx) {
  int status = 0;
  char *demangled =
      abi::__cxa_demangle(typeid(*ctx).name(), nullptr, nullptr, &status);
  std::string name = status == 0 && demangled ? demangled : "";
  std::free(demangled);
  size_t colon = name.rfind("::");
  if (colon != std::string::npos)
    name = name.substr(colon + 2);
  const std::string suffix = "Context";
  if (name.size() > suffix.size() &&
      name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0)
    name.resize(name.size() - suffix.size());
  return name;
}

} // namespace

std::vector<LexedToken> lexWithGeneratedLexer(const std::string &text) {
  antlr4::ANTLRInputStream input(text.data(), text.size());
  ArchLexer lexer(&input);
  lexer.removeErrorListeners();
  std::vector<LexedToken> out;
  while (true) {
    auto t = lexer.nextToken();
    out.push_back(
        {t->getType(), t->getText(), t->getLine(), t->getCharPositionInLine()});
    if (t->getType() == antlr4::Token::EOF)
      return out;
  }
}

std::vector<std::string> firstTokens(const std::string &rule) {
  GeneratedParse g("");
  std::map<std::string, size_t> rules = g.parser.getRuleIndexMap();
  auto it = rules.find(rule);
  if (it == rules.end())
    return {};
  const antlr4::atn::ATN &atn = g.parser.getATN();
  const antlr4::misc::IntervalSet &set =
      atn.nextTokens(atn.ruleToStartState[it->second]);
  std::vector<std::string> out;
  for (ssize_t type : set.toList())
    if (type > 0)
      out.push_back(tokenName(g.parser.getVocabulary(), type));
  return out;
}

std::vector<std::string> literalTokens() {
  GeneratedParse g("");
  const antlr4::dfa::Vocabulary &v = g.parser.getVocabulary();
  std::vector<std::string> out;
  for (size_t type = 1; type <= v.getMaxTokenType(); ++type) {
    std::string lit = v.getLiteralName(type);
    if (lit.size() >= 2 && lit.front() == '\'')
      out.push_back(lit.substr(1, lit.size() - 2));
  }
  return out;
}

std::vector<std::string> alternativesInParseTree(const std::string &text,
                                                 std::string &error) {
  GeneratedParse g(text);
  ArchParser::FileContext *tree = g.parse(error);
  if (!tree)
    return {};
  const std::vector<std::string> &ruleNames = g.parser.getRuleNames();
  std::set<std::string> labels;
  forEachRule(tree, [&](antlr4::ParserRuleContext *ctx) {
    std::string name = contextName(ctx);
    std::string rule = ruleNames[ctx->getRuleIndex()];
    rule[0] = static_cast<char>(std::toupper(rule[0]));
    if (name != rule) // a labeled alternative, not the rule's own context
      labels.insert(name);
  });
  return {labels.begin(), labels.end()};
}

std::string buildExpressionAt(const std::string &text,
                              const std::string &rule) {
  GeneratedParse g(text);
  std::string error;
  ArchParser::FileContext *tree = g.parse(error);
  if (!tree)
    return "parse failed: " + error;
  size_t ruleIndex = g.parser.getRuleIndex(rule);
  antlr4::ParserRuleContext *target = nullptr;
  forEachRule(tree, [&](antlr4::ParserRuleContext *ctx) {
    if (!target && ctx->getRuleIndex() == ruleIndex)
      target = ctx;
  });
  if (!target)
    return "no rule '" + rule + "' in the tree";
  SourceMgr sm;
  uint32_t id = sm.addBuffer("check.arch", text);
  DiagnosticEngine diags(sm);
  diags.setCapture(true);
  frontend::TokenLocations locations(id, sm);
  try {
    ast::ExprPtr e =
        frontend::buildExpression(target, g.parser, locations, diags);
    return e ? "" : "no expression";
  } catch (const frontend::InternalParseError &e) {
    return e.what();
  }
}

} // namespace archc::grammarcheck
