//===- Parser.cpp - .arch front end driver ----------------------*- C++ -*-===//
//
// This file implements parseArchFile(): UTF-8 validation, lexing with the
// hand-written ArchTokenSource, the nesting guard, the two-stage ANTLR parse
// (SLL, then LL with error reporting) with syntax errors forwarded to the
// DiagnosticEngine, and the AST builder. The ANTLR-facing parts live in
// frontend/antlr/; no ANTLR type appears in Parser.h.
//
//===----------------------------------------------------------------------===//
#include "frontend/Parser.h"

#include "frontend/antlr/ArchTokenSource.h"
#include "frontend/antlr/AstBuilder.h"
#include "frontend/antlr/NestingGuard.h"
#include "frontend/antlr/TokenLocations.h"

#include "ArchParser.h"
#include "antlr4-runtime.h"

namespace archc {
namespace {

using frontend::TokenLocations;
using grammar::ArchParser;

/// Forwards parser syntax errors to the DiagnosticEngine.
class SyntaxErrorListener : public antlr4::BaseErrorListener {
public:
  SyntaxErrorListener(const TokenLocations &m, DiagnosticEngine &d)
      : locations(m), diags(d) {}

  void syntaxError(antlr4::Recognizer *, antlr4::Token *offending, size_t line,
                   size_t charPositionInLine, const std::string &msg,
                   std::exception_ptr) override {
    SourceLoc b = locations.loc(line, charPositionInLine);
    SourceRange r(b, b);
    if (offending && offending->getType() != antlr4::Token::EOF)
      r = locations.range(offending);
    std::string text = msg;
    // ANTLR spells end of input "<EOF>"; say it in words.
    size_t pos;
    while ((pos = text.find("<EOF>")) != std::string::npos)
      text.replace(pos, 5, "end of file");
    ++count;
    if (count <= 20)
      diags.error(r, "{}", text);
  }
  unsigned count = 0;

private:
  const TokenLocations &locations;
  DiagnosticEngine &diags;
};

/// Returns the byte offset of the first invalid UTF-8 sequence, or npos.
size_t findInvalidUtf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c == 0)
      return i;
    size_t len;
    if (c < 0x80)
      len = 1;
    else if ((c >> 5) == 6)
      len = 2;
    else if ((c >> 4) == 14)
      len = 3;
    else if ((c >> 3) == 30)
      len = 4;
    else
      return i;
    if (i + len > s.size())
      return i;
    for (size_t k = 1; k < len; ++k)
      if ((static_cast<unsigned char>(s[i + k]) >> 6) != 2)
        return i;
    i += len;
  }
  return std::string_view::npos;
}

/// Parses `tokens` into a parse tree; null when a syntax error was
/// reported through `listener`.
ArchParser::FileContext *parseTokens(ArchParser &parser,
                                     antlr4::CommonTokenStream &tokens,
                                     SyntaxErrorListener &listener) {
  // Two-stage parse: the fast SLL prediction mode with a bail-out error
  // strategy handles every valid file; only when it fails is the input
  // re-parsed in full LL mode with normal error reporting.
  parser.setTokenStream(&tokens);
  parser.removeErrorListeners();
  parser.getInterpreter<antlr4::atn::ParserATNSimulator>()->setPredictionMode(
      antlr4::atn::PredictionMode::SLL);
  parser.setErrorHandler(std::make_shared<antlr4::BailErrorStrategy>());
  ArchParser::FileContext *tree = nullptr;
  try {
    tree = parser.file();
  } catch (const antlr4::ParseCancellationException &) {
    tree = nullptr;
  }
  if (!tree) {
    tokens.seek(0);
    parser.reset();
    parser.addErrorListener(&listener);
    parser.setErrorHandler(std::make_shared<antlr4::DefaultErrorStrategy>());
    parser.getInterpreter<antlr4::atn::ParserATNSimulator>()->setPredictionMode(
        antlr4::atn::PredictionMode::LL);
    tree = parser.file();
  }
  return listener.count ? nullptr : tree;
}

} // namespace

std::vector<LexedToken> lexArch(const std::string &text) {
  SourceMgr sm;
  uint32_t id = sm.addBuffer("lex.arch", text);
  TokenLocations locations(id, sm);
  antlr4::CommonTokenStream tokens(nullptr);
  ArchParser parser(&tokens);
  frontend::ArchTokenSource lexer(text, locations, nullptr,
                                  parser.getVocabulary());
  std::vector<LexedToken> out;
  while (true) {
    auto t = lexer.nextToken();
    out.push_back(
        {t->getType(), t->getText(), t->getLine(), t->getCharPositionInLine()});
    if (t->getType() == antlr4::Token::EOF)
      return out;
  }
}

std::unique_ptr<ast::File> parseArchFile(uint32_t fileId, const SourceMgr &sm,
                                         DiagnosticEngine &diags) {
  std::string_view text = sm.getText(fileId);
  size_t bad = findInvalidUtf8(text);
  if (bad != std::string_view::npos) {
    SourceLoc loc = sm.getLoc(fileId, bad);
    diags.error(SourceRange(loc, loc),
                "file is not valid UTF-8 text (byte 0x{:02x} at offset {})",
                static_cast<unsigned char>(text[bad]), bad);
    return nullptr;
  }
  TokenLocations locations(fileId, sm);
  SyntaxErrorListener listener(locations, diags);
  try {
    // The parser is created first: its vocabulary gives the lexer the
    // keyword and punctuation token types.
    antlr4::CommonTokenStream tokens(nullptr);
    ArchParser parser(&tokens);
    frontend::ArchTokenSource lexer(text, locations, &diags,
                                    parser.getVocabulary());
    tokens.setTokenSource(&lexer);
    tokens.fill();
    if (lexer.errors)
      return nullptr;
    if (!frontend::checkNesting(tokens, parser.getVocabulary(), locations,
                                diags))
      return nullptr;
    ArchParser::FileContext *tree = parseTokens(parser, tokens, listener);
    if (!tree)
      return nullptr;
    unsigned before = diags.getNumErrors();
    auto file = frontend::buildAst(tree, parser, locations, diags);
    if (diags.getNumErrors() != before)
      return nullptr;
    return file;
  } catch (const frontend::InternalParseError &e) {
    SourceRange r = e.range.begin.fileId == fileId
                        ? e.range
                        : SourceRange(SourceLoc{fileId, 1, 1});
    diags.error(r, "internal parser failure: {}", e.what());
    return nullptr;
  } catch (const std::exception &e) {
    diags.error(SourceRange(SourceLoc{fileId, 1, 1}),
                "internal parser failure: {}", e.what());
    return nullptr;
  }
}

} // namespace archc
