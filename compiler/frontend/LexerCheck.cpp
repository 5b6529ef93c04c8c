//===- LexerCheck.cpp - The generated ANTLR lexer, for tests --------------===//
//
// This file lexes with the ArchLexer that ANTLR generates from Arch.g4. archc
// itself uses a hand-written lexer for speed; the unit tests compare both
// on every bundled file. Kept in its own library so the generated lexer
// (and its start-up ATN deserialisation) is not linked into archc.
//
//===----------------------------------------------------------------------===//
#include "frontend/Parser.h"

#include "ArchLexer.h"
#include "antlr4-runtime.h"

namespace archc {

std::vector<LexedToken> lexArchWithGeneratedLexer(const std::string &text) {
  antlr4::ANTLRInputStream input(text.data(), text.size());
  grammar::ArchLexer lexer(&input);
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

} // namespace archc
