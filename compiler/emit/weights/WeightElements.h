//===- WeightElements.h - Element access for the weight writer --*- C++ -*-===//
//
// This file holds the helpers WeightPlan's parts share (internal to
// emit/weights): element counts, loading and storing one element of a
// dtype, tile transposes, and the row quantizer.
//
//===----------------------------------------------------------------------===//
#ifndef ARCHC_EMIT_WEIGHTS_WEIGHTELEMENTS_H
#define ARCHC_EMIT_WEIGHTS_WEIGHTELEMENTS_H

#include "checkpoint/Safetensors.h"
#include "emit/weights/Quantize.h"
#include "ir/IR.h"
#include "support/FloatConvert.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#ifdef __SSE2__
#include <emmintrin.h>
#endif

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

/// out[c * outStride + r] = in[r * inStride + c] for the `rows` x `cols`
/// block at `in` (strides in elements of T), in 32 x 32 tiles so that both
/// sides stay in cache. Strides of a power of two bytes put every row of a
/// tile in one cache set: callers pad them (paddedStride).
template <typename T>
inline void transposeTileOf(const uint8_t *in, uint64_t inStride, uint8_t *out,
                            uint64_t outStride, uint64_t rows, uint64_t cols) {
  constexpr uint64_t kTile = 32;
  for (uint64_t rt = 0; rt < rows; rt += kTile)
    for (uint64_t ct = 0; ct < cols; ct += kTile) {
      uint64_t re = std::min(rows, rt + kTile), ce = std::min(cols, ct + kTile);
      for (uint64_t r = rt; r < re; ++r)
        for (uint64_t c = ct; c < ce; ++c) {
          T v;
          std::memcpy(&v, in + (r * inStride + c) * sizeof(T), sizeof(T));
          std::memcpy(out + (c * outStride + r) * sizeof(T), &v, sizeof(T));
        }
    }
}

#ifdef __SSE2__
/// The 8 x 8 block of 16-bit elements at `in` (row stride `is` bytes),
/// transposed to `out` (row stride `os` bytes).
inline void transpose8x8x16(const uint8_t *in, uint64_t is, uint8_t *out,
                            uint64_t os) {
  auto ld = [&](int r) {
    return _mm_loadu_si128(reinterpret_cast<const __m128i *>(in + r * is));
  };
  __m128i a0 = ld(0), a1 = ld(1), a2 = ld(2), a3 = ld(3), a4 = ld(4),
          a5 = ld(5), a6 = ld(6), a7 = ld(7);
  __m128i b0 = _mm_unpacklo_epi16(a0, a1), b1 = _mm_unpackhi_epi16(a0, a1),
          b2 = _mm_unpacklo_epi16(a2, a3), b3 = _mm_unpackhi_epi16(a2, a3),
          b4 = _mm_unpacklo_epi16(a4, a5), b5 = _mm_unpackhi_epi16(a4, a5),
          b6 = _mm_unpacklo_epi16(a6, a7), b7 = _mm_unpackhi_epi16(a6, a7);
  __m128i c0 = _mm_unpacklo_epi32(b0, b2), c1 = _mm_unpackhi_epi32(b0, b2),
          c2 = _mm_unpacklo_epi32(b1, b3), c3 = _mm_unpackhi_epi32(b1, b3),
          c4 = _mm_unpacklo_epi32(b4, b6), c5 = _mm_unpackhi_epi32(b4, b6),
          c6 = _mm_unpacklo_epi32(b5, b7), c7 = _mm_unpackhi_epi32(b5, b7);
  auto st = [&](int r, __m128i v) {
    _mm_storeu_si128(reinterpret_cast<__m128i *>(out + r * os), v);
  };
  st(0, _mm_unpacklo_epi64(c0, c4));
  st(1, _mm_unpackhi_epi64(c0, c4));
  st(2, _mm_unpacklo_epi64(c1, c5));
  st(3, _mm_unpackhi_epi64(c1, c5));
  st(4, _mm_unpacklo_epi64(c2, c6));
  st(5, _mm_unpackhi_epi64(c2, c6));
  st(6, _mm_unpacklo_epi64(c3, c7));
  st(7, _mm_unpackhi_epi64(c3, c7));
}

