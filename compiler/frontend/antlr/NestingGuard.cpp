//===- NestingGuard.cpp - Limits on nesting before parsing ----------------===//
//
// Private to the front end. This file implements checkNesting(). Token types
// are classified once from the grammar's vocabulary: brackets and statement
// ends by their literals, operators from the operator table.
//
//===----------------------------------------------------------------------===//
#include "frontend/antlr/NestingGuard.h"

#include "frontend/Parser.h"
#include "frontend/antlr/OperatorTokens.h"

#include "ArchParser.h"

namespace archc::frontend {

using grammar::ArchParser;

namespace {

/// What checkNesting needs to know of a token type.
enum TokenClass : uint8_t {
  kOpen = 1,        ///< ( [ {
  kClose = 2,       ///< ) ] }
  kPrefix = 4,      ///< prefix operators (prefix when not after an operand)
  kOperator = 8,    ///< chain, prefix, postfix and conditional operators
  kReset = 16,      ///< ; { } = end an expression
  kEndsOperand = 32 ///< literals, names, ) ]
};

const std::vector<uint8_t> &tokenClasses(const antlr4::dfa::Vocabulary &v) {
  static const std::vector<uint8_t> classes = [&v] {
    const OperatorTokens &ops = operatorTokens(v);
    std::vector<uint8_t> c(v.getMaxTokenType() + 1, 0);
    auto mark = [&](std::initializer_list<const char *> literals, uint8_t k) {
      for (const char *lit : literals) {
        size_t type = literalTokenType(v, lit);
        if (type != antlr4::Token::INVALID_TYPE)
          c[type] |= k;
      }
    };
    mark({"(", "[", "{"}, kOpen);
    mark({")", "]", "}"}, kClose);
    mark({";", "{", "}", "="}, kReset);
    mark({")", "]"}, kEndsOperand);
    // The postfix `.` and `@` and the conditional `?` are grammar structure,
    // not table entries (calls and indexing are brackets).
    mark({"?", ".", "@"}, kOperator);
    for (size_t type = 1; type < c.size(); ++type) {
      if (ops.prefix[type])
        c[type] |= kPrefix | kOperator;
      if (ops.infix[type])
        c[type] |= kOperator;
    }
    for (size_t type : {ArchParser::ID, ArchParser::INT, ArchParser::FLOAT,
                        ArchParser::STRING, ArchParser::TRUE, ArchParser::FALSE,
                        ArchParser::NONE})
      if (type < c.size())
        c[type] |= kEndsOperand;
    return c;
  }();
  return classes;
}

} // namespace

bool checkNesting(antlr4::CommonTokenStream &tokens,
                  const antlr4::dfa::Vocabulary &vocabulary,
                  const TokenLocations &locations, DiagnosticEngine &diags) {
  constexpr unsigned kMaxOperators = 16 * kMaxNestingDepth;
  const std::vector<uint8_t> &classes = tokenClasses(vocabulary);
  unsigned depth = 0, prefixRun = 0, operators = 0;
  bool afterOperand = false; // previous token ends an operand
  for (antlr4::Token *t : tokens.getTokens()) {
    size_t type = t->getType();
    if (type == antlr4::Token::EOF)
      break;
    uint8_t k = type < classes.size() ? classes[type] : 0;
    if (k & kOpen)
      ++depth;
    else if ((k & kClose) && depth > 0)
      --depth;
    bool prefix = !afterOperand && (k & kPrefix);
    prefixRun = prefix ? prefixRun + 1 : 0;
    if (k & kOperator)
      ++operators;
    else if (k & kReset)
      operators = 0;
    afterOperand = k & kEndsOperand;
    std::string problem;
    if (depth > kMaxNestingDepth || prefixRun > kMaxNestingDepth)
      problem = fmt::format("expression or block nested too deeply (the "
                            "limit is {} levels)",
                            kMaxNestingDepth);
    else if (operators > kMaxOperators)
      problem = fmt::format("expression too long (more than {} operators)",
                            kMaxOperators);
    if (!problem.empty()) {
      diags.error(locations.range(t), "{}", problem);
      return false;
    }
  }
  return true;
}

} // namespace archc::frontend
