//===- OperatorTokens.cpp - Token types of the operator table -------------===//
//
// Private to the front end. This file maps each entry of kOperators to the
// grammar's token types through the vocabulary's literal names (`'*'`,
// `'and'`), so the table and the grammar meet only at the spellings.
//
//===----------------------------------------------------------------------===//
#include "frontend/antlr/OperatorTokens.h"

#include <fmt/format.h>

#include <stdexcept>

namespace archc::frontend {

size_t literalTokenType(const antlr4::dfa::Vocabulary &vocabulary,
                        std::string_view text) {
  std::string quoted = fmt::format("'{}'", text);
  for (size_t type = 1; type <= vocabulary.getMaxTokenType(); ++type)
    if (vocabulary.getLiteralName(type) == quoted)
      return type;
  return antlr4::Token::INVALID_TYPE;
}

namespace {

/// The token types of `spelling`'s space-separated tokens.
std::vector<size_t> tokenTypes(const antlr4::dfa::Vocabulary &vocabulary,
                               std::string_view spelling) {
  std::vector<size_t> types;
  while (!spelling.empty()) {
    size_t space = spelling.find(' ');
    std::string_view word = spelling.substr(0, space);
    size_t type = literalTokenType(vocabulary, word);
    if (type == antlr4::Token::INVALID_TYPE)
      throw std::logic_error(
          fmt::format("operator '{}' of the operator table is not a token of "
                      "grammar/Arch.g4",
                      word));
    types.push_back(type);
    spelling = space == std::string_view::npos ? std::string_view()
                                               : spelling.substr(space + 1);
  }
  return types;
}

OperatorTokens build(const antlr4::dfa::Vocabulary &vocabulary) {
  using ast::OperatorKind;
  OperatorTokens t;
  size_t n = vocabulary.getMaxTokenType() + 1;
  t.infix.assign(n, nullptr);
  t.prefix.assign(n, nullptr);
  t.compound.assign(n, nullptr);
  auto claim = [](std::vector<const ast::OperatorInfo *> &slots, size_t type,
                  const ast::OperatorInfo &o) {
    if (slots[type])
      throw std::logic_error(fmt::format(
          "operator '{}' appears twice in the operator table", o.spelling));
    slots[type] = &o;
  };
  for (const ast::OperatorInfo &o : ast::kOperators) {
    std::vector<size_t> types = tokenTypes(vocabulary, o.spelling);
    bool oneToken = types.size() == 1;
    switch (o.kind) {
    case OperatorKind::Binary:
      if (!oneToken)
        throw std::logic_error(
            fmt::format("binary operator '{}' must be one token", o.spelling));
      claim(t.infix, types[0], o);
      break;
    case OperatorKind::Membership:
      if (t.membership[o.negated])
        throw std::logic_error(
            fmt::format("two membership operators with negated={}", o.negated));
      t.membership[o.negated] = &o;
      if (!o.negated)
        claim(t.infix, types.back(), o);
      break;
    case OperatorKind::Prefix:
      if (!oneToken)
        throw std::logic_error(
            fmt::format("prefix operator '{}' must be one token", o.spelling));
      claim(t.prefix, types[0], o);
      break;
    case OperatorKind::Compound:
      if (!oneToken)
        throw std::logic_error(fmt::format(
            "compound assignment '{}' must be one token", o.spelling));
      claim(t.compound, types[0], o);
      break;
    }
  }
  if (!t.membership[0] || !t.membership[1])
    throw std::logic_error("the operator table needs `in` and `not in`");
  return t;
}

} // namespace

const OperatorTokens &
operatorTokens(const antlr4::dfa::Vocabulary &vocabulary) {
  // One grammar, so one vocabulary per process.
  static const OperatorTokens table = build(vocabulary);
  return table;
}

} // namespace archc::frontend