/// The 4 x 4 block of 32-bit elements at `in`, transposed to `out`.
inline void transpose4x4x32(const uint8_t *in, uint64_t is, uint8_t *out,
                            uint64_t os) {
  auto ld = [&](int r) {
    return _mm_loadu_si128(reinterpret_cast<const __m128i *>(in + r * is));
  };
  __m128i a0 = ld(0), a1 = ld(1), a2 = ld(2), a3 = ld(3);
  __m128i b0 = _mm_unpacklo_epi32(a0, a1), b1 = _mm_unpackhi_epi32(a0, a1),
          b2 = _mm_unpacklo_epi32(a2, a3), b3 = _mm_unpackhi_epi32(a2, a3);
  auto st = [&](int r, __m128i v) {
    _mm_storeu_si128(reinterpret_cast<__m128i *>(out + r * os), v);
  };
  st(0, _mm_unpacklo_epi64(b0, b2));
  st(1, _mm_unpackhi_epi64(b0, b2));
  st(2, _mm_unpacklo_epi64(b1, b3));
  st(3, _mm_unpackhi_epi64(b1, b3));
}

/// transposeTileOf in K x K register blocks (`kernel`) inside 32 x 32
/// tiles; the edges element by element.
template <typename T, uint64_t K, typename Kernel>
inline void transposeTileBlocks(const uint8_t *in, uint64_t inStride,
                                uint8_t *out, uint64_t outStride, uint64_t rows,
                                uint64_t cols, Kernel kernel) {
  constexpr uint64_t kTile = 32;
  const uint64_t fullRows = rows / K * K, fullCols = cols / K * K;
  const uint64_t is = inStride * sizeof(T), os = outStride * sizeof(T);
  for (uint64_t rt = 0; rt < fullRows; rt += kTile)
    for (uint64_t ct = 0; ct < fullCols; ct += kTile) {
      uint64_t re = std::min(fullRows, rt + kTile),
               ce = std::min(fullCols, ct + kTile);
      for (uint64_t c = ct; c < ce; c += K)
        for (uint64_t r = rt; r < re; r += K)
          kernel(in + r * is + c * sizeof(T), is, out + c * os + r * sizeof(T),
                 os);
    }
  // The last rows (all columns) and the last columns (the full rows).
  transposeTileOf<T>(in + fullRows * is, inStride, out + fullRows * sizeof(T),
                     outStride, rows - fullRows, cols);
  transposeTileOf<T>(in + fullCols * sizeof(T), inStride, out + fullCols * os,
                     outStride, fullRows, cols - fullCols);
}
#endif

/// transposeTileOf for elements of `es` bytes (1, 2, 4 or 8).
inline void transposeTile(const uint8_t *in, uint64_t inStride, uint8_t *out,
                          uint64_t outStride, uint64_t rows, uint64_t cols,
                          size_t es) {
  switch (es) {
  case 2:
#ifdef __SSE2__
    return transposeTileBlocks<uint16_t, 8>(in, inStride, out, outStride, rows,
                                            cols, transpose8x8x16);
#else
    return transposeTileOf<uint16_t>(in, inStride, out, outStride, rows, cols);
#endif
  case 4:
#ifdef __SSE2__
    return transposeTileBlocks<uint32_t, 4>(in, inStride, out, outStride, rows,
                                            cols, transpose4x4x32);
#else
    return transposeTileOf<uint32_t>(in, inStride, out, outStride, rows, cols);
#endif
  case 8:
    return transposeTileOf<uint64_t>(in, inStride, out, outStride, rows, cols);
  default:
    return transposeTileOf<uint8_t>(in, inStride, out, outStride, rows, cols);
  }
}

/// A row stride of at least `n` elements of `es` bytes that is not a
/// multiple of 4 KiB: rows one cache line apart keep a tile's rows in
/// different cache sets.
inline uint64_t paddedStride(uint64_t n, size_t es) { return n + 64 / es; }

