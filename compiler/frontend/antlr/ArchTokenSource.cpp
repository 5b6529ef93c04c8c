//===- ArchTokenSource.cpp - Hand-written lexer for Arch.g4 ---------------===//
//
// Private to the front end. This file implements ArchTokenSource: trivia
// (whitespace and comments), identifiers and keywords, numbers, strings and
// longest-match punctuation, with ANTLR's token types and positions and its
// wording for unknown characters.
//
//===----------------------------------------------------------------------===//
#include "frontend/antlr/ArchTokenSource.h"

#include "ArchParser.h"

namespace archc::frontend {

using grammar::ArchParser;

namespace {
bool isDigit(char c) { return c >= '0' && c <= '9'; }
bool isIdentStart(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
bool isIdentPart(char c) { return isIdentStart(c) || isDigit(c); }
} // namespace

ArchTokenSource::ArchTokenSource(std::string_view text,
                                 const TokenLocations &locations,
                                 DiagnosticEngine *diags,
                                 const antlr4::dfa::Vocabulary &vocabulary)
    : text(text), locations(locations), diags(diags) {
  static const Tables tables = buildTables(vocabulary);
  tab = &tables;
}

ArchTokenSource::Tables
ArchTokenSource::buildTables(const antlr4::dfa::Vocabulary &v) {
  Tables t;
  for (size_t i = 1; i <= v.getMaxTokenType(); ++i) {
    std::string lit = v.getLiteralName(i);
    if (lit.size() < 3 || lit.front() != '\'' || lit.back() != '\'')
      continue;
    std::string body = lit.substr(1, lit.size() - 2);
    if (isIdentStart(body[0]))
      t.keywords[body] = i;
    else
      t.punctuation[static_cast<unsigned char>(body[0])].emplace_back(body, i);
  }
  for (auto &list : t.punctuation)
    std::stable_sort(list.begin(), list.end(),
                     [](const auto &a, const auto &b) {
                       return a.first.size() > b.first.size();
                     });
  return t;
}

std::unique_ptr<antlr4::Token> ArchTokenSource::nextToken() {
  while (true) {
    skipTrivia();
    if (pos >= text.size())
      return make(antlr4::Token::EOF, "<EOF>");
    size_t start = pos, startLine = line, startCol = col;
    char c = text[pos];
    if (isIdentStart(c)) {
      while (pos < text.size() && isIdentPart(text[pos]))
        advance();
      std::string word(text.substr(start, pos - start));
      auto kw = tab->keywords.find(word);
      size_t type = kw != tab->keywords.end()
                        ? kw->second
                        : static_cast<size_t>(ArchParser::ID);
      return make(type, std::move(word), startLine, startCol);
    }
    if (isDigit(c))
      return number(startLine, startCol);
    if (c == '"')
      return string(start, startLine, startCol);
    // Longest punctuation match (candidates by first character, longest
    // first).
    for (const auto &[p, type] :
         tab->punctuation[static_cast<unsigned char>(c)])
      if (text.compare(pos, p.size(), p) == 0) {
        for (size_t k = 0; k < p.size(); ++k)
          advance();
        return make(type, p, startLine, startCol);
      }
    // Not a token: report like ANTLR and skip the character.
    size_t len = utf8Length(static_cast<unsigned char>(c));
    std::string bad(text.substr(pos, len));
    if (diags)
      diags->error(SourceRange(locations.loc(startLine, startCol),
                               locations.loc(startLine, startCol + 1)),
                   "token recognition error at: '{}'", bad);
    ++errors;
    advance();
  }
}

void ArchTokenSource::skipTrivia() {
  while (pos < text.size()) {
    char c = text[pos];
    if (c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\f') {
      advance();
    } else if (c == '/' && pos + 1 < text.size() && text[pos + 1] == '/') {
      while (pos < text.size() && text[pos] != '\n' && text[pos] != '\r')
        advance();
    } else if (c == '/' && pos + 1 < text.size() && text[pos + 1] == '*') {
      size_t end = text.find("*/", pos + 2);
      if (end == std::string_view::npos)
        return; // lexed as '/' '*' like ANTLR; the parser reports it
      while (pos < end + 2)
        advance();
    } else {
      return;
    }
  }
}

std::unique_ptr<antlr4::Token> ArchTokenSource::number(size_t l, size_t c) {
  size_t start = pos;
  auto digits = [&]() {
    while (pos < text.size() && isDigit(text[pos]))
      advance();
  };
  auto exponentAt = [&](size_t p) {
    if (p >= text.size() || (text[p] != 'e' && text[p] != 'E'))
      return size_t(0);
    size_t q = p + 1;
    if (q < text.size() && (text[q] == '+' || text[q] == '-'))
      ++q;
    return q < text.size() && isDigit(text[q]) ? q - p : size_t(0);
  };
  digits();
  bool isFloat = false;
  if (pos + 1 < text.size() && text[pos] == '.' && isDigit(text[pos + 1])) {
    advance();
    digits();
    isFloat = true;
  }
  if (size_t e = exponentAt(pos)) {
    for (size_t k = 0; k < e; ++k)
      advance();
    digits();
    isFloat = true;
  }
  return make(
      static_cast<size_t>(isFloat ? ArchParser::FLOAT : ArchParser::INT),
      std::string(text.substr(start, pos - start)), l, c);
}

std::unique_ptr<antlr4::Token> ArchTokenSource::string(size_t start, size_t l,
                                                       size_t c) {
  advance(); // opening quote
  while (pos < text.size()) {
    char ch = text[pos];
    if (ch == '"') {
      advance();
      return make(ArchParser::STRING,
                  std::string(text.substr(start, pos - start)), l, c);
    }
    if (ch == '\n' || ch == '\r')
      break;
    if (ch == '\\') {
      advance();
      if (pos >= text.size() || text[pos] == '\n' || text[pos] == '\r')
        break;
    }
    advance();
  }
  if (diags)
    diags->error(SourceRange(locations.loc(l, c), locations.loc(l, c + 1)),
                 "unterminated string literal");
  ++errors;
  return nextToken();
}

std::unique_ptr<antlr4::Token>
ArchTokenSource::make(size_t type, std::string tokenText, size_t l, size_t c) {
  auto t = std::make_unique<antlr4::CommonToken>(
      std::pair<antlr4::TokenSource *, antlr4::CharStream *>(this, nullptr),
      type, antlr4::Token::DEFAULT_CHANNEL, charIndex, charIndex);
  t->setText(tokenText);
  if (type == antlr4::Token::EOF) {
    l = line;
    c = col;
  }
  t->setLine(l);
  t->setCharPositionInLine(c);
  t->setTokenIndex(tokenCount++);
  return t;
}

} // namespace archc::frontend
