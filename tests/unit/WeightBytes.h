//===- WeightBytes.h - Byte-level helpers for weight tests ------*- C++ -*-===//
//
// Reference transforms of raw tensor bytes that the weight writer's tests
// compare its output with.
//
//===----------------------------------------------------------------------===//
#ifndef ARCHC_TESTS_WEIGHTBYTES_H
#define ARCHC_TESTS_WEIGHTBYTES_H

#include <cstdint>
#include <cstring>
#include <string>

namespace archc::test {

/// The bytes of [rows, cols] `in` (elements of `es` bytes) as [cols, rows].
inline std::string transpose(const std::string &in, uint64_t rows,
                             uint64_t cols, size_t es) {
  std::string out(in.size(), '\0');
  for (uint64_t r = 0; r < rows; ++r)
    for (uint64_t c = 0; c < cols; ++c)
      std::memcpy(&out[(c * rows + r) * es], &in[(r * cols + c) * es], es);
  return out;
}

} // namespace archc::test

#endif // ARCHC_TESTS_WEIGHTBYTES_H