/// Buffers reused from one tensor to the next, grown on demand and never
/// cleared: a buffer of a tile's size made afresh for every tensor would
/// cost its page faults and its zeroing each time.
class Scratch {
public:
  /// Byte buffer `slot` (0: the tile, 1: reads) with room for `n` bytes.
  uint8_t *bytes(size_t slot, uint64_t n) { return grow(byteSlots[slot], n); }
  /// Float buffer `slot` with room for `n` floats.
  float *floats(size_t slot, uint64_t n) { return grow(floatSlots[slot], n); }

private:
  template <typename T> struct Slot {
    std::unique_ptr<T[]> data;
    uint64_t size = 0;
  };
  template <typename T> static T *grow(Slot<T> &s, uint64_t n) {
    if (n > s.size) {
      s.data.reset(new T[n]);
      s.size = n;
    }
    return s.data.get();
  }
  Slot<uint8_t> byteSlots[2];
  Slot<float> floatSlots[2];
};

inline float roundHalf(float f) { return halfToFloat(floatToHalf(f)); }
inline float roundBf16(float f) { return bf16ToFloat(floatToBf16(f)); }
inline float roundNone(float f) { return f; }

/// Scales are stored in the activation dtype (MatMulNBits' T1).
inline ir::DType scaleDType(const ir::TensorType &t) {
  return t.dtype == ir::DType::F16 || t.dtype == ir::DType::BF16
             ? t.dtype
             : ir::DType::F32;
}

/// Quantizes the rows of a weight of type `type` one at a time: each row's
/// codes, scales (in the scale dtype) and packed zero points, in the order
/// of the regions they go to (row r of its experts x rows at r times the
/// per-row sizes).
class RowQuantizer {
public:
  RowQuantizer(const ir::QuantLayout &layout, const ir::TensorType &type)
      : l(layout), sdt(scaleDType(type)), scaleSize(ir::dtypeBits(sdt) / 8),
        round(sdt == ir::DType::F16    ? roundHalf
              : sdt == ir::DType::BF16 ? roundBf16
                                       : roundNone),
        rowScales(static_cast<size_t>(l.blocksPerRow())) {}

  /// Bytes of one row's codes, scales and zero points (0 if symmetric).
  uint64_t codeBytes() const {
    return static_cast<uint64_t>(l.blocksPerRow() * l.blobBytes());
  }
  uint64_t scaleBytes() const {
    return static_cast<uint64_t>(l.blocksPerRow()) * scaleSize;
  }
  uint64_t zeroPointBytes() const {
    return l.symmetric ? 0 : static_cast<uint64_t>(l.zeroPointBytesPerRow());
  }

  /// Quantizes one row (`l.cols` floats) into `codes` (codeBytes()),
  /// `scales` (scaleBytes()) and, when asymmetric, `zeroPoints`
  /// (zeroPointBytes()). False when a value is not finite
  /// (`nonFiniteColumn`) or a scale overflows the scale dtype (f16 scales of
  /// weights beyond ~4.6e5; `overflowBlock`).
  bool quantize(const float *row, uint8_t *codes, uint8_t *scales,
                uint8_t *zeroPoints) {
    const int64_t nb = l.blocksPerRow();
    // Sources are checked as they stream; a non-finite value reaching the
    // quantizer is still refused (it would become -8 x scale).
    for (int64_t k = 0; k < l.cols; ++k)
      if (!std::isfinite(row[k])) {
        nonFiniteColumn = k;
        return false;
      }
    quantizeRow(row, l, round, codes, rowScales.data(),
                l.symmetric ? nullptr : zeroPoints);
    uint64_t bad =
        storeFloats(scales, rowScales.data(), static_cast<uint64_t>(nb), sdt);
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
  std::vector<float> rowScales;
};

} // namespace archc::weights

#endif // ARCHC_EMIT_WEIGHTS_WEIGHTELEMENTS_H
