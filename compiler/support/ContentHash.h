//===- ContentHash.h - A fast 64-bit hash of byte strings -------*- C++ -*-===//
//
// This file declares contentHash(), the 64-bit hash archc uses to recognise
// file contents and to checksum its own cache files (the AST snapshot). It
// is not cryptographic: it detects edits and corruption, not tampering.
//
//===----------------------------------------------------------------------===//
#ifndef ARCHC_SUPPORT_CONTENTHASH_H
#define ARCHC_SUPPORT_CONTENTHASH_H

#include <cstdint>
#include <string_view>

namespace archc {

/// A 64-bit hash of `bytes`, eight bytes per step (under one instruction a
/// byte). Every bit of the input and its length affect every bit of the
/// result; equal inputs hash equally on every host (the words are read
/// little-endian).
uint64_t contentHash(std::string_view bytes);

} // namespace archc

#endif // ARCHC_SUPPORT_CONTENTHASH_H
