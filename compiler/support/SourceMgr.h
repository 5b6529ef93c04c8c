//===- SourceMgr.h - Source buffers and locations ---------------*- C++ -*-===//
//
// This file declares SourceMgr, which owns the text of every file archc reads
// (.arch sources and config.json files), and the SourceLoc/SourceRange types
// every AST node, IR op and diagnostic carries.
//
//===----------------------------------------------------------------------===//
#ifndef ARCHC_SUPPORT_SOURCEMGR_H
#define ARCHC_SUPPORT_SOURCEMGR_H

#include "support/FileRead.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace archc {

/// A position in a file managed by SourceMgr. Lines and columns are 1-based;
/// fileId 0 means "no location".
struct SourceLoc {
  uint32_t fileId = 0;
  uint32_t line = 0;
  uint32_t col = 0;

  bool isValid() const { return fileId != 0; }
  friend bool operator==(const SourceLoc &, const SourceLoc &) = default;
  friend auto operator<=>(const SourceLoc &, const SourceLoc &) = default;
};

/// A half-open range [begin, end) of characters. When end is on another line
/// than begin, carets stop at the end of begin's line.
struct SourceRange {
  SourceLoc begin;
  SourceLoc end;

  SourceRange() = default;
  SourceRange(SourceLoc b, SourceLoc e) : begin(b), end(e) {}
  explicit SourceRange(SourceLoc b) : begin(b), end(b) {}
  bool isValid() const { return begin.isValid(); }
};

/// Owns source buffers and maps locations back to file names and line text.
class SourceMgr {
public:
  /// Reads a regular file of at most `maxBytes` bytes from disk (FileRead.h:
  /// FIFOs and devices are refused without blocking). Returns the new file
  /// id, or 0 and sets `error`.
  uint32_t addFile(const std::string &path, std::string &error,
                   uint64_t maxBytes = kMaxSourceBytes);
  /// Registers an in-memory buffer under `name` (tests, stdin).
  uint32_t addBuffer(std::string name, std::string text);

  /// Returns the id of a file already loaded under this path, or 0.
  uint32_t findFile(const std::string &path) const;

  const std::string &getName(uint32_t fileId) const;
  std::string_view getText(uint32_t fileId) const;
  /// Text of one line (1-based), without the newline.
  std::string_view getLine(uint32_t fileId, uint32_t line) const;
  uint32_t getNumLines(uint32_t fileId) const;
  /// Converts a byte offset into a (line, col) location.
  SourceLoc getLoc(uint32_t fileId, size_t offset) const;

  size_t getNumFiles() const { return files.size(); }

private:
  struct File {
    std::string name;
    std::string text;
    std::vector<size_t> lineStarts;
  };
  std::vector<std::unique_ptr<File>> files;
  const File *get(uint32_t id) const;
};

} // namespace archc

#endif // ARCHC_SUPPORT_SOURCEMGR_H
