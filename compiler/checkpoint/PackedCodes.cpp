//===- PackedCodes.cpp - Codes of GPTQ, AWQ and compressed-tensors --------===//
//
// This file implements PackedReader: element access to a packed weight's
// codes, zero points and scales straight from the mapped files, and the
// MatMulNBits rows made from them. Rows are produced in tiles: the codes of
// a tile of outputs are unpacked (one byte per code, checkpoint input
// order) walking the packed tensor in memory order, then each row is
// permuted (act-order) and packed into its container with its blocks'
// scales and zero points.
//
//===----------------------------------------------------------------------===//
#include "checkpoint/PackedWeights.h"

#include "support/FloatConvert.h"

#include <algorithm>
#include <cstring>
#include <type_traits>

namespace archc {

namespace {
uint32_t word(const StTensor &t, int64_t index) {
  uint32_t v;
  std::memcpy(&v, t.data + index * 4, 4);
  return v;
}

/// `bits` bits at bit `pos` of the little-endian int32 words `w[0..]` of a
/// dense stream whose word k is at element `first + k * stride`.
unsigned streamBits(const StTensor &t, int64_t first, int64_t stride,
                    int64_t pos, int bits) {
  int64_t k = pos / 32, off = pos % 32;
  uint64_t v = word(t, first + k * stride);
  if (off + bits > 32)
    v |= static_cast<uint64_t>(word(t, first + (k + 1) * stride)) << 32;
  return static_cast<unsigned>((v >> off) & ((1u << bits) - 1));
}

/// AWQ packs 8 outputs per word, nibble j holding output [0, 2, 4, 6, 1,
/// 3, 5, 7][j] of the 8: the nibble of output o % 8 is
constexpr int kAwqNibble[8] = {0, 4, 1, 5, 2, 6, 3, 7};

float loadScaleValue(const StTensor &t, int64_t i) {
  const uint8_t *p = t.data + i * static_cast<int64_t>(stDTypeSize(t.dtype));
  uint16_t h;
  switch (t.dtype) {
  case StDType::F16:
    std::memcpy(&h, p, 2);
    return halfToFloat(h);
  case StDType::BF16:
    std::memcpy(&h, p, 2);
    return bf16ToFloat(h);
  default: {
    float f;
    std::memcpy(&f, p, 4);
    return f;
  }
  }
}

/// GPTQModel's word-level v1 correction: the constant with a 1 in every
/// field (2, 4 and 8 bits; 3-bit fields straddle words and are corrected
/// field by field).
uint32_t v1Offset(int bits) {
  switch (bits) {
  case 2:
    return 0x55555555u;
  case 4:
    return 0x11111111u;
  case 8:
    return 0x01010101u;
  default:
    return 0;
  }
}
} // namespace

PackedReader::PackedReader(const PackedWeight &w, const Checkpoint &ckpt)
    : w(w), ckpt(ckpt) {}

unsigned PackedReader::code(int64_t i, int64_t o) const {
  const StTensor &c = *w.codes;
  const int bits = w.scheme.bits;
  switch (w.format) {
  case PackedWeight::Format::Gptq: // [in * b / 32, out], along the inputs
    return streamBits(c, o, w.rows, i * bits, bits);
  case PackedWeight::Format::Awq: // [in, out / 8], interleaved outputs
    return (word(c, i * (w.rows / 8) + o / 8) >> (4 * kAwqNibble[o % 8])) & 0xF;
  case PackedWeight::Format::CtPacked: {
    int64_t perRow = c.shape[1];
    if (w.legacyCodes) {
      int64_t per = 32 / bits;
      return (word(c, o * perRow + i / per) >> ((i % per) * bits)) &
             ((1u << bits) - 1);
    }
    return streamBits(c, o * perRow, 1, i * bits, bits);
  }
  }
  return 0;
}

unsigned PackedReader::zero(int64_t g, int64_t o) const {
  const int bits = w.scheme.bits;
  const unsigned mid = 1u << (bits - 1);
  if (!w.zeros)
    return mid;
  const StTensor &z = *w.zeros;
  const unsigned mask = (1u << bits) - 1;
  switch (w.format) {
  case PackedWeight::Format::Gptq: { // [G, out * b / 32], along the outputs
    int64_t perRow = z.shape[1];
    if (!w.gptqV1)
      return streamBits(z, g * perRow, 1, o * bits, bits);
    if (bits == 3) // field by field, modulo 2^3
      return (streamBits(z, g * perRow, 1, o * bits, bits) + 1) & mask;
    // The word-level add undoes GPTQModel's word-level subtraction,
    // borrows included.
    int64_t pos = o * bits;
    uint32_t v = word(z, g * perRow + pos / 32) + v1Offset(bits);
    return (v >> (pos % 32)) & mask;
  }
  case PackedWeight::Format::Awq:
    return (word(z, g * (w.rows / 8) + o / 8) >> (4 * kAwqNibble[o % 8])) & 0xF;
  case PackedWeight::Format::CtPacked: {
    if (w.legacyZeros) { // signed [out, G]
      int64_t i = w.tensorScale ? 0 : o * w.groups + g;
      int64_t v;
      switch (z.dtype) {
      case StDType::I32: {
        int32_t x;
        std::memcpy(&x, z.data + i * 4, 4);
        v = x;
        break;
      }
      case StDType::I16: {
        int16_t x;
        std::memcpy(&x, z.data + i * 2, 2);
        v = x;
        break;
      }
      case StDType::I64:
        std::memcpy(&v, z.data + i * 8, 8);
        break;
      default:
        v = static_cast<int8_t>(z.data[i]);
      }
      return static_cast<unsigned>(v + mid) & mask;
    }
    // [ceil(out * b / 32), G]: column g packed along the outputs.
    return streamBits(z, g, z.shape[1], o * bits, bits);
  }
  }
  return mid;
}

float PackedReader::scale(int64_t g, int64_t o) const {
  const StTensor &s = *w.scales;
  if (w.tensorScale)
    return loadScaleValue(s, 0);
  if (w.format == PackedWeight::Format::CtPacked) // [out, G]
    return loadScaleValue(s, o * w.groups + g);
  return loadScaleValue(s, g * w.rows + o); // [G, out]
}

int64_t PackedReader::groupOf(int64_t i) const {
  if (w.gIdx) {
    if (w.gIdx->dtype == StDType::I64) {
      int64_t v;
      std::memcpy(&v, w.gIdx->data + i * 8, 8);
      return v;
    }
    int32_t v;
    std::memcpy(&v, w.gIdx->data + i * 4, 4);
    return v;
  }
  return i / w.groupSize;
}

void PackedReader::unpack(int64_t n0, int64_t count) {
  const int64_t K = w.cols;
  const int bits = w.scheme.bits;
  tile.resize(static_cast<size_t>(count * K));
  uint8_t *t = tile.data();
  const StTensor &c = *w.codes;
  switch (w.format) {
  case PackedWeight::Format::Gptq: {
    // Word rows in memory order; a tile's outputs are contiguous in each.
    const int64_t wordRows = c.shape[0];
    if (32 % bits == 0) {
      // Codes per word as a constant for the common widths (the loop
      // unrolls: about twice as fast as a variable count).
      auto words = [&](auto perWord) {
        constexpr int per = decltype(perWord)::value;
        constexpr int b = 32 / per;
        constexpr unsigned mask = (1u << b) - 1;
        for (int64_t r = 0; r < wordRows; ++r)
          for (int64_t o = 0; o < count; ++o) {
            uint32_t v = word(c, r * w.rows + n0 + o);
            uint8_t *dst = t + o * K + r * per;
            for (int j = 0; j < per; ++j)
              dst[j] = static_cast<uint8_t>((v >> (j * b)) & mask);
          }
      };
      if (bits == 4)
        words(std::integral_constant<int, 8>());
      else if (bits == 8)
        words(std::integral_constant<int, 4>());
      else
        words(std::integral_constant<int, 16>()); // 2 bits
    } else {
      for (int64_t i = 0; i < K; ++i)
        for (int64_t o = 0; o < count; ++o)
          t[o * K + i] = static_cast<uint8_t>(code(i, n0 + o));
    }
    read += static_cast<uint64_t>(wordRows * count * 4);
    return;
  }
  case PackedWeight::Format::Awq: {
    const int64_t words = w.rows / 8;
    for (int64_t i = 0; i < K; ++i) {
      int64_t o = n0;
      while (o < n0 + count) {
        uint32_t v = word(c, i * words + o / 8);
        int64_t end = std::min(n0 + count, (o / 8 + 1) * 8);
        for (; o < end; ++o)
          t[(o - n0) * K + i] =
              static_cast<uint8_t>((v >> (4 * kAwqNibble[o % 8])) & 0xF);
      }
    }
    read += static_cast<uint64_t>(K * ((count + 7) / 8 + 1) * 4);
    return;
  }
  case PackedWeight::Format::CtPacked: {
    const int64_t perRow = c.shape[1];
    for (int64_t o = 0; o < count; ++o) {
      uint8_t *dst = t + o * K;
      if (!w.legacyCodes && (bits == 4 || bits == 8)) {
        // Bytes of the row are the codes, low bits first.
        const uint8_t *src = c.data + (n0 + o) * perRow * 4;
        if (bits == 8) {
          std::memcpy(dst, src, static_cast<size_t>(K));
        } else {
          for (int64_t i = 0; i < K; ++i)
            dst[i] = static_cast<uint8_t>((src[i / 2] >> (4 * (i % 2))) & 0xF);
        }
      } else {
        for (int64_t i = 0; i < K; ++i)
          dst[i] = static_cast<uint8_t>(code(i, n0 + o));
      }
    }
    read += static_cast<uint64_t>(count * perRow * 4);
    return;
  }
  }
}

bool PackedReader::copyCodes(int64_t n0, int64_t count, uint8_t *codes) {
  // 4- and 8-bit GPTQ and compressed-tensors words hold consecutive inputs
  // of one output, low bits first: MatMulNBits' bytes once the row is in
  // whole blocks and the inputs in the checkpoint's order.
  const int64_t K = w.cols;
  if (!w.perm.empty() || K % w.block != 0 || w.scheme.bits != w.containerBits ||
      !(w.format == PackedWeight::Format::Gptq ||
        (w.format == PackedWeight::Format::CtPacked && !w.legacyCodes)))
    return false;
  const StTensor &c = *w.codes;
  const int64_t rowBytes = K * w.containerBits / 8;
  if (w.format == PackedWeight::Format::CtPacked) {
    const int64_t perRow = c.shape[1] * 4;
    for (int64_t o = 0; o < count; ++o)
      std::memcpy(codes + o * rowBytes, c.data + (n0 + o) * perRow,
                  static_cast<size_t>(rowBytes));
    read += static_cast<uint64_t>(count * perRow);
    return true;
  }
  // GPTQ [in * b / 32, out]: a transpose of the words.
  const int64_t wordRows = c.shape[0];
  for (int64_t r = 0; r < wordRows; ++r) {
    const uint8_t *src = c.data + (r * w.rows + n0) * 4;
    for (int64_t o = 0; o < count; ++o)
      std::memcpy(codes + o * rowBytes + r * 4, src + o * 4, 4);
  }
  read += static_cast<uint64_t>(wordRows * count * 4);
  return true;
}

void PackedReader::rows(int64_t n0, int64_t count, uint8_t *codes,
                        float *scales, uint8_t *zeroPoints) {
  const bool copied = copyCodes(n0, count, codes);
  if (!copied)
    unpack(n0, count);
  const int64_t K = w.cols, B = w.block;
  const int64_t blocks = (K + B - 1) / B;
  const int cb = w.containerBits;
  const int64_t blob = B * cb / 8;
  const int64_t zpBytes = (blocks * cb + 7) / 8;
  const bool perm = !w.perm.empty();
  for (int64_t r = 0; r < count; ++r) {
    const int64_t o = n0 + r;
    const uint8_t *src = copied ? nullptr : tile.data() + r * K;
    uint8_t *dst = codes + r * blocks * blob;
    if (!copied)
      std::memset(dst, 0, static_cast<size_t>(blocks * blob));
    uint8_t *zp = zeroPoints ? zeroPoints + r * zpBytes : nullptr;
    if (zp)
      std::memset(zp, 0, static_cast<size_t>(zpBytes));
    for (int64_t b = 0; b < blocks; ++b) {
      // Every input of block b is in group (b * B) / groupSize (the
      // permuted order when act-order).
      int64_t g = (b * B) / w.groupSize;
      scales[r * blocks + b] = scale(g, o);
      unsigned z = zero(g, o);
      if (zp) {
        if (cb == 8)
          zp[b] = static_cast<uint8_t>(z);
        else
          zp[b / 2] |= static_cast<uint8_t>(z << (4 * (b % 2)));
      }
      if (copied)
        continue;
      uint8_t *blk = dst + b * blob;
      if (cb == 4 && !perm && (b + 1) * B <= K) {
        // A whole block in the checkpoint's order: two codes a byte.
        const uint8_t *in = src + b * B;
        for (int64_t k = 0; k < B; k += 2)
          blk[k / 2] = static_cast<uint8_t>(in[k] | (in[k + 1] << 4));
        continue;
      }
      if (cb == 8 && !perm && (b + 1) * B <= K) {
        std::memcpy(blk, src + b * B, static_cast<size_t>(B));
        continue;
      }
      for (int64_t k = 0; k < B; ++k) {
        int64_t j = b * B + k;
        // Padding inputs hold the zero point: they dequantize to 0.
        unsigned v = j < K ? src[perm ? w.perm[j] : j] : z;
        if (cb == 8)
          blk[k] = static_cast<uint8_t>(v);
        else
          blk[k / 2] |= static_cast<uint8_t>(v << (4 * (k % 2)));
      }
    }
  }
  read += static_cast<uint64_t>(count * blocks) *
          (stDTypeSize(w.scales->dtype) + (w.zeros ? 1 : 0));
}

void PackedReader::values(int64_t n0, int64_t count, float *out) {
  unpack(n0, count);
  const int64_t K = w.cols;
  std::vector<int64_t> group(static_cast<size_t>(K));
  for (int64_t i = 0; i < K; ++i)
    group[i] = groupOf(i);
  for (int64_t r = 0; r < count; ++r) {
    const int64_t o = n0 + r;
    int64_t last = -1;
    float s = 0, z = 0;
    for (int64_t i = 0; i < K; ++i) {
      if (group[i] != last) {
        last = group[i];
        s = scale(last, o);
        z = static_cast<float>(zero(last, o));
      }
      out[r * K + i] = (static_cast<float>(tile[r * K + i]) - z) * s;
    }
  }
}

} // namespace archc
