//===- TokenLocations.h - ANTLR token positions to SourceLocs ---*- C++ -*-===//
//
// Private to the front end (frontend/antlr/ is the only place that sees
// ANTLR types). This file defines TokenLocations, which converts ANTLR's
// (line, character column) positions of tokens and rule contexts into
// archc's (line, byte column) SourceLocs and SourceRanges.
//
//===----------------------------------------------------------------------===//
#ifndef ARCHC_FRONTEND_ANTLR_TOKENLOCATIONS_H
#define ARCHC_FRONTEND_ANTLR_TOKENLOCATIONS_H

#include "support/SourceMgr.h"

#include "antlr4-runtime.h"

#include <cstdint>
#include <vector>

namespace archc::frontend {

/// The length of the UTF-8 sequence that starts with byte `c`.
inline size_t utf8Length(unsigned char c) {
  return c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : 4;
}

/// Converts ANTLR's (line, char column) to our (line, byte column).
class TokenLocations {
public:
  TokenLocations(uint32_t fileId, const SourceMgr &sm)
      : fileId(fileId), sm(sm) {}

  SourceLoc loc(size_t line, size_t charCol) const {
    // Lines are checked once for non-ASCII bytes; on ASCII lines characters
    // are bytes.
    if (line < asciiLine.size() && asciiLine[line] == 1)
      return {fileId, static_cast<uint32_t>(line),
              static_cast<uint32_t>(charCol + 1)};
    std::string_view text = sm.getLine(fileId, static_cast<uint32_t>(line));
    if (line >= asciiLine.size())
      asciiLine.resize(line + 1, 0);
    if (asciiLine[line] == 0) {
      bool ascii = true;
      for (char ch : text)
        ascii &= static_cast<unsigned char>(ch) < 0x80;
      asciiLine[line] = ascii ? 1 : 2;
      if (ascii)
        return {fileId, static_cast<uint32_t>(line),
                static_cast<uint32_t>(charCol + 1)};
    }
    size_t byte = 0, chars = 0;
    while (byte < text.size() && chars < charCol) {
      byte += utf8Length(static_cast<unsigned char>(text[byte]));
      ++chars;
    }
    if (chars < charCol)
      byte += charCol - chars;
    return {fileId, static_cast<uint32_t>(line),
            static_cast<uint32_t>(byte + 1)};
  }

  SourceLoc begin(antlr4::Token *t) const {
    return loc(t->getLine(), t->getCharPositionInLine());
  }
  SourceLoc end(antlr4::Token *t) const {
    if (t->getType() == antlr4::Token::EOF)
      return begin(t);
    // Tokens never span lines except block comments and strings (which
    // cannot contain newlines), so the end is on the same line.
    size_t len = 0;
    for (char c : t->getText())
      if ((static_cast<unsigned char>(c) & 0xC0) != 0x80)
        ++len;
    return loc(t->getLine(), t->getCharPositionInLine() + len);
  }
  SourceRange range(antlr4::Token *t) const { return {begin(t), end(t)}; }
  SourceRange range(antlr4::ParserRuleContext *ctx) const {
    antlr4::Token *stop = ctx->getStop() ? ctx->getStop() : ctx->getStart();
    if (stop->getTokenIndex() < ctx->getStart()->getTokenIndex())
      stop = ctx->getStart();
    return {begin(ctx->getStart()), end(stop)};
  }

  uint32_t getFileId() const { return fileId; }

private:
  uint32_t fileId;
  const SourceMgr &sm;
  mutable std::vector<uint8_t> asciiLine; ///< 0 unknown, 1 ASCII, 2 not
};

} // namespace archc::frontend

#endif // ARCHC_FRONTEND_ANTLR_TOKENLOCATIONS_H
