//===- Quantize.cpp - Block round-to-nearest weight quantization ----------===//
//
// This file implements the row quantizer described in Quantize.h. Codes are
// packed along the inputs: at 4 bits input 2j of a block is the low nibble
// of byte j, input 2j + 1 the high nibble; at 8 bits one byte per input.
// Packed zero points follow the same rule over the blocks of a row.
//
//===----------------------------------------------------------------------===//
#include "emit/weights/Quantize.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

namespace archc {

namespace {
void putCode(uint8_t *bytes, int bits, int64_t index, unsigned code) {
  if (bits == 8) {
    bytes[index] = static_cast<uint8_t>(code);
    return;
  }
  uint8_t &b = bytes[index / 2];
  if (index % 2 == 0)
    b = static_cast<uint8_t>((b & 0xF0) | (code & 0x0F));
  else
    b = static_cast<uint8_t>((b & 0x0F) | ((code & 0x0F) << 4));
}

unsigned getCode(const uint8_t *bytes, int bits, int64_t index) {
  if (bits == 8)
    return bytes[index];
  uint8_t b = bytes[index / 2];
  return index % 2 == 0 ? (b & 0x0F) : (b >> 4);
}
} // namespace

void quantizeRow(const float *row, const ir::QuantLayout &l,
                 float (*scaleRound)(float), uint8_t *codes, float *scales,
                 uint8_t *zeroPoints) {
  const int64_t nb = l.blocksPerRow();
  const unsigned maxCode = (1u << l.bits) - 1;
  const float mid = static_cast<float>(1u << (l.bits - 1));
  if (zeroPoints)
    std::memset(zeroPoints, 0, static_cast<size_t>(l.zeroPointBytesPerRow()));
  for (int64_t b = 0; b < nb; ++b) {
    int64_t begin = b * l.block, end = std::min(begin + l.block, l.cols);
    float lo = std::numeric_limits<float>::max(), hi = -lo;
    for (int64_t k = begin; k < end; ++k) {
      lo = std::min(lo, row[k]);
      hi = std::max(hi, row[k]);
    }
    float scale;
    unsigned zp;
    if (l.symmetric) {
      float m = std::fabs(hi) > std::fabs(lo) ? hi : lo;
      scale = scaleRound(m / -mid);
      zp = static_cast<unsigned>(mid);
    } else {
      lo = std::min(lo, 0.0f);
      hi = std::max(hi, 0.0f);
      float exact = (hi - lo) / static_cast<float>(maxCode);
      scale = scaleRound(exact);
      // MLAS derives the zero point from the unrounded scale.
      float z = exact != 0.0f ? -lo / exact : 0.0f;
      zp = z <= 0.0f ? 0u
           : z >= static_cast<float>(maxCode)
               ? maxCode
               : static_cast<unsigned>(std::round(z));
      putCode(zeroPoints, l.bits, b, zp);
    }
    scales[b] = scale;
    float inv = scale != 0.0f ? 1.0f / scale : 0.0f;
    uint8_t *blob = codes + b * l.blobBytes();
    for (int64_t k = begin; k < begin + l.block; ++k) {
      unsigned code = zp;
      if (k < end) {
        float v = std::round(row[k] * inv + static_cast<float>(zp));
        code = static_cast<unsigned>(
            std::clamp(v, 0.0f, static_cast<float>(maxCode)));
      }
      putCode(blob, l.bits, k - begin, code);
    }
  }
}

void dequantizeRow(const uint8_t *codes, const float *scales,
                   const uint8_t *zeroPoints, const ir::QuantLayout &l,
                   float *out) {
  const unsigned mid = 1u << (l.bits - 1);
  for (int64_t k = 0; k < l.cols; ++k) {
    int64_t b = k / l.block;
    unsigned zp = zeroPoints ? getCode(zeroPoints, l.bits, b) : mid;
    unsigned code = getCode(codes + b * l.blobBytes(), l.bits, k % l.block);
    out[k] = (static_cast<float>(code) - static_cast<float>(zp)) * scales[b];
  }
}

} // namespace archc
