//===- ContentHash.cpp - A fast 64-bit hash of byte strings ---------------===//
//
// This file implements contentHash(): each 64-bit word is mixed with a
// multiply and xor-shifts into a running state that is itself multiplied,
// then the state is finalised with the length so that inputs differing only
// in trailing zero bytes differ.
//
//===----------------------------------------------------------------------===//
#include "support/ContentHash.h"

#include <bit>
#include <cstring>

namespace archc {

namespace {
constexpr uint64_t kMulWord = 0x9fb21c651e98df25ULL;
constexpr uint64_t kMulState = 0xd6e8feb86659fd93ULL;
constexpr uint64_t kSeed = 0x243f6a8885a308d3ULL; // digits of pi

uint64_t loadWord(const char *p, size_t n) {
  unsigned char b[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  std::memcpy(b, p, n);
  uint64_t w = 0;
  if constexpr (std::endian::native == std::endian::little) {
    std::memcpy(&w, b, 8);
  } else {
    for (int i = 7; i >= 0; --i)
      w = (w << 8) | b[i];
  }
  return w;
}

uint64_t mixWord(uint64_t w) {
  w *= kMulWord;
  w ^= w >> 32;
  return w;
}
} // namespace

uint64_t contentHash(std::string_view bytes) {
  const char *p = bytes.data();
  size_t n = bytes.size();
  uint64_t h = kSeed;
  for (; n >= 8; p += 8, n -= 8)
    h = (h ^ mixWord(loadWord(p, 8))) * kMulState;
  if (n)
    h = (h ^ mixWord(loadWord(p, n))) * kMulState;
  h ^= bytes.size() * kMulWord;
  h ^= h >> 29;
  h *= kMulState;
  h ^= h >> 32;
  return h;
}

} // namespace archc
