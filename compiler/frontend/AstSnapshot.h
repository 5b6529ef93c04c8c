//===- AstSnapshot.h - Pre-parsed ASTs of the bundled files -----*- C++ -*-===//
//
// This file declares AstSnapshot, a file holding the ASTs of archc's bundled
// .arch files (archs/ and archs/std/), written at build time by
// archc-ast-snapshot, and AstSnapshotWriter, which makes one. Each entry is
// keyed by the file's path relative to the bundled directory and by the
// hash and size of the text it was parsed from; a file whose text differs
// is not found, so the snapshot can only save time, never change a result.
//
// Layout (integers little-endian; "varint" is LEB128):
//
//   header  "ARCHCAST", u32 container version, u32 ast::kCodecVersion,
//           u32 ast::astLayoutFingerprint(), u32 entry count,
//           u64 index size, u64 contentHash(index)
//   index   per entry: varint path length, path, u64 contentHash(text),
//           varint text size, varint AST offset (from the end of the
//           index), varint AST size, u64 contentHash(AST bytes)
//   ASTs    the entries' ast::encodeFile bytes
//
// Reading checks the header and the index checksum once; an entry's AST
// checksum is checked when that entry is used.
//
//===----------------------------------------------------------------------===//
#ifndef ARCHC_FRONTEND_ASTSNAPSHOT_H
#define ARCHC_FRONTEND_ASTSNAPSHOT_H

#include "frontend/Ast.h"

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace archc {

/// The version of the snapshot's container layout (header and index).
constexpr uint32_t kAstSnapshotVersion = 1;

/// A snapshot read into memory.
class AstSnapshot {
public:
  /// Takes the bytes of a snapshot. Returns null and sets `error` when they
  /// are not a snapshot this build can read (magic, versions, AST layout,
  /// sizes, index checksum).
  static std::unique_ptr<AstSnapshot> fromBytes(std::string bytes,
                                                std::string &error);
  /// Reads the snapshot file `path` (fromBytes of its contents).
  static std::unique_ptr<AstSnapshot> open(const std::string &path,
                                           std::string &error);

  /// Why find() returned null.
  enum class Miss {
    NoEntry,     ///< no entry for this path
    TextDiffers, ///< an entry, made from another text
    CorruptEntry ///< an entry whose AST bytes fail their checksum or
                 ///< do not decode
  };

  /// The AST of the bundled file `relativePath` ('/'-separated, relative to
  /// the bundled directory) if the snapshot holds it for exactly `text`,
  /// with every location in `fileId`. Otherwise null, and `miss` (when
  /// given) says why.
  std::unique_ptr<ast::File> find(std::string_view relativePath,
                                  std::string_view text, uint32_t fileId,
                                  Miss *miss = nullptr) const;

  /// The relative paths of the entries, in the snapshot's order.
  std::vector<std::string> getPaths() const;

private:
  struct Entry {
    std::string_view path;
    uint64_t textHash = 0;
    uint64_t textSize = 0;
    std::string_view ast;
    uint64_t astHash = 0;
  };
  std::string bytes;
  std::vector<Entry> entries;
};

/// Builds the bytes of a snapshot.
class AstSnapshotWriter {
public:
  /// Adds `file`, parsed from `text`, under `relativePath`. Returns false
  /// (adding nothing) when the file cannot be encoded (ast::encodeFile) or
  /// the path was added before.
  bool add(const std::string &relativePath, std::string_view text,
           const ast::File &file);
  /// The snapshot holding every file added.
  std::string finish() const;

private:
  struct Entry {
    std::string path;
    uint64_t textHash;
    uint64_t textSize;
    std::string ast;
  };
  std::vector<Entry> entries;
};

} // namespace archc

#endif // ARCHC_FRONTEND_ASTSNAPSHOT_H
