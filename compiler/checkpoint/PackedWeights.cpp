//===- PackedWeights.cpp - Binding GPTQ, AWQ and compressed-tensors -------===//
//
// This file implements PackedWeights: the tensors of one packed Linear
// weight are found by the module's name, checked against the model's shape
// and the module's scheme (dtypes, packed shapes, scale and zero-point
// shapes, weight_shape, g_idx length, range and group sizes, symmetric zero
// points), and the MatMulNBits mapping is chosen. Every problem names the
// tensor; binding reports them all before anything is written.
//
//===----------------------------------------------------------------------===//
#include "checkpoint/PackedWeights.h"

#include "checkpoint/QuantizedCheckpoint.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <numeric>

namespace archc {

namespace {
int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

bool isFloatScale(StDType t) {
  return t == StDType::F32 || t == StDType::F16 || t == StDType::BF16;
}

bool isSignedInt(StDType t) {
  return t == StDType::I8 || t == StDType::I16 || t == StDType::I32 ||
         t == StDType::I64;
}

int64_t loadIndex(const StTensor &t, int64_t i) {
  switch (t.dtype) {
  case StDType::I64: {
    int64_t v;
    std::memcpy(&v, t.data + i * 8, 8);
    return v;
  }
  case StDType::I32: {
    int32_t v;
    std::memcpy(&v, t.data + i * 4, 4);
    return v;
  }
  case StDType::I16: {
    int16_t v;
    std::memcpy(&v, t.data + i * 2, 2);
    return v;
  }
  default:
    return static_cast<int8_t>(t.data[i]);
  }
}

std::string stripWeight(const std::string &name) {
  const std::string suffix = ".weight";
  if (name.size() > suffix.size() &&
      name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0)
    return name.substr(0, name.size() - suffix.size());
  return "";
}
} // namespace

uint64_t PackedWeight::storedBytes() const {
  uint64_t n = 0;
  for (const StTensor *t : tensors())
    n += t->size;
  return n;
}

std::vector<const StTensor *> PackedWeight::tensors() const {
  std::vector<const StTensor *> out;
  for (const StTensor *t : {codes, scales, zeros, gIdx, shape})
    if (t)
      out.push_back(t);
  return out;
}

ir::QuantLayout PackedWeight::layout(double scaleBits) const {
  ir::QuantLayout l;
  l.bits = containerBits;
  l.block = block;
  l.rows = rows;
  l.cols = cols;
  l.symmetric = !storeZeros;
  l.scaleBits = scaleBits;
  return l;
}

bool PackedWeights::stores(const std::string &name) const {
  std::string module = stripWeight(name);
  if (module.empty() || !quant.perModule())
    return false;
  return ckpt.find(
             module +
             (quant.method == ir::CheckpointQuant::Method::CompressedTensors
                  ? ".weight_packed"
                  : ".qweight")) != nullptr;
}

const PackedWeight *PackedWeights::get(const std::string &name) const {
  auto it = bound.find(name);
  return it == bound.end() ? nullptr : it->second.get();
}

const PackedWeight *
PackedWeights::find(const std::string &name,
                    const std::vector<int64_t> &shape) const {
  if (const PackedWeight *w = get(name))
    return w;
  if (!stores(name) || shape.size() != 2)
    return nullptr;
  auto w = std::make_unique<PackedWeight>();
  w->name = name;
  w->module = stripWeight(name);
  w->rows = shape[0];
  w->cols = shape[1];
  bind(*w);
  return (bound[name] = std::move(w)).get();
}

void PackedWeights::bind(PackedWeight &w) const {
  using Method = ir::CheckpointQuant::Method;
  const std::string &m = w.module;
  auto problem = [&](std::string msg) { w.problems.push_back(std::move(msg)); };
  auto need = [&](const std::string &suffix,
                  const std::string &what) -> const StTensor * {
    const StTensor *t = ckpt.find(m + suffix);
    if (!t)
      problem(fmt::format("{}{}: missing ({})", m, suffix, what));
    return t;
  };
  bool ct = quant.method == Method::CompressedTensors;
  w.format = ct                            ? PackedWeight::Format::CtPacked
             : quant.method == Method::AWQ ? PackedWeight::Format::Awq
                                           : PackedWeight::Format::Gptq;
  const std::string codesName = m + (ct ? ".weight_packed" : ".qweight");
  w.codes = ckpt.find(codesName);
  // The scheme the config gives the module.
  std::string why;
  const ir::WeightScheme *s = quant.schemeOf(m, &why);
  if (!s) {
    problem(fmt::format("{}: config.json's quantization_config leaves '{}' "
                        "unquantized ({}), but the checkpoint stores its "
                        "codes",
                        codesName, m, why));
    return;
  }
  if (s->type != ir::WeightScheme::Type::Int) {
    problem(fmt::format("{}: the config group of '{}' ({}) is "
                        "float-quantized, but the checkpoint stores packed "
                        "integer codes",
                        codesName, m, why));
    return;
  }
  w.scheme = *s;
  const int bits = s->bits;
  w.tensorScale = s->group == 0;
  w.groupSize = s->group > 0 ? s->group : w.cols;
  w.groups = ceilDiv(w.cols, w.groupSize);
  w.gptqV1 = quant.method == Method::GPTQ && quant.gptqV1;
  w.containerBits = bits <= 4 ? 4 : 8;
  if (w.rows <= 0 || w.cols <= 0)
    return;
  // The MatMulNBits block: the group size or a power of two dividing it,
  // at most 128; one scale per row takes any block.
  if (s->group > 0) {
    int64_t p = s->group & -s->group;
    if (p < 16)
      problem(fmt::format("{}: group_size {} has no power-of-two divisor of "
                          "16 or more, so no MatMulNBits block holds whole "
                          "groups",
                          codesName, s->group));
    w.block = std::clamp<int64_t>(p, 16, 128);
  } else {
    int64_t p = 16;
    while (p < w.cols && p < 128)
      p *= 2;
    w.block = p;
  }
  const StDType i32 = StDType::I32;
  auto expect = [&](const StTensor *t, std::vector<int64_t> shape,
                    const std::string &what) {
    if (t && t->shape != shape)
      problem(fmt::format("{}: {} {}, but {} needs {}", t->name,
                          stDTypeName(t->dtype), shapeString(t->shape), what,
                          shapeString(shape)));
    return t && t->shape == shape;
  };
  auto dtype = [&](const StTensor *t, bool ok, const char *want) {
    if (t && !ok)
      problem(fmt::format("{}: dtype {} (expected {})", t->name,
                          stDTypeName(t->dtype), want));
    return t && ok;
  };
  std::string model =
      fmt::format("the model's [{}, {}] at {} bits", w.rows, w.cols, bits);
  bool shapesOk = true;
  if (!ct) {
    bool gptq = w.format == PackedWeight::Format::Gptq;
    w.zeros = need(".qzeros", gptq ? "GPTQ stores the zero points of every "
                                     "quantized Linear"
                                   : "AWQ GEMM stores zero points");
    w.scales = need(".scales", "the scales of the codes");
    w.gIdx = gptq ? ckpt.find(m + ".g_idx") : nullptr;
    shapesOk &= dtype(w.codes, w.codes->dtype == i32, "I32");
    shapesOk &= dtype(w.zeros, w.zeros && w.zeros->dtype == i32, "I32");
    shapesOk &= dtype(w.scales, w.scales && isFloatScale(w.scales->dtype),
                      "F16, BF16 or F32");
    if (gptq) {
      if ((w.cols * bits) % 32 != 0) {
        problem(fmt::format("{}: {} inputs at {} bits do not fill whole "
                            "int32 words",
                            codesName, w.cols, bits));
        shapesOk = false;
      }
      shapesOk &= expect(w.codes, {w.cols * bits / 32, w.rows}, model);
      shapesOk &=
          expect(w.zeros, {w.groups, ceilDiv(w.rows * bits, 32)},
                 fmt::format("{} groups of {} outputs", w.groups, w.rows));
      shapesOk &=
          expect(w.scales, {w.groups, w.rows},
                 fmt::format("{} groups of {} outputs", w.groups, w.rows));
    } else {
      if (w.rows % 8 != 0) {
        problem(fmt::format("{}: AWQ GEMM packs 8 outputs per word; {} "
                            "outputs",
                            codesName, w.rows));
        shapesOk = false;
      }
      shapesOk &= expect(w.codes, {w.cols, w.rows / 8}, model);
      shapesOk &=
          expect(w.zeros, {w.groups, w.rows / 8},
                 fmt::format("{} groups of {} outputs", w.groups, w.rows));
      shapesOk &=
          expect(w.scales, {w.groups, w.rows},
                 fmt::format("{} groups of {} outputs", w.groups, w.rows));
    }
  } else {
    w.scales = need(".weight_scale", "the scales of the codes");
    w.shape = ckpt.find(m + ".weight_shape");
    w.zeros = ckpt.find(m + ".weight_zero_point");
    w.gIdx = ckpt.find(m + ".weight_g_idx");
    if (!s->symmetric && !w.zeros)
      need(".weight_zero_point", "an asymmetric scheme stores zero points");
    shapesOk &= dtype(w.codes, w.codes->dtype == i32, "I32");
    shapesOk &= dtype(w.scales, w.scales && isFloatScale(w.scales->dtype),
                      "F16, BF16 or F32");
    int64_t dense = ceilDiv(w.cols * bits, 32);
    int64_t legacy = ceilDiv(w.cols, 32 / bits);
    if (w.codes->shape == std::vector<int64_t>{w.rows, legacy} &&
        legacy != dense)
      w.legacyCodes = true;
    else
      shapesOk &= expect(w.codes, {w.rows, dense}, model);
    if (w.scales) {
      std::vector<int64_t> want = {w.rows, w.groups};
      bool ok = w.tensorScale ? w.scales->size == stDTypeSize(w.scales->dtype)
                              : w.scales->shape == want;
      if (!ok) {
        problem(fmt::format("{}: {} {}, but {} needs {}", w.scales->name,
                            stDTypeName(w.scales->dtype),
                            shapeString(w.scales->shape),
                            w.tensorScale ? "one scale per tensor"
                                          : fmt::format("{} groups of {} "
                                                        "inputs",
                                                        w.groups, w.groupSize),
                            w.tensorScale ? "[1]" : shapeString(want)));
        shapesOk = false;
      }
    }
    if (w.shape) {
      bool ok =
          (w.shape->dtype == StDType::I64 || w.shape->dtype == StDType::I32) &&
          w.shape->shape == std::vector<int64_t>{2};
      if (!ok) {
        problem(fmt::format("{}: {} {} (expected I64 [2])", w.shape->name,
                            stDTypeName(w.shape->dtype),
                            shapeString(w.shape->shape)));
        shapesOk = false;
      } else if (loadIndex(*w.shape, 0) != w.rows ||
                 loadIndex(*w.shape, 1) != w.cols) {
        problem(fmt::format("{}: says [{}, {}], but the model's weight is "
                            "[{}, {}]",
                            w.shape->name, loadIndex(*w.shape, 0),
                            loadIndex(*w.shape, 1), w.rows, w.cols));
        shapesOk = false;
      }
    }
    if (w.zeros) {
      std::vector<int64_t> packed = {ceilDiv(w.rows * bits, 32), w.groups};
      std::vector<int64_t> legacyShape = {w.rows, w.groups};
      if (w.zeros->dtype == i32 && w.zeros->shape == packed) {
        w.legacyZeros = false;
      } else if (isSignedInt(w.zeros->dtype) &&
                 (w.zeros->shape == legacyShape ||
                  (w.tensorScale &&
                   w.zeros->size == stDTypeSize(w.zeros->dtype)))) {
        w.legacyZeros = true;
      } else {
        problem(fmt::format("{}: {} {}, but {} groups of {} outputs need "
                            "I32 {} (packed) or I8 {}",
                            w.zeros->name, stDTypeName(w.zeros->dtype),
                            shapeString(w.zeros->shape), w.groups, w.rows,
                            shapeString(packed), shapeString(legacyShape)));
        shapesOk = false;
      }
    }
  }
  if (w.gIdx && (!(w.gIdx->dtype == i32 || w.gIdx->dtype == StDType::I64) ||
                 w.gIdx->shape != std::vector<int64_t>{w.cols})) {
    problem(fmt::format("{}: {} {}, but the model's {} inputs need I32 [{}] "
                        "(one group index per input)",
                        w.gIdx->name, stDTypeName(w.gIdx->dtype),
                        shapeString(w.gIdx->shape), w.cols, w.cols));
    shapesOk = false;
  }
  if (s->needsGIdx && !w.gIdx)
    problem(fmt::format("{}{}: missing (the module's scheme {}, from {}, "
                        "is act-order: the group of every input is needed)",
                        m, ct ? ".weight_g_idx" : ".g_idx", s->describe(),
                        why));
  if (!shapesOk || !w.problems.empty())
    return;

  PackedReader r(w, ckpt);
  // Act-order: the inputs sorted by group (stable) must form groups of
  // exactly groupSize inputs, in order; then MatMulNBits reads the
  // activations gathered in that order.
  if (w.gIdx) {
    std::vector<int64_t> g(static_cast<size_t>(w.cols));
    for (int64_t i = 0; i < w.cols; ++i) {
      g[i] = loadIndex(*w.gIdx, i);
      if (g[i] < 0 || g[i] >= w.groups) {
        problem(fmt::format("{}: group {} of input {} is outside [0, {})",
                            w.gIdx->name, g[i], i, w.groups));
        return;
      }
    }
    std::vector<int32_t> perm(static_cast<size_t>(w.cols));
    std::iota(perm.begin(), perm.end(), 0);
    std::stable_sort(perm.begin(), perm.end(),
                     [&](int32_t a, int32_t b) { return g[a] < g[b]; });
    for (int64_t j = 0; j < w.cols; ++j)
      if (g[perm[j]] != j / w.groupSize) {
        std::vector<int64_t> count(static_cast<size_t>(w.groups), 0);
        for (int64_t v : g)
          ++count[v];
        int64_t bad =
            g[perm[j]] < j / w.groupSize ? g[perm[j]] : j / w.groupSize;
        problem(fmt::format("{}: group {} holds {} inputs where group_size "
                            "is {}: unequal act-order groups have no exact "
                            "MatMulNBits blocks",
                            w.gIdx->name, bad, count[bad], w.groupSize));
        return;
      }
    bool identity = true;
    for (int64_t j = 0; j < w.cols && identity; ++j)
      identity = perm[j] == j;
    if (!identity)
      w.perm = std::move(perm);
  }
  // Zero points: the default 2^(bits-1) of the container is not stored.
  const unsigned mid = 1u << (bits - 1);
  const bool sameDefault = bits == w.containerBits;
  if (w.format == PackedWeight::Format::Awq || !s->symmetric) {
    w.storeZeros = true;
    if (w.legacyZeros)
      for (int64_t o = 0; o < w.rows; ++o)
        for (int64_t g = 0; g < w.groups; ++g) {
          int64_t z = loadIndex(*w.zeros, w.tensorScale ? 0 : o * w.groups + g);
          if (z < -static_cast<int64_t>(mid) ||
              z >= static_cast<int64_t>(mid)) {
            problem(fmt::format("{}: zero point {} at output {}, group {} is "
                                "outside the {}-bit range [{}, {}]",
                                w.zeros->name, z, o, g, bits, -int64_t(mid),
                                int64_t(mid) - 1));
            return;
          }
        }
    return;
  }
  // Symmetric: every stored zero point must be the midpoint.
  if (w.zeros)
    for (int64_t g = 0; g < w.groups; ++g)
      for (int64_t o = 0; o < w.rows; ++o)
        if (unsigned z = r.zero(g, o); z != mid) {
          problem(fmt::format(
              "{}: zero point {} at group {}, output {}, but the config is "
              "symmetric (zero point {}{})",
              w.zeros->name, z, g, o, mid,
              w.gptqV1 ? ", stored as " + std::to_string(mid - 1) : ""));
          return;
        }
  w.storeZeros = !sameDefault;
}

std::unique_ptr<FloatSource>
PackedWeights::values(const PackedWeight &w) const {
  class Source : public FloatSource {
  public:
    Source(const PackedWeight &w, const Checkpoint &c) : w(w), reader(w, c) {}

  protected:
    // Checked as they stream by FloatSource::read.
    void readValues(uint64_t start, uint64_t count, float *out) override {
      const uint64_t cols = static_cast<uint64_t>(w.cols);
      uint64_t e = start, end = start + count;
      while (e < end) {
        int64_t r0 = static_cast<int64_t>(e / cols);
        // Whole rows at a time, a tile of them.
        int64_t n = std::min<int64_t>(
            w.rows - r0,
            std::max<int64_t>(
                1, static_cast<int64_t>((end - e + cols - 1) / cols)));
        row.resize(static_cast<size_t>(n * w.cols));
        reader.values(r0, n, row.data());
        uint64_t from = e - static_cast<uint64_t>(r0) * cols;
        uint64_t take =
            std::min<uint64_t>(static_cast<uint64_t>(n) * cols - from, end - e);
        std::memcpy(out + (e - start), row.data() + from, take * 4);
        e += take;
      }
      bytesRead = reader.bytesRead();
    }

  private:
    const PackedWeight &w;
    PackedReader reader;
    std::vector<float> row;
  };
  return std::make_unique<Source>(w, ckpt);
}

} // namespace archc
