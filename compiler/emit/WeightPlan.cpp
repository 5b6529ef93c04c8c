//===- WeightPlan.cpp - Initializers and their data -----------------------===//
//
// This file implements weight validation and data production. Conversion
// runs over fixed-size chunks (1 Mi elements) of the mapped source, and
// released source pages are dropped, so peak memory does not grow with the
// model.
//
//===----------------------------------------------------------------------===//
#include "emit/WeightPlan.h"

#include "emit/FloatConvert.h"
#include "emit/OnnxBuilder.h"

#include <fmt/format.h>

#include <algorithm>

namespace archc {

namespace {
constexpr uint64_t kChunkElems = 1 << 20;

uint64_t numElements(const std::vector<int64_t> &shape) {
  uint64_t n = 1;
  for (int64_t d : shape)
    n *= static_cast<uint64_t>(d);
  return n;
}

bool isFloatSt(StDType t) {
  return t == StDType::F32 || t == StDType::F16 || t == StDType::BF16 ||
         t == StDType::F64;
}

bool isIntSt(StDType t) {
  return t == StDType::I64 || t == StDType::I32 || t == StDType::I16 ||
         t == StDType::I8 || t == StDType::U8 || t == StDType::Bool;
}

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
  default:
    return 0;
  }
}

int64_t loadInt(const uint8_t *p, StDType t) {
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

void storeFloat(uint8_t *p, float f, ir::DType t) {
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

void storeInt(uint8_t *p, int64_t v, ir::DType t) {
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

uint64_t splitmix(uint64_t &state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

uint64_t fnv1a(const std::string &s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}
} // namespace

const std::string &WeightPlan::use(const std::string &name,
                                   const ir::TensorType &type) {
  auto it = index.find(name);
  if (it != index.end())
    return entries[it->second].name;
  Entry e;
  e.name = name;
  e.type = type;
  for (const ir::SymExpr &d : type.dims)
    e.shape.push_back(d.getConstant().value_or(0));
  index[name] = entries.size();
  entries.push_back(std::move(e));
  return entries.back().name;
}

uint64_t WeightPlan::totalBytes() const {
  uint64_t n = 0;
  for (const Entry &e : entries)
    n += numElements(e.shape) * ir::dtypeBits(e.type.dtype) / 8;
  return n;
}

static std::string shapeStr(const std::vector<int64_t> &s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i)
    r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "]";
}

bool WeightPlan::validate(DiagnosticEngine &diags, const std::string &ckptPath,
                          bool reportUnused,
                          const std::set<std::string> *declared) const {
  if (source != WeightSource::Checkpoint || !ckpt)
    return true;
  std::vector<std::string> missing, misshaped, badType;
  for (const Entry &e : entries) {
    const StTensor *t = ckpt->find(e.name);
    if (!t) {
      missing.push_back(e.name);
      continue;
    }
    if (t->shape != e.shape)
      misshaped.push_back(fmt::format("{}: checkpoint {} {}, model expects {}",
                                      e.name, stDTypeName(t->dtype),
                                      shapeStr(t->shape), shapeStr(e.shape)));
    bool wantFloat = ir::isFloat(e.type.dtype);
    if ((wantFloat && !isFloatSt(t->dtype)) ||
        (!wantFloat && !isIntSt(t->dtype)))
      badType.push_back(fmt::format("{}: checkpoint {} cannot become {}",
                                    e.name, stDTypeName(t->dtype),
                                    ir::dtypeName(e.type.dtype)));
  }
  std::vector<std::string> unexpected;
  for (auto &[name, t] : ckpt->tensors())
    if (reportUnused && !index.count(name) &&
        !(declared && declared->count(name)))
      unexpected.push_back(name);
  auto list = [](const std::vector<std::string> &v) {
    std::string s;
    size_t shown = std::min<size_t>(v.size(), 20);
    for (size_t i = 0; i < shown; ++i)
      s += "\n  " + v[i];
    if (v.size() > shown)
      s += fmt::format("\n  ... and {} more", v.size() - shown);
    return s;
  };
  bool ok = true;
  if (!missing.empty()) {
    diags.error(SourceRange(), "{} weight tensor{} missing from '{}':{}",
                missing.size(), missing.size() == 1 ? " is" : "s are", ckptPath,
                list(missing));
    ok = false;
  }
  if (!misshaped.empty()) {
    diags.error(SourceRange(), "{} weight tensor{} the wrong shape in '{}':{}",
                misshaped.size(), misshaped.size() == 1 ? " has" : "s have",
                ckptPath, list(misshaped));
    ok = false;
  }
  if (!badType.empty()) {
    diags.error(SourceRange(),
                "{} weight tensor{} an unconvertible dtype in "
                "'{}':{}",
                badType.size(), badType.size() == 1 ? " has" : "s have",
                ckptPath, list(badType));
    ok = false;
  }
  if (!unexpected.empty())
    diags.warning(SourceRange(),
                  fmt::format("{} checkpoint tensor{} not used by the model "
                              "(ignored):{}",
                              unexpected.size(),
                              unexpected.size() == 1 ? " is" : "s are",
                              list(unexpected)));
  return ok;
}

template <typename Sink>
bool WeightPlan::produce(const Entry &e, DiagnosticEngine &diags,
                         WeightStats &stats, Sink &&sink) const {
  uint64_t n = numElements(e.shape);
  size_t outSize = ir::dtypeBits(e.type.dtype) / 8;
  std::vector<uint8_t> buf(std::min(n, kChunkElems) * outSize);
  bool wantFloat = ir::isFloat(e.type.dtype);
  const StTensor *src =
      source == WeightSource::Checkpoint ? ckpt->find(e.name) : nullptr;
  size_t inSize = src ? stDTypeSize(src->dtype) : 0;
  uint64_t state = seed ^ fnv1a(e.name);
  for (uint64_t start = 0; start < n; start += kChunkElems) {
    uint64_t count = std::min(kChunkElems, n - start);
    uint8_t *out = buf.data();
    if (src) {
      const uint8_t *in = src->data + start * inSize;
      bool same = wantFloat ? (src->dtype == StDType::F32 &&
                               e.type.dtype == ir::DType::F32) ||
                                  (src->dtype == StDType::F16 &&
                                   e.type.dtype == ir::DType::F16) ||
                                  (src->dtype == StDType::BF16 &&
                                   e.type.dtype == ir::DType::BF16)
                            : (src->dtype == StDType::I64 &&
                               e.type.dtype == ir::DType::I64);
      if (same)
        std::memcpy(out, in, count * outSize);
      else if (wantFloat)
        for (uint64_t i = 0; i < count; ++i)
          storeFloat(out + i * outSize, loadFloat(in + i * inSize, src->dtype),
                     e.type.dtype);
      else
        for (uint64_t i = 0; i < count; ++i)
          storeInt(out + i * outSize, loadInt(in + i * inSize, src->dtype),
                   e.type.dtype);
      stats.bytesRead += count * inSize;
      ckpt->file(src->file).release(in, count * inSize);
    } else if (source == WeightSource::Random && wantFloat) {
      for (uint64_t i = 0; i < count; ++i) {
        double u = static_cast<double>(splitmix(state) >> 11) /
                   static_cast<double>(1ull << 53);
        storeFloat(out + i * outSize, static_cast<float>((u - 0.5) * 0.1),
                   e.type.dtype);
      }
    } else {
      std::memset(out, 0, count * outSize);
    }
    if (!sink(out, count * outSize, diags))
      return false;
    stats.bytesWritten += count * outSize;
  }
  ++stats.tensors;
  return true;
}

static void describe(onnx::TensorProto *t, const std::string &name,
                     const std::vector<int64_t> &shape, ir::DType dt) {
  t->set_name(name);
  t->set_data_type(onnxDType(ir::dtypeName(dt)));
  for (int64_t d : shape)
    t->add_dims(d);
}

bool WeightPlan::writeExternal(onnx::GraphProto &graph, ExternalDataWriter &out,
                               DiagnosticEngine &diags,
                               WeightStats &stats) const {
  for (const Entry &e : entries) {
    onnx::TensorProto *t = graph.add_initializer();
    describe(t, e.name, e.shape, e.type.dtype);
    uint64_t bytes = numElements(e.shape) * ir::dtypeBits(e.type.dtype) / 8;
    std::string location;
    uint64_t offset = 0;
    if (!out.place(bytes, location, offset, diags))
      return false;
    t->set_data_location(onnx::TensorProto_DataLocation_EXTERNAL);
    auto add = [&](const std::string &k, const std::string &v) {
      auto *kv = t->add_external_data();
      kv->set_key(k);
      kv->set_value(v);
    };
    add("location", location);
    add("offset", std::to_string(offset));
    add("length", std::to_string(bytes));
    if (source == WeightSource::Layout) {
      ++stats.tensors;
    } else if (!produce(e, diags, stats,
                        [&](const uint8_t *p, uint64_t n, DiagnosticEngine &d) {
                          return out.write(p, n, d);
                        })) {
      return false;
    }
  }
  return out.finish(diags);
}

bool WeightPlan::embed(onnx::GraphProto &graph, DiagnosticEngine &diags,
                       WeightStats &stats, ProgressBar *progress) const {
  for (const Entry &e : entries) {
    onnx::TensorProto *t = graph.add_initializer();
    describe(t, e.name, e.shape, e.type.dtype);
    std::string *raw = t->mutable_raw_data();
    if (!produce(e, diags, stats,
                 [&](const uint8_t *p, uint64_t n, DiagnosticEngine &) {
                   raw->append(reinterpret_cast<const char *>(p), n);
                   if (progress)
                     progress->advance(n);
                   return true;
                 }))
      return false;
  }
  if (progress)
    progress->finish();
  return true;
}

} // namespace archc
