//===- WeightElements.h - Element access for the weight writer --*- C++ -*-===//
//
// This file holds the helpers WeightPlan's parts share (internal to
// emit/weights): element counts, loading and storing one element of a
// dtype, block transposes, and the row quantizer that fills a weight's
// scales and zero points.
//
//===----------------------------------------------------------------------===//
#ifndef ARCHC_EMIT_WEIGHTS_WEIGHTELEMENTS_H
#define ARCHC_EMIT_WEIGHTS_WEIGHTELEMENTS_H

#include "checkpoint/Safetensors.h"
#include "emit/weights/Quantize.h"
#include "ir/IR.h"
#include "support/FloatConvert.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

namespace archc::weights {

constexpr uint64_t kChunkElems = 1 << 20;

inline uint64_t numElements(const std::vector<int64_t> &shape) {
  uint64_t n = 1;
  for (int64_t d : shape)
    n *= static_cast<uint64_t>(d);
  return n;
}

inline int64_t loadInt(const uint8_t *p, StDType t) {
  switch (t) {
  case StDType::I64: {
    int64_t v;
    std::memcpy(&v, p, 8);
    return v;
  }
  case StDType::I32: {
    int32_t v;
    std::memcpy(&v, p, 4);
    return v;
  }
  case StDType::I16: {
    int16_t v;
    std::memcpy(&v, p, 2);
    return v;
  }
  case StDType::I8:
    return static_cast<int8_t>(*p);
  default:
    return *p;
  }
}

inline float loadFloat(const uint8_t *p, ir::DType t) {
  uint16_t h;
  switch (t) {
  case ir::DType::F16:
    std::memcpy(&h, p, 2);
    return halfToFloat(h);
  case ir::DType::BF16:
    std::memcpy(&h, p, 2);
    return bf16ToFloat(h);
  default: {
    float f;
    std::memcpy(&f, p, 4);
    return f;
  }
  }
}

inline void storeFloat(uint8_t *p, float f, ir::DType t) {
  switch (t) {
  case ir::DType::F16: {
    uint16_t h = floatToHalf(f);
    std::memcpy(p, &h, 2);
    return;
  }
  case ir::DType::BF16: {
    uint16_t h = floatToBf16(f);
    std::memcpy(p, &h, 2);
    return;
  }
  default:
    std::memcpy(p, &f, 4);
  }
}

/// Stores `n` floats as `t` at `p`; returns the first index whose finite
/// value became infinite (beyond f16's 65504 or bf16's range), or `n`.
inline uint64_t storeFloats(uint8_t *p, const float *in, uint64_t n,
                            ir::DType t) {
  uint64_t bad = n;
  switch (t) {
  case ir::DType::F16:
    for (uint64_t i = 0; i < n; ++i) {
      uint16_t h = floatToHalf(in[i]);
      std::memcpy(p + i * 2, &h, 2);
      if ((h & 0x7FFF) == 0x7C00 && bad == n && std::isfinite(in[i]))
        bad = i;
    }
    return bad;
  case ir::DType::BF16:
    for (uint64_t i = 0; i < n; ++i) {
      uint16_t h = floatToBf16(in[i]);
      std::memcpy(p + i * 2, &h, 2);
      if ((h & 0x7FFF) == 0x7F80 && bad == n && std::isfinite(in[i]))
        bad = i;
    }
    return bad;
  default:
    std::memcpy(p, in, n * 4);
    return n;
  }
}

/// The largest finite value of a float dtype, for messages.
inline const char *largestFinite(ir::DType t) {
  return t == ir::DType::F16 ? "65504" : "3.39e38";
}

inline void storeInt(uint8_t *p, int64_t v, ir::DType t) {
  switch (t) {
  case ir::DType::I64:
    std::memcpy(p, &v, 8);
    return;
  case ir::DType::I32: {
    int32_t x = static_cast<int32_t>(v);
    std::memcpy(p, &x, 4);
    return;
  }
  default:
    *p = static_cast<uint8_t>(v);
  }
}

/// Columns c0 .. c0 + n of the row-major [rows, cols] `in` as the rows of
/// `out` ([n, rows]), in 32 x 32 tiles so both sides stay in cache.
template <typename T>
inline void transposeBlock(const uint8_t *in, uint8_t *out, uint64_t rows,
                           uint64_t cols, uint64_t c0, uint64_t n) {
  constexpr uint64_t kTile = 32;
  for (uint64_t rt = 0; rt < rows; rt += kTile)
    for (uint64_t ct = 0; ct < n; ct += kTile) {
      uint64_t re = std::min(rows, rt + kTile), ce = std::min(n, ct + kTile);
      for (uint64_t r = rt; r < re; ++r)
        for (uint64_t c = ct; c < ce; ++c) {
          T v;
          std::memcpy(&v, in + (r * cols + c0 + c) * sizeof(T), sizeof(T));
          std::memcpy(out + (c * rows + r) * sizeof(T), &v, sizeof(T));
        }
    }
}

inline float roundHalf(float f) { return halfToFloat(floatToHalf(f)); }
inline float roundBf16(float f) { return bf16ToFloat(floatToBf16(f)); }
inline float roundNone(float f) { return f; }

/// Scales are stored in the activation dtype (MatMulNBits' T1).
inline ir::DType scaleDType(const ir::TensorType &t) {
  return t.dtype == ir::DType::F16 || t.dtype == ir::DType::BF16
             ? t.dtype
             : ir::DType::F32;
}

/// The scales and zero points of a quantized weight of type `type`, sized
/// for its whole layout and filled row by row (row r of its experts x rows).
class RowQuantizer {
public:
  RowQuantizer(const ir::QuantLayout &layout, const ir::TensorType &type,
               std::vector<uint8_t> &scales, std::vector<uint8_t> &zeroPoints)
      : l(layout), sdt(scaleDType(type)), scaleSize(ir::dtypeBits(sdt) / 8),
        round(sdt == ir::DType::F16    ? roundHalf
              : sdt == ir::DType::BF16 ? roundBf16
                                       : roundNone),
        scales(scales), zeroPoints(zeroPoints),
        rowScales(static_cast<size_t>(l.blocksPerRow())) {
    scales.assign(
        static_cast<size_t>(l.experts) * l.scalesPerMatrix() * scaleSize, 0);
    zeroPoints.assign(
        static_cast<size_t>(l.experts * l.rows * l.zeroPointBytesPerRow()), 0);
  }

