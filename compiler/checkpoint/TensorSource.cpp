//===- TensorSource.cpp - A weight's values as float, from anywhere -------===//
//
// This file implements the FloatSource readers. Checkpoint readers decode
// straight from the memory-mapped file; quantized formats multiply each
// code by the scale of its block as they go (nothing is expanded in
// memory).
//
//===----------------------------------------------------------------------===//
#include "checkpoint/TensorSource.h"

#include "support/FloatConvert.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

namespace archc {

namespace {
/// Every e4m3fn byte's value, computed once.
struct E4M3Table {
  float v[256];
  E4M3Table();
};
const E4M3Table &e4m3Table() {
  static const E4M3Table t;
  return t;
}
} // namespace

float decodeE4M3(uint8_t b) { return e4m3Table().v[b]; }

static float computeE4M3(uint8_t b) {
  int sign = b >> 7, exp = (b >> 3) & 0xF, man = b & 0x7;
  float v;
  if (exp == 0xF && man == 0x7)
    return std::numeric_limits<float>::quiet_NaN();
  if (exp == 0)
    v = std::ldexp(static_cast<float>(man) / 8.0f, -6);
  else
    v = std::ldexp(1.0f + static_cast<float>(man) / 8.0f, exp - 7);
  return sign ? -v : v;
}

E4M3Table::E4M3Table() {
  for (int b = 0; b < 256; ++b)
    v[b] = computeE4M3(static_cast<uint8_t>(b));
}

float decodeE2M1(uint8_t nibble) {
  static const float table[16] = {0.0f,  0.5f,  1.0f,  1.5f,  2.0f,  3.0f,
                                  4.0f,  6.0f,  -0.0f, -0.5f, -1.0f, -1.5f,
                                  -2.0f, -3.0f, -4.0f, -6.0f};
  return table[nibble & 0xF];
}

std::string nonFiniteName(float value) {
  if (std::isnan(value))
    return "NaN";
  return value > 0 ? "Inf" : "-Inf";
}

std::string FloatSource::describeNonFinite(uint64_t element,
                                           float value) const {
  return "element " + std::to_string(element) + " is " + nonFiniteName(value);
}

uint64_t firstNonFinite(const uint8_t *p, uint64_t count, StDType dtype) {
  switch (dtype) {
  case StDType::F32:
    for (uint64_t i = 0; i < count; ++i) {
      uint32_t bits;
      std::memcpy(&bits, p + i * 4, 4);
      if ((bits & 0x7F800000u) == 0x7F800000u)
        return i;
    }
    return count;
  case StDType::F16:
  case StDType::BF16: {
    uint16_t mask = dtype == StDType::F16 ? 0x7C00 : 0x7F80;
    for (uint64_t i = 0; i < count; ++i) {
      uint16_t bits;
      std::memcpy(&bits, p + i * 2, 2);
      if ((bits & mask) == mask)
        return i;
    }
    return count;
  }
  case StDType::F64:
    for (uint64_t i = 0; i < count; ++i) {
      double d;
      std::memcpy(&d, p + i * 8, 8);
      if (!std::isfinite(d))
        return i;
    }
    return count;
  default:
    return count;
  }
}

namespace {
float loadFloat(const uint8_t *p, StDType t);
} // namespace

std::string describeNonFiniteElement(const StTensor &t, uint64_t element) {
  const uint8_t *p = t.data + element * stDTypeSize(t.dtype);
  if (t.dtype == StDType::F64) {
    double d;
    std::memcpy(&d, p, 8);
    if (std::isfinite(d))
      return fmt::format("'{}' element {} ({:g}, F64) overflows f32", t.name,
                         element, d);
  }
  return fmt::format("'{}' holds {} at element {} ({})", t.name,
                     nonFiniteName(loadFloat(p, t.dtype)), element,
                     stDTypeName(t.dtype));
}

namespace {

float loadFloat(const uint8_t *p, StDType t) {
  switch (t) {
  case StDType::F32: {
    float f;
    std::memcpy(&f, p, 4);
    return f;
  }
  case StDType::F16: {
    uint16_t h;
    std::memcpy(&h, p, 2);
    return halfToFloat(h);
  }
  case StDType::BF16: {
    uint16_t h;
    std::memcpy(&h, p, 2);
    return bf16ToFloat(h);
  }
  case StDType::F64: {
    double d;
    std::memcpy(&d, p, 8);
    return static_cast<float>(d);
  }
  case StDType::F8E4M3:
    return decodeE4M3(*p);
  default:
    return 0;
  }
}

/// A ue8m0 scale byte: 2^(b - 127); 255 is NaN (reported).
bool ue8m0(uint8_t b, float &out) {
  if (b == 0xFF)
    return false;
  out = std::ldexp(1.0f, static_cast<int>(b) - 127);
  return true;
}

/// The scale at element `i` of a scale tensor (multipliers in F32/BF16/F16,
/// or ue8m0 bytes in F8_E8M0/U8).
float loadScale(const StTensor &s, uint64_t i, std::string &error) {
  const uint8_t *p = s.data + i * stDTypeSize(s.dtype);
  if (s.dtype == StDType::F8E8M0 || s.dtype == StDType::U8) {
    float v = 0;
    if (!ue8m0(*p, v) && error.empty())
      error = "scale tensor '" + s.name +
              "' holds the NaN ue8m0 value 0xFF "
              "at element " +
              std::to_string(i);
    return v;
  }
  return loadFloat(p, s.dtype);
}

class PlainSource : public FloatSource {
public:
  PlainSource(const StTensor &t, const MappedFile &f)
      : t(t), f(f), size(stDTypeSize(t.dtype)) {}
  void readValues(uint64_t start, uint64_t count, float *out) override {
    const uint8_t *p = t.data + start * size;
    uint16_t h;
    // One loop per dtype (the common ones vectorise).
    switch (t.dtype) {
    case StDType::F32:
      std::memcpy(out, p, count * 4);
      break;
    case StDType::BF16:
      for (uint64_t i = 0; i < count; ++i) {
        std::memcpy(&h, p + i * 2, 2);
        out[i] = bf16ToFloat(h);
      }
      break;
    case StDType::F16:
      for (uint64_t i = 0; i < count; ++i) {
        std::memcpy(&h, p + i * 2, 2);
        out[i] = halfToFloat(h);
      }
      break;
    default:
      for (uint64_t i = 0; i < count; ++i)
        out[i] = loadFloat(p + i * size, t.dtype);
    }
    bytesRead += count * size;
  }
  void release(uint64_t start, uint64_t count) override {
    f.release(t.data + start * size, count * size);
  }

protected:
  std::string describeNonFinite(uint64_t element, float) const override {
    return describeNonFiniteElement(t, element);
  }

private:
  const StTensor &t;
  const MappedFile &f;
  size_t size;
};

class Fp8BlockSource : public FloatSource {
public:
  Fp8BlockSource(const StTensor &w, const MappedFile &wf, const StTensor &s,
                 const MappedFile &sf, int64_t br, int64_t bc)
      : w(w), wf(wf), s(s), sf(sf), br(br), bc(bc), cols(w.shape[1]),
        scaleCols((w.shape[1] + bc - 1) / bc) {}
  void readValues(uint64_t start, uint64_t count, float *out) override {
    const float *table = e4m3Table().v;
    // Runs of one block row segment share a scale.
    uint64_t e = start, end = start + count;
    while (e < end) {
      int64_t r = static_cast<int64_t>(e / cols),
              c = static_cast<int64_t>(e % cols);
      int64_t segEnd = std::min<int64_t>((c / bc + 1) * bc, cols);
      uint64_t n =
          std::min<uint64_t>(static_cast<uint64_t>(segEnd - c), end - e);
      float scale = loadScale(
          s, static_cast<uint64_t>((r / br) * scaleCols + c / bc), error);
      const uint8_t *codes = w.data + e;
      float *o = out + (e - start);
      for (uint64_t i = 0; i < n; ++i)
        o[i] = table[codes[i]] * scale;
      e += n;
    }
    bytesRead += count;
  }
  void release(uint64_t start, uint64_t count) override {
    wf.release(w.data + start, count);
    // The scale rows of the block rows touched (read again if needed).
    if (count == 0)
      return;
    const uint64_t c = static_cast<uint64_t>(cols),
                   rb = static_cast<uint64_t>(br),
                   rowBytes =
                       static_cast<uint64_t>(scaleCols) * stDTypeSize(s.dtype);
    uint64_t b0 = start / c / rb, b1 = (start + count - 1) / c / rb;
    sf.release(s.data + b0 * rowBytes, (b1 - b0 + 1) * rowBytes);
  }

protected:
  std::string describeNonFinite(uint64_t element, float value) const override {
    uint8_t code = w.data[element];
    if ((code & 0x7F) == 0x7F)
      return fmt::format("'{}' holds the F8_E4M3 NaN code {:#04x} at element "
                         "{}",
                         w.name, code, element);
    int64_t r = static_cast<int64_t>(element / cols),
            c = static_cast<int64_t>(element % cols);
    uint64_t si = static_cast<uint64_t>((r / br) * scaleCols + c / bc);
    std::string ignored;
    float scale = loadScale(s, si, ignored);
    if (!std::isfinite(scale))
      return fmt::format("scale tensor '{}' holds {} at element {}", s.name,
                         nonFiniteName(scale), si);
    return fmt::format("'{}' element {} (code {:#04x} times scale {}) is {}",
                       w.name, element, code, scale, nonFiniteName(value));
  }

private:
  const StTensor &w;
  const MappedFile &wf;
  const StTensor &s;
  const MappedFile &sf;
  int64_t br, bc, cols, scaleCols;
};

class Fp4PackedSource : public FloatSource {
public:
  Fp4PackedSource(const StTensor &p, const MappedFile &pf, const StTensor &s,
                  const MappedFile &sf, int64_t cols)
      : p(p), pf(pf), s(s), sf(sf), cols(cols), packedCols(p.shape[1]),
        scaleCols(s.shape[1]) {}
  void readValues(uint64_t start, uint64_t count, float *out) override {
    for (uint64_t i = 0; i < count; ++i) {
      uint64_t e = start + i;
      int64_t r = static_cast<int64_t>(e / cols),
              c = static_cast<int64_t>(e % cols);
      uint8_t byte = p.data[r * packedCols + c / 2];
      uint8_t nib = c % 2 == 0 ? (byte & 0xF) : (byte >> 4);
      out[i] =
          decodeE2M1(nib) *
          loadScale(s, static_cast<uint64_t>(r * scaleCols + c / 32), error);
    }
    bytesRead += (count + 1) / 2;
  }
  void release(uint64_t start, uint64_t count) override {
    uint64_t r0 = start / cols, r1 = (start + count) / cols;
    if (r1 > r0) {
      pf.release(p.data + r0 * packedCols, (r1 - r0) * packedCols);
      sf.release(s.data + r0 * scaleCols * stDTypeSize(s.dtype),
                 (r1 - r0) * scaleCols * stDTypeSize(s.dtype));
    }
  }

private:
  const StTensor &p;
  const MappedFile &pf;
  const StTensor &s;
  const MappedFile &sf;
  int64_t cols, packedCols, scaleCols;
};

class Mxfp4Source : public FloatSource {
public:
  Mxfp4Source(const StTensor &b, const MappedFile &bf, const StTensor &s,
              const MappedFile &sf, int64_t cols, bool transposed)
      : b(b), bf(bf), s(s), sf(sf), rows(b.shape[1]), cols(cols),
        groups(b.shape[2]), transposed(transposed) {}
  void readValues(uint64_t start, uint64_t count, float *out) override {
    uint64_t matrix = static_cast<uint64_t>(rows * cols);
    for (uint64_t i = 0; i < count; ++i) {
      uint64_t e = start + i;
      uint64_t x = e / matrix, rest = e % matrix;
      int64_t r, c;
      if (transposed) { // logical [E, cols, rows]
        c = static_cast<int64_t>(rest / rows);
        r = static_cast<int64_t>(rest % rows);
      } else {
        r = static_cast<int64_t>(rest / cols);
        c = static_cast<int64_t>(rest % cols);
      }
      uint64_t g = (x * rows + r) * groups + c / 32;
      uint8_t byte = b.data[g * 16 + (c % 32) / 2];
      uint8_t nib = c % 2 == 0 ? (byte & 0xF) : (byte >> 4);
      out[i] = decodeE2M1(nib) * loadScale(s, g, error);
    }
    bytesRead += (count + 1) / 2;
  }
  void release(uint64_t start, uint64_t count) override {
    // Transposed reads revisit every page of a matrix: release whole
    // matrices once they are done.
    uint64_t matrix = static_cast<uint64_t>(rows * cols);
    uint64_t m0 = start / matrix, m1 = (start + count) / matrix;
    uint64_t bytesPerMatrix = static_cast<uint64_t>(rows * groups * 16);
    if (m1 > m0) {
      bf.release(b.data + m0 * bytesPerMatrix, (m1 - m0) * bytesPerMatrix);
      uint64_t scalesPerMatrix = static_cast<uint64_t>(rows * groups);
      sf.release(s.data + m0 * scalesPerMatrix * stDTypeSize(s.dtype),
                 (m1 - m0) * scalesPerMatrix * stDTypeSize(s.dtype));
    }
  }

private:
  const StTensor &b;
  const MappedFile &bf;
  const StTensor &s;
  const MappedFile &sf;
  int64_t rows, cols, groups;
  bool transposed;
};

uint64_t fnv1a(const std::string &s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

/// splitmix64 at counter position i: value i of the sequence seeded with
/// `state` (the generator adds the golden gamma before each output).
class RandomSource : public FloatSource {
public:
  explicit RandomSource(uint64_t state) : state(state) {}
  void readValues(uint64_t start, uint64_t count, float *out) override {
    for (uint64_t i = 0; i < count; ++i) {
      uint64_t z = state + (start + i + 1) * 0x9E3779B97F4A7C15ull;
      z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
      z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
      z ^= z >> 31;
      double u = static_cast<double>(z >> 11) / static_cast<double>(1ull << 53);
      out[i] = static_cast<float>((u - 0.5) * 0.1);
    }
  }

private:
  uint64_t state;
};

class ZeroSource : public FloatSource {
public:
  void readValues(uint64_t, uint64_t count, float *out) override {
    std::memset(out, 0, count * sizeof(float));
  }
};

} // namespace

std::unique_ptr<FloatSource> plainSource(const StTensor &t,
                                         const MappedFile &file) {
  return std::make_unique<PlainSource>(t, file);
}

std::unique_ptr<FloatSource>
fp8BlockSource(const StTensor &weight, const MappedFile &weightFile,
               const StTensor &scale, const MappedFile &scaleFile,
               int64_t blockRows, int64_t blockCols) {
  return std::make_unique<Fp8BlockSource>(weight, weightFile, scale, scaleFile,
                                          blockRows, blockCols);
}

std::unique_ptr<FloatSource> fp4PackedSource(const StTensor &packed,
                                             const MappedFile &packedFile,
                                             const StTensor &scale,
                                             const MappedFile &scaleFile,
                                             int64_t cols) {
  return std::make_unique<Fp4PackedSource>(packed, packedFile, scale, scaleFile,
                                           cols);
}

std::unique_ptr<FloatSource> mxfp4Source(const StTensor &blocks,
                                         const MappedFile &blocksFile,
                                         const StTensor &scales,
                                         const MappedFile &scalesFile,
                                         int64_t cols, bool transposed) {
  return std::make_unique<Mxfp4Source>(blocks, blocksFile, scales, scalesFile,
                                       cols, transposed);
}

std::unique_ptr<FloatSource> randomSource(uint64_t seed,
                                          const std::string &name) {
  return std::make_unique<RandomSource>(seed ^ fnv1a(name));
}

std::unique_ptr<FloatSource> zeroSource() {
  return std::make_unique<ZeroSource>();
}

} // namespace archc
