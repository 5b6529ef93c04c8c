//===- AstCodec.cpp - The AST of one file as bytes ------------------------===//
//
// This file defines the AST layout fingerprint; AstEncoder.cpp and
// AstDecoder.cpp implement encodeFile() and decodeFile(). The encoding is a
// pre-order walk: unsigned numbers are LEB128 varints, signed integers are
// zigzag varints, doubles are their eight IEEE bytes (little-endian),
// strings and lists are a count then their elements, an optional node is a
// tag (0 = absent; for expressions and statements 1 + the kind). A location
// is a varint (line << 1 | has-file) and a varint column.
//
// Every element of a list takes at least one byte, so a count larger than
// the bytes left is rejected before anything is allocated: a corrupt
// encoding cannot make the decoder allocate more than a small multiple of
// its size.
//
//===----------------------------------------------------------------------===//
#include "frontend/AstCodec.h"

#include "support/ContentHash.h"

#include <bit>
#include <limits>

namespace archc::ast {

namespace {

//===----------------------------------------------------------------------===//
// Layout fingerprint
//===----------------------------------------------------------------------===//

// Every node type the encoding covers, with its size under libstdc++ on
// x86-64.
#define ARCHC_AST_NODE_TYPES(X)                                                \
  X(TypeRef, 72)                                                               \
  X(IntExpr, 48)                                                               \
  X(FloatExpr, 48)                                                             \
  X(StringExpr, 72)                                                            \
  X(BoolExpr, 40)                                                              \
  X(NoneExpr, 40)                                                              \
  X(NameExpr, 72)                                                              \
  X(ListExpr, 64)                                                              \
  X(MemberExpr, 104)                                                           \
  X(Arg, 64)                                                                   \
  X(CallExpr, 72)                                                              \
  X(IndexExpr, 56)                                                             \
  X(ScopeExpr, 104)                                                            \
  X(UnaryExpr, 48)                                                             \
  X(BinaryExpr, 80)                                                            \
  X(InExpr, 64)                                                                \
  X(CondExpr, 64)                                                              \
  X(Param, 72)                                                                 \
  X(FnExpr, 88)                                                                \
  X(Target, 56)                                                                \
  X(AssignStmt, 72)                                                            \
  X(AugAssignStmt, 112)                                                        \
  X(ForStmt, 200)                                                              \
  X(IfStmt, 104)                                                               \
  X(ReturnStmt, 64)                                                            \
  X(ErrorStmt, 72)                                                             \
  X(CheckStmt, 88)                                                             \
  X(ConfigEntry, 192)                                                          \
  X(DefDecl, 136)                                                              \
  X(ModelInput, 136)                                                           \
  X(ModelDecl, 152)                                                            \
  X(UseDecl, 136)                                                              \
  X(ArchDecl, 488)                                                             \
  X(ImportDecl, 56)                                                            \
  X(File, 80)

constexpr size_t kNodeSizes[] = {
#define ARCHC_NODE_SIZE(T, N) sizeof(T),
    ARCHC_AST_NODE_TYPES(ARCHC_NODE_SIZE)
#undef ARCHC_NODE_SIZE
};

#if defined(__GLIBCXX__) && defined(__x86_64__)
// A reminder at compile time where the sizes are known: a node whose size
// changed has probably gained or lost a field, which encodeFile/decodeFile
// and the AST dump of the unit tests (tests/unit/AstDump.h) must handle;
// then bump kCodecVersion and the size above. Elsewhere the fingerprint
// alone keeps a snapshot of another AST layout from being read.
#define ARCHC_CHECK_NODE_SIZE(T, N)                                            \
  static_assert(sizeof(T) == N,                                                \
                "ast::" #T " changed: update frontend/AstCodec.cpp and "       \
                "tests/unit/AstDump.h");
ARCHC_AST_NODE_TYPES(ARCHC_CHECK_NODE_SIZE)
#undef ARCHC_CHECK_NODE_SIZE
#endif

} // namespace

uint32_t astLayoutFingerprint() {
  uint64_t words[std::size(kNodeSizes)];
  for (size_t i = 0; i < std::size(kNodeSizes); ++i)
    words[i] = kNodeSizes[i];
  uint64_t h = contentHash(
      std::string_view(reinterpret_cast<const char *>(words), sizeof(words)));
  return static_cast<uint32_t>(h ^ (h >> 32));
}

} // namespace archc::ast
