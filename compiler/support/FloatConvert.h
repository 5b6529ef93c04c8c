//===- FloatConvert.h - f32 <-> f16 / bf16 conversions ----------*- C++ -*-===//
//
// This file provides the scalar conversions between IEEE float32, float16
// and bfloat16 (round to nearest even) used when binding weights and
// building constants.
//
//===----------------------------------------------------------------------===//
#ifndef ARCHC_EMIT_FLOATCONVERT_H
#define ARCHC_EMIT_FLOATCONVERT_H

#include <cstdint>
#include <cstring>

namespace archc {

inline float halfToFloat(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ff;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {
      // Subnormal: normalise.
      int e = -1;
      do {
        ++e;
        mant <<= 1;
      } while ((mant & 0x400) == 0);
      mant &= 0x3ff;
      bits = sign | (static_cast<uint32_t>(127 - 15 - e) << 23) | (mant << 13);
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000 | (mant << 13);
  } else {
    bits = sign | ((exp - 15 + 127) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

inline uint16_t floatToHalf(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000;
  uint32_t rawExp = (x >> 23) & 0xff;
  uint32_t mant = x & 0x7fffff;
  if (rawExp == 0xff)
    return static_cast<uint16_t>(sign | 0x7c00 | (mant ? 0x200 : 0));
  int32_t exp = static_cast<int32_t>(rawExp) - 127 + 15;
  if (exp >= 31)
    return static_cast<uint16_t>(sign | 0x7c00);
  if (exp <= 0) {
    if (exp < -10)
      return static_cast<uint16_t>(sign);
    mant |= 0x800000;
    uint32_t shift = static_cast<uint32_t>(14 - exp);
    uint32_t half = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1);
    uint32_t mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1)))
      ++half;
    return static_cast<uint16_t>(sign | half);
  }
  uint32_t half = sign | (static_cast<uint32_t>(exp) << 10) | (mant >> 13);
  uint32_t rem = mant & 0x1fff;
  if (rem > 0x1000 || (rem == 0x1000 && (half & 1)))
    ++half; // may carry into the exponent, which is the correct rounding
  return static_cast<uint16_t>(half);
}

inline float bf16ToFloat(uint16_t h) {
  uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

inline uint16_t floatToBf16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7fffffff) > 0x7f800000)
    return static_cast<uint16_t>((x >> 16) | 0x40);
  uint32_t rounding = 0x7fff + ((x >> 16) & 1);
  return static_cast<uint16_t>((x + rounding) >> 16);
}

} // namespace archc

#endif // ARCHC_EMIT_FLOATCONVERT_H
