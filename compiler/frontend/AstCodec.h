//===- AstCodec.h - The AST of one file as bytes ----------------*- C++ -*-===//
//
// This file declares the binary encoding of an ast::File that the AST
// snapshot (AstSnapshot.h) stores: every declaration, statement, expression
// and type with every SourceRange, so that a decoded file is the file the
// parser builds from the same text. Locations are stored without their file
// id; decoding gives them the id of the file being loaded.
//
// The decoder trusts nothing: every count and length is checked against the
// bytes left, nesting is bounded, enums and flags are range-checked, and any
// violation yields null rather than a partial AST.
//
//===----------------------------------------------------------------------===//
#ifndef ARCHC_FRONTEND_ASTCODEC_H
#define ARCHC_FRONTEND_ASTCODEC_H

#include "frontend/Ast.h"

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace archc::ast {

/// The version of the encoding. Bump it whenever encodeFile/decodeFile
/// change what they write or read.
constexpr uint32_t kCodecVersion = 4;

/// A fingerprint of the AST node layouts (their sizes) this build was
/// compiled with. A snapshot written by a build whose AST differs is not
/// read, even when kCodecVersion was not bumped.
uint32_t astLayoutFingerprint();

/// The deepest nesting of expressions, statements and types the encoding
/// accepts (deeper files are parsed instead: their encoding fails).
constexpr unsigned kMaxCodecDepth = 2048;

/// Appends the encoding of `file` to `out`. Returns false (leaving `out` as
/// it was) when the file cannot be encoded: a location naming a file other
/// than file.fileId, or nesting deeper than kMaxCodecDepth.
bool encodeFile(const File &file, std::string &out);

/// Decodes a file encoded by encodeFile, giving every valid location (and
/// File::fileId, DefDecl::fileId) the id `fileId`. Returns null when `bytes`
/// is not exactly one well-formed encoding.
std::unique_ptr<File> decodeFile(std::string_view bytes, uint32_t fileId);

} // namespace archc::ast

#endif // ARCHC_FRONTEND_ASTCODEC_H
