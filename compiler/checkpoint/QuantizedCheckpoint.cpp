//===- QuantizedCheckpoint.cpp - Binding quantized checkpoints ------------===//
//
// This file implements CheckpointBinder. Binding is driven by the data: a
// logical weight stored as F8_E4M3 is fine-grained FP8, packed I8 of half
// the input width is FP4, a missing weight with `_blocks` / `_scales`
// companions is MXFP4; quantization_config must declare the format, and
// every quantized tensor needs exactly its scale sidecar.
//
//===----------------------------------------------------------------------===//
#include "checkpoint/QuantizedCheckpoint.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <limits>

namespace archc {

namespace {
bool isFloatSt(StDType t) {
  return t == StDType::F32 || t == StDType::F16 || t == StDType::BF16 ||
         t == StDType::F64;
}

bool isIntSt(StDType t) {
  return t == StDType::I64 || t == StDType::I32 || t == StDType::I16 ||
         t == StDType::I8 || t == StDType::U8 || t == StDType::Bool;
}

bool endsWith(const std::string &s, const std::string &suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

/// Why scale tensor `s` cannot scale `weight`: a NaN or Inf multiplier,
/// or the ue8m0 NaN byte 0xFF; "" when every scale is finite. Scales are
/// 1/16384 of their weight's size at 128 x 128 blocks: checked whole when
/// bound, before any data is written.
std::string badScale(const StTensor &s, const std::string &weight) {
  uint64_t n = s.size / stDTypeSize(s.dtype);
  uint64_t at = n;
  std::string value;
  if (s.dtype == StDType::F8E8M0 || s.dtype == StDType::U8) {
    for (uint64_t i = 0; i < n && at == n; ++i)
      if (s.data[i] == 0xFF)
        at = i;
    value = "the NaN ue8m0 value 0xFF";
  } else {
    at = firstNonFinite(s.data, n, s.dtype);
    if (at < n) {
      float f = 0;
      if (s.dtype == StDType::F32)
        std::memcpy(&f, s.data + at * 4, 4);
      else if (s.dtype == StDType::F64) {
        double d;
        std::memcpy(&d, s.data + at * 8, 8);
        f = static_cast<float>(d);
      } else {
        uint16_t h;
        std::memcpy(&h, s.data + at * 2, 2);
        uint16_t mant = s.dtype == StDType::F16 ? (h & 0x3FF) : (h & 0x7F);
        f = mant ? std::numeric_limits<float>::quiet_NaN()
                 : ((h & 0x8000) ? -std::numeric_limits<float>::infinity()
                                 : std::numeric_limits<float>::infinity());
      }
      value = nonFiniteName(f);
    }
  }
  if (at >= n)
    return "";
  return fmt::format("{}: scale holds {} at element {} (the block of '{}' it "
                     "scales would be non-finite)",
                     s.name, value, at, weight);
}

/// `X.weight` -> `X.scale` (DeepSeek-V4); empty for other names.
std::string dotScaleName(const std::string &name) {
  if (!endsWith(name, ".weight"))
    return "";
  return name.substr(0, name.size() - 7) + ".scale";
}
} // namespace

std::string shapeString(const std::vector<int64_t> &s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i)
    r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "]";
}

uint64_t StoredTensor::storedBytes() const {
  if (packed)
    return packed->storedBytes();
  return (data ? data->size : 0) + (scale ? scale->size : 0);
}

CheckpointBinder::CheckpointBinder(const Checkpoint &ckpt,
                                   const ir::CheckpointQuant &q,
                                   const PackedWeights *catalog)
    : ckpt(ckpt), quant(q), packed(catalog) {
  if (!packed) {
    ownPacked = std::make_unique<PackedWeights>(ckpt, quant);
    packed = ownPacked.get();
  }
}

const StTensor *CheckpointBinder::sidecar(const std::string &name) {
  // compressed-tensors: `X.weight_scale`.
  if (quant.method == ir::CheckpointQuant::Method::CompressedTensors) {
    const StTensor *s = ckpt.find(name + "_scale");
    if (!s) {
      badQuant.push_back(fmt::format("{}: the scale tensor '{}_scale' is "
                                     "missing",
                                     name, name));
      return nullptr;
    }
    consumed.insert(s->name);
    return s;
  }
  std::string inv = name + "_scale_inv", dot = dotScaleName(name);
  const StTensor *a = ckpt.find(inv);
  const StTensor *b = dot.empty() ? nullptr : ckpt.find(dot);
  if (a && b) {
    badQuant.push_back(
        fmt::format("{}: two scale tensors, '{}' and '{}'", name, inv, dot));
    return nullptr;
  }
  if (!a && !b) {
    badQuant.push_back(
        fmt::format("{}: the scale tensor is missing (neither '{}'{} is in the "
                    "checkpoint)",
                    name, inv, dot.empty() ? "" : " nor '" + dot + "'"));
    return nullptr;
  }
  const StTensor *s = a ? a : b;
  consumed.insert(s->name);
  return s;
}

void CheckpointBinder::consumeSidecars(const std::string &name) {
  for (const std::string &s :
       {name + "_scale_inv", dotScaleName(name), name + "_scale"})
    if (!s.empty() && ckpt.find(s))
      consumed.insert(s);
}

const StoredTensor *
CheckpointBinder::bindFp8(const std::string &name, const StTensor &w,
                          const std::vector<int64_t> &shape) {
  // A weight that fails to bind takes its sidecars along (they are not
  // reported again as unused).
  consumeSidecars(name);
  // compressed-tensors float-quantized: the module's config group says
  // the scale's granularity (tensor, channel or block).
  int64_t br = quant.blockRows, bc = quant.blockCols;
  bool ct = quant.method == ir::CheckpointQuant::Method::CompressedTensors;
  if (ct && shape.size() == 2) {
    std::string module =
        name.size() > 7 ? name.substr(0, name.size() - 7) : name;
    std::string why;
    const ir::WeightScheme *s = quant.schemeOf(module, &why);
    if (!s || s->type != ir::WeightScheme::Type::Float) {
      badQuant.push_back(fmt::format(
          "{}: stored as F8_E4M3, but config.json's quantization_config {} "
          "'{}' ({})",
          name, s ? "gives an integer scheme to" : "leaves unquantized", module,
          why));
      return nullptr;
    }
    br = s->blockRows > 0 ? s->blockRows : s->group == 0 ? shape[0] : 1;
    bc = s->blockRows > 0 ? s->blockCols : shape[1];
  } else if (quant.method != ir::CheckpointQuant::Method::FP8) {
    badQuant.push_back(
        fmt::format("{}: stored as F8_E4M3 but config.json declares no fp8 "
                    "quantization_config",
                    name));
    return nullptr;
  }
  if (w.shape != shape || shape.size() != 2) {
    misshaped.push_back(
        fmt::format("{}: checkpoint F8_E4M3 {}, model expects {}", name,
                    shapeString(w.shape), shapeString(shape)));
    return nullptr;
  }
  const StTensor *s = sidecar(name);
  if (!s)
    return nullptr;
  if (!isFloatSt(s->dtype) && s->dtype != StDType::F8E8M0) {
    badQuant.push_back(
        fmt::format("{}: scale dtype {} (expected F32, BF16, F16 or F8_E8M0)",
                    s->name, stDTypeName(s->dtype)));
    return nullptr;
  }
  std::vector<int64_t> want = {ceilDiv(shape[0], br), ceilDiv(shape[1], bc)};
  // One scale per tensor may be stored as [1] or [].
  bool one =
      want == std::vector<int64_t>{1, 1} && s->size == stDTypeSize(s->dtype);
  if (s->shape != want && !(ct && one)) {
    badQuant.push_back(fmt::format(
        "{}: scale shape {}; weight '{}' {} in {}x{} blocks needs {}", s->name,
        shapeString(s->shape), name, shapeString(shape), br, bc,
        shapeString(want)));
    return nullptr;
  }
  if (std::string why = badScale(*s, name); !why.empty()) {
    badQuant.push_back(why);
    return nullptr;
  }
  StoredTensor t;
  t.format = StoredTensor::Format::Fp8Block;
  t.data = &w;
  t.scale = s;
  t.shape = shape;
  t.blockRows = br;
  t.blockCols = bc;
  return &(bound[name] = t);
}

const StoredTensor *
CheckpointBinder::bindFp4(const std::string &name, const StTensor &w,
                          const std::vector<int64_t> &shape) {
  consumeSidecars(name);
  if (!quant.fp4Experts) {
    badQuant.push_back(fmt::format(
        "{}: stored as packed {} {} for a float weight {}, but config.json "
        "does not declare FP4 experts (expert_dtype: fp4)",
        name, stDTypeName(w.dtype), shapeString(w.shape), shapeString(shape)));
    return nullptr;
  }
  std::vector<int64_t> packed = {shape[0], ceilDiv(shape[1], 2)};
  if (w.shape != packed) {
    badQuant.push_back(fmt::format(
        "{}: packed FP4 data is {} but the model's {} needs {} (two e2m1 "
        "values per byte)",
        name, shapeString(w.shape), shapeString(shape), shapeString(packed)));
    return nullptr;
  }
  const StTensor *s = sidecar(name);
  if (!s)
    return nullptr;
  std::vector<int64_t> want = {shape[0], ceilDiv(shape[1], 32)};
  if ((s->dtype != StDType::F8E8M0 && s->dtype != StDType::U8) ||
      s->shape != want) {
    badQuant.push_back(fmt::format(
        "{}: FP4 scales must be F8_E8M0 {} (one per 32 inputs), got {} {}",
        s->name, shapeString(want), stDTypeName(s->dtype),
        shapeString(s->shape)));
    return nullptr;
  }
  if (std::string why = badScale(*s, name); !why.empty()) {
    badQuant.push_back(why);
    return nullptr;
  }
  StoredTensor t;
  t.format = StoredTensor::Format::Fp4Packed;
  t.data = &w;
  t.scale = s;
  t.shape = shape;
  return &(bound[name] = t);
}

const StoredTensor *
CheckpointBinder::bindPacked(const std::string &name,
                             const std::vector<int64_t> &shape) {
  const PackedWeight *w = packed->find(name, shape);
  if (!w) {
    misshaped.push_back(fmt::format("{}: stored as packed codes, model "
                                    "expects {}",
                                    name, shapeString(shape)));
    return nullptr;
  }
  // Every tensor of the module's format is read, whether or not it binds.
  const std::string &m = w->module;
  for (const char *suffix :
       {".qweight", ".qzeros", ".scales", ".g_idx", ".weight_packed",
        ".weight_scale", ".weight_zero_point", ".weight_g_idx",
        ".weight_shape"})
    if (ckpt.find(m + suffix))
      consumed.insert(m + suffix);
  if (!w->problems.empty()) {
    badQuant.insert(badQuant.end(), w->problems.begin(), w->problems.end());
    return nullptr;
  }
  StoredTensor t;
  t.format = StoredTensor::Format::Packed;
  t.packed = w;
  t.data = w->codes;
  t.scale = w->scales;
  t.shape = shape;
  return &(bound[name] = t);
}

const StoredTensor *
CheckpointBinder::bindMxfp4(const std::string &name,
                            const std::vector<int64_t> &shape, bool inOut) {
  std::string bn = name + "_blocks", sn = name + "_scales";
  const StTensor *b = ckpt.find(bn);
  const StTensor *s = ckpt.find(sn);
  consumed.insert(bn);
  if (s)
    consumed.insert(sn);
  if (quant.method != ir::CheckpointQuant::Method::MXFP4) {
    badQuant.push_back(fmt::format(
        "{}: stored as MXFP4 blocks '{}' but config.json declares no mxfp4 "
        "quantization_config",
        name, bn));
    return nullptr;
  }
  if (!s) {
    badQuant.push_back(
        fmt::format("{}: the scale tensor '{}' of MXFP4 blocks '{}' is missing",
                    name, sn, bn));
    return nullptr;
  }
  if (shape.size() != 3 || b->shape.size() != 4 || b->dtype != StDType::U8) {
    badQuant.push_back(fmt::format(
        "{}: MXFP4 blocks must be U8 [experts, out, in / 32, 16] for a "
        "stacked weight; got {} {} for {}",
        bn, stDTypeName(b->dtype), shapeString(b->shape), shapeString(shape)));
    return nullptr;
  }
  // Blocks are [out, in]; the model's tensor is [E, in, out] when it reads
  // the matrices as [in, out].
  int64_t rows = inOut ? shape[2] : shape[1];
  int64_t cols = inOut ? shape[1] : shape[2];
  std::vector<int64_t> wantBlocks = {shape[0], rows, ceilDiv(cols, 32), 16};
  if (b->shape != wantBlocks) {
    badQuant.push_back(
        fmt::format("{}: MXFP4 blocks are {} but the model's {} ({}) needs {}",
                    bn, shapeString(b->shape), shapeString(shape),
                    inOut ? "[experts, in, out]" : "[experts, out, in]",
                    shapeString(wantBlocks)));
    return nullptr;
  }
  std::vector<int64_t> wantScales = {shape[0], rows, ceilDiv(cols, 32)};
  if ((s->dtype != StDType::U8 && s->dtype != StDType::F8E8M0) ||
      s->shape != wantScales) {
    badQuant.push_back(fmt::format(
        "{}: MXFP4 scales must be U8 {} (one per 32 inputs), got {} {}", sn,
        shapeString(wantScales), stDTypeName(s->dtype), shapeString(s->shape)));
    return nullptr;
  }
  if (std::string why = badScale(*s, name); !why.empty()) {
    badQuant.push_back(why);
    return nullptr;
  }
  StoredTensor t;
  t.format = StoredTensor::Format::Mxfp4;
  t.data = b;
  t.scale = s;
  t.shape = shape;
  t.transposed = inOut;
  return &(bound[name] = t);
}

const StoredTensor *CheckpointBinder::bind(const std::string &name,
                                           const std::vector<int64_t> &shape,
                                           bool wantFloat, bool inOut) {
  auto it = bound.find(name);
  if (it != bound.end())
    return &it->second;
  const StTensor *t = ckpt.find(name);
  if (wantFloat && packed->stores(name)) {
    if (t) {
      consumed.insert(name);
      badQuant.push_back(fmt::format("{}: the checkpoint holds both this "
                                     "float tensor and the module's codes",
                                     name));
      return nullptr;
    }
    return bindPacked(name, shape);
  }
  if (!t) {
    if (wantFloat && ckpt.find(name + "_blocks"))
      return bindMxfp4(name, shape, inOut);
    missing.push_back(name);
    return nullptr;
  }
  consumed.insert(name);
  if (wantFloat && t->dtype == StDType::F8E4M3)
    return bindFp8(name, *t, shape);
  if (wantFloat && (t->dtype == StDType::I8 || t->dtype == StDType::U8) &&
      shape.size() == 2 && t->shape != shape &&
      (quant.fp4Experts || ckpt.find(dotScaleName(name))))
    return bindFp4(name, *t, shape);
  if (t->shape != shape) {
    misshaped.push_back(fmt::format("{}: checkpoint {} {}, model expects {}",
                                    name, stDTypeName(t->dtype),
                                    shapeString(t->shape), shapeString(shape)));
    return nullptr;
  }
  if ((wantFloat && !isFloatSt(t->dtype)) ||
      (!wantFloat && !isIntSt(t->dtype))) {
    badType.push_back(fmt::format(
        "{}: checkpoint {} cannot become {}", name, stDTypeName(t->dtype),
        wantFloat ? "a float tensor" : "an integer tensor"));
    return nullptr;
  }
  StoredTensor s;
  s.data = t;
  s.shape = shape;
  return &(bound[name] = s);
}

std::vector<std::string> CheckpointBinder::unused() {
  std::vector<std::string> out;
  for (const auto &[name, t] : ckpt.tensors()) {
    if (consumed.count(name))
      continue;
    // A scale sidecar left over: its weight is unquantized, absent, or a
    // tensor the model does not use (then it is unused like its weight).
    std::string partner;
    if (endsWith(name, "_scale_inv"))
      partner = name.substr(0, name.size() - 10);
    else if (endsWith(name, ".scale"))
      partner = name.substr(0, name.size() - 6) + ".weight";
    else if (endsWith(name, "_scales"))
      partner = name.substr(0, name.size() - 7) + "_blocks";
    if (quant.any() && !partner.empty()) {
      const StTensor *p = ckpt.find(partner);
      auto b = bound.find(partner);
      if (!p && !consumed.count(partner)) {
        badQuant.push_back(fmt::format(
            "{}: extra scale tensor: its weight '{}' is not in the checkpoint",
            name, partner));
        continue;
      }
      if (b != bound.end() && !b->second.quantized()) {
        badQuant.push_back(fmt::format(
            "{}: extra scale tensor: its weight '{}' is stored unquantized "
            "({})",
            name, partner, stDTypeName(p->dtype)));
        continue;
      }
    }
    out.push_back(name);
  }
  return out;
}

bool CheckpointBinder::report(DiagnosticEngine &diags, const std::string &path,
                              bool reportUnused,
                              const std::set<std::string> *declared) {
  // unused() also finds the stray scale sidecars (errors), so it runs even
  // when unused tensors are not reported.
  std::vector<std::string> unexpected = unused();
  std::erase_if(unexpected, [&](const std::string &name) {
    return !reportUnused || (declared && declared->count(name));
  });
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
                missing.size(), missing.size() == 1 ? " is" : "s are", path,
                list(missing));
    ok = false;
  }
  if (!misshaped.empty()) {
    diags.error(SourceRange(), "{} weight tensor{} the wrong shape in '{}':{}",
                misshaped.size(), misshaped.size() == 1 ? " has" : "s have",
                path, list(misshaped));
    ok = false;
  }
  if (!badType.empty()) {
    diags.error(SourceRange(),
                "{} weight tensor{} an unconvertible dtype in "
                "'{}':{}",
                badType.size(), badType.size() == 1 ? " has" : "s have", path,
                list(badType));
    ok = false;
  }
  if (!badQuant.empty()) {
    diags.error(SourceRange(),
                "{} quantized tensor{} of '{}' ({}) cannot be bound:{}",
                badQuant.size(), badQuant.size() == 1 ? "" : "s", path,
                quant.describe(), list(badQuant));
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

std::unique_ptr<FloatSource>
CheckpointBinder::source(const StoredTensor &t) const {
  const MappedFile &df = ckpt.file(t.data->file);
  switch (t.format) {
  case StoredTensor::Format::Plain:
    return plainSource(*t.data, df);
  case StoredTensor::Format::Fp8Block:
    return fp8BlockSource(*t.data, df, *t.scale, ckpt.file(t.scale->file),
                          t.blockRows, t.blockCols);
  case StoredTensor::Format::Fp4Packed:
    return fp4PackedSource(*t.data, df, *t.scale, ckpt.file(t.scale->file),
                           t.shape[1]);
  case StoredTensor::Format::Packed:
    return packed->values(*t.packed);
  case StoredTensor::Format::Mxfp4:
    return mxfp4Source(*t.data, df, *t.scale, ckpt.file(t.scale->file),
                       t.transposed ? t.shape[1] : t.shape[2], t.transposed);
  }
  return nullptr;
}

} // namespace archc
