//===- ArchTokenSource.h - Hand-written lexer for Arch.g4 ------*- C++ -*-===//
//
// Private to the front end. This file declares ArchTokenSource, the lexer
// that feeds the generated ArchParser. It is used instead of the generated
// ArchLexer because ANTLR's C++ lexer simulator costs ~1000 instructions per
// character. It produces exactly the generated lexer's tokens (the unit
// tests compare both on every bundled file); keyword and punctuation token
// types come from the generated vocabulary, so grammar edits carry over
// without a list of operators here.
//
//===----------------------------------------------------------------------===//
#ifndef ARCHC_FRONTEND_ANTLR_ARCHTOKENSOURCE_H
#define ARCHC_FRONTEND_ANTLR_ARCHTOKENSOURCE_H

#include "frontend/antlr/TokenLocations.h"
#include "support/Diagnostics.h"

#include "antlr4-runtime.h"

#include <algorithm>
#include <array>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace archc::frontend {

class ArchTokenSource : public antlr4::TokenSource {
public:
  /// Lexes `text`; errors go to `diags` when it is not null (and are always
  /// counted in `errors`).
  ArchTokenSource(std::string_view text, const TokenLocations &locations,
                  DiagnosticEngine *diags,
                  const antlr4::dfa::Vocabulary &vocabulary);

  std::unique_ptr<antlr4::Token> nextToken() override;

  size_t getLine() const override { return line; }
  size_t getCharPositionInLine() override { return col; }
  antlr4::CharStream *getInputStream() override { return nullptr; }
  std::string getSourceName() override { return "arch"; }
  antlr4::TokenFactory<antlr4::CommonToken> *getTokenFactory() override {
    return antlr4::CommonTokenFactory::DEFAULT.get();
  }

  /// Lexical errors so far (unknown characters, unterminated strings).
  unsigned errors = 0;

private:
  /// Keyword and punctuation token types, from the grammar's vocabulary.
  struct Tables {
    std::map<std::string, size_t> keywords;
    /// Punctuation tokens by first character, longest first.
    std::array<std::vector<std::pair<std::string, size_t>>, 256> punctuation;
  };
  static Tables buildTables(const antlr4::dfa::Vocabulary &v);

  /// Moves past one character (a whole UTF-8 sequence). Defined here to be
  /// inlined: it runs once per character.
  void advance() {
    unsigned char c = static_cast<unsigned char>(text[pos]);
    pos += std::min(utf8Length(c), text.size() - pos);
    ++charIndex;
    if (c == '\n') {
      ++line;
      col = 0;
    } else {
      ++col;
    }
  }
  void skipTrivia();
  std::unique_ptr<antlr4::Token> number(size_t l, size_t c);
  std::unique_ptr<antlr4::Token> string(size_t start, size_t l, size_t c);
  std::unique_ptr<antlr4::Token> make(size_t type, std::string tokenText,
                                      size_t l = 0, size_t c = 0);

  std::string_view text;
  const TokenLocations &locations;
  DiagnosticEngine *diags;
  const Tables *tab = nullptr;
  size_t pos = 0, line = 1, col = 0, charIndex = 0, tokenCount = 0;
};

} // namespace archc::frontend

#endif // ARCHC_FRONTEND_ANTLR_ARCHTOKENSOURCE_H