  /// Bytes of one row's codes.
  uint64_t codeBytes() const {
    return static_cast<uint64_t>(l.blocksPerRow() * l.blobBytes());
  }

  /// Quantizes row `r` (`l.cols` floats) into `codes` (codeBytes()), its
  /// scales and zero points. False when a value is not finite
  /// (`nonFiniteColumn`) or a scale overflows the scale dtype (f16 scales of
  /// weights beyond ~4.6e5; `overflowBlock`).
  bool quantize(const float *row, uint64_t r, uint8_t *codes) {
    const int64_t nb = l.blocksPerRow();
    // Sources are checked as they stream; a non-finite value reaching the
    // quantizer is still refused (it would become -8 x scale).
    for (int64_t k = 0; k < l.cols; ++k)
      if (!std::isfinite(row[k])) {
        nonFiniteColumn = k;
        return false;
      }
    quantizeRow(row, l, round, codes, rowScales.data(),
                l.symmetric ? nullptr
                            : zeroPoints.data() + r * l.zeroPointBytesPerRow());
    uint64_t bad =
        storeFloats(scales.data() + r * nb * scaleSize, rowScales.data(),
                    static_cast<uint64_t>(nb), sdt);
    for (int64_t b = 0; b < nb && bad == static_cast<uint64_t>(nb); ++b)
      if (!std::isfinite(rowScales[b]))
        bad = static_cast<uint64_t>(b);
    if (bad < static_cast<uint64_t>(nb)) {
      overflowBlock = static_cast<int64_t>(bad);
      return false;
    }
    return true;
  }
  /// The block of the last row whose scale overflowed, or the column of a
  /// non-finite input (-1 when none).
  int64_t overflowBlock = -1, nonFiniteColumn = -1;
  ir::DType scaleType() const { return sdt; }

private:
  const ir::QuantLayout &l;
  ir::DType sdt;
  size_t scaleSize;
  float (*round)(float);
  std::vector<uint8_t> &scales, &zeroPoints;
  std::vector<float> rowScales;
};

} // namespace archc::weights

#endif // ARCHC_EMIT_WEIGHTS_WEIGHTELEMENTS_H
