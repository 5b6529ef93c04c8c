//===- AlibiSlopes.cpp - ALiBi head slopes --------------------------------===//
//
// This file implements alibiSlopes(). Hugging Face computes the bases in
// float32 and raises them to integer powers in float32; the powers here are
// taken in double from the same float32 bases and rounded once.
//
//===----------------------------------------------------------------------===//
#include "emit/lowering/AlibiSlopes.h"

#include "support/FloatConvert.h"

#include <algorithm>
#include <cmath>

namespace archc {

std::vector<float> alibiSlopes(int64_t heads, bool bf16) {
  std::vector<float> out;
  if (heads <= 0)
    return out;
  int64_t closest = 1;
  while (closest * 2 <= heads)
    closest *= 2;
  // base = 2^(-(2^-(log2(c) - 3))) = 2^(-8 / c).
  auto baseOf = [](int64_t c) {
    return static_cast<float>(std::pow(
        2.0, -std::pow(2.0, -(std::log2(static_cast<double>(c)) - 3))));
  };
  double base = baseOf(closest);
  for (int64_t k = 1; k <= closest; ++k)
    out.push_back(static_cast<float>(std::pow(base, static_cast<double>(k))));
  if (closest != heads) {
    double extra = baseOf(2 * closest);
    int64_t remaining = std::min(closest, heads - closest);
    for (int64_t k = 1; k < 1 + 2 * remaining; k += 2)
      out.push_back(
          static_cast<float>(std::pow(extra, static_cast<double>(k))));
  }
  if (bf16)
    for (float &s : out)
      s = bf16ToFloat(floatToBf16(s));
  return out;
}

} // namespace archc
