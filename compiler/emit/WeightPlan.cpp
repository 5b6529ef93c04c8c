//===- WeightPlan.cpp - Initializers and their data -----------------------===//
//
// This file implements weight validation and data production. Float output
// runs over fixed-size chunks (1 Mi elements) of the mapped source, and
// released source pages are dropped, so peak memory does not grow with the
// model. Quantized output streams one output row (or a tile of rows of an
// [in, out] matrix) at a time; a tensor's scales and zero points (1/16 of
// its bf16 bytes at block 32) are held until its codes are written.
//
//===----------------------------------------------------------------------===//
#include "emit/WeightPlan.h"

#include "emit/FloatConvert.h"
#include "emit/OnnxBuilder.h"
#include "emit/Quantize.h"

#include <fmt/format.h>

#include <algorithm>
#include <cassert>
#include <cstring>

namespace archc {

namespace {
constexpr uint64_t kChunkElems = 1 << 20;

uint64_t numElements(const std::vector<int64_t> &shape) {
  uint64_t n = 1;
  for (int64_t d : shape)
    n *= static_cast<uint64_t>(d);
  return n;
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

float loadFloat(const uint8_t *p, ir::DType t) {
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

/// Columns c0 .. c0 + n of the row-major [rows, cols] `in` as the rows of
/// `out` ([n, rows]), in 32 x 32 tiles so both sides stay in cache.
template <typename T>
void transposeBlock(const uint8_t *in, uint8_t *out, uint64_t rows,
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

float roundHalf(float f) { return halfToFloat(floatToHalf(f)); }
float roundBf16(float f) { return bf16ToFloat(floatToBf16(f)); }
float roundNone(float f) { return f; }

/// Scales are stored in the activation dtype (MatMulNBits' T1).
ir::DType scaleDType(const ir::TensorType &t) {
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
  /// scales and zero points.
  void quantize(const float *row, uint64_t r, uint8_t *codes) {
    const int64_t nb = l.blocksPerRow();
    quantizeRow(row, l, round, codes, rowScales.data(),
                l.symmetric ? nullptr
                            : zeroPoints.data() + r * l.zeroPointBytesPerRow());
    for (int64_t b = 0; b < nb; ++b)
      storeFloat(scales.data() + (r * nb + b) * scaleSize, rowScales[b], sdt);
  }

private:
  const ir::QuantLayout &l;
  ir::DType sdt;
  size_t scaleSize;
  float (*round)(float);
  std::vector<uint8_t> &scales, &zeroPoints;
  std::vector<float> rowScales;
};

} // namespace

WeightPlan::WeightPlan(WeightSource source, const Checkpoint *ckpt,
                       uint64_t seed, const ir::CheckpointQuant &ckptQuant)
    : source(source), ckpt(ckpt), seed(seed), ckptQuant(ckptQuant) {
  if (source == WeightSource::Checkpoint && ckpt)
    binder = std::make_unique<CheckpointBinder>(*ckpt, ckptQuant);
}

WeightPlan::~WeightPlan() = default;

WeightPlan::Entry &WeightPlan::entryFor(const std::string &name,
                                        const ir::TensorType &type) {
  auto it = index.find(name);
  if (it != index.end())
    return entries[it->second];
  Entry e;
  e.name = name;
  e.type = type;
  for (const ir::SymExpr &d : type.dims)
    e.shape.push_back(d.getConstant().value_or(0));
  e.inOut = inOutNames.count(name) > 0;
  index[name] = entries.size();
  entries.push_back(std::move(e));
  return entries.back();
}

const std::string &WeightPlan::use(const std::string &name,
                                   const ir::TensorType &type, bool transposed,
                                   const std::vector<int64_t> *storedDims) {
  Entry &e = entryFor(name, type);
  assert((!e.plain || e.transposed == transposed) &&
         "a weight is read in one orientation");
  assert((!transposed || e.shape.size() == 2) && "only matrices transpose");
  if (!e.plain) {
    e.plain = true;
    e.transposed = transposed;
    View v;
    v.name = name;
    v.region = 0;
    v.offset = 0;
    v.bytes = numElements(e.shape) * ir::dtypeBits(type.dtype) / 8;
    v.dims = e.shape;
    if (transposed)
      std::swap(v.dims[0], v.dims[1]);
    assert((!storedDims || (!transposed && numElements(*storedDims) ==
                                               numElements(e.shape))) &&
           "a reshaped view keeps the elements");
    if (storedDims)
      v.dims = *storedDims;
    v.onnxType = onnxDType(ir::dtypeName(type.dtype));
    e.views.insert(e.views.begin(), v);
    e.viewNames.insert(name);
  }
  return e.name;
}

const std::string &
WeightPlan::useStacked(const std::string &name,
                       const std::vector<std::string> &members,
                       const ir::TensorType &memberType, bool transposed) {
  ir::TensorType t = memberType;
  if (transposed)
    std::swap(t.dims[0], t.dims[1]);
  t.dims.insert(t.dims.begin(),
                ir::SymExpr(static_cast<int64_t>(members.size())));
  Entry &e = entryFor(name, t);
  e.members = members;
  e.memberType = memberType;
  e.membersTransposed = transposed;
  return use(name, t);
}

const std::string &WeightPlan::useInterleavedStack(
    const std::string &name, const std::vector<std::string> &members,
    int64_t interleave, const ir::TensorType &memberType, int64_t parts,
    int axis) {
  assert(interleave >= 1 && memberType.rank() == 2 &&
         members.size() % static_cast<size_t>(interleave) == 0 &&
         "an interleaved stack has G matrices per slice");
  assert(parts >= 1 && (axis == 0 || axis == 1) && "parts cut rows or columns");
  ir::TensorType t = memberType;
  t.dims[0] = t.dims[0] * ir::SymExpr(interleave);
  assert(t.dims[axis].getConstant().value_or(0) % parts == 0 &&
         "parts divide the matrix");
  if (parts > 1)
    t.dims[axis] = ir::SymExpr(t.dims[axis].getConstant().value_or(0) / parts);
  t.dims.insert(
      t.dims.begin(),
      ir::SymExpr(static_cast<int64_t>(members.size()) / interleave * parts));
  Entry &e = entryFor(name, t);
  e.members = members;
  e.memberType = memberType;
  e.interleave = interleave;
  e.parts = parts;
  e.partAxis = axis;
  return use(name, t);
}

const std::string &WeightPlan::useExpertBlocks(
    const std::string &name, const std::vector<StackSource> &sources,
    const ir::TensorType &view, const ExpertBlocks &layout) {
  assert((view.rank() == 3 || view.rank() == 2) &&
         "a stack of matrices or vectors");
  assert(!sources.empty() && (sources.size() == 1 || !layout.interleaveHalves));
  assert(layout.parts >= 1 && (layout.axis == 0 || layout.axis == 1));
  // A vector's slice is a column [C, 1].
  [[maybe_unused]] bool vectors = view.rank() == 2;
  assert((!vectors || (layout.axis == 0 && !layout.transposed)) &&
         "a vector is cut along its length");
  std::vector<ir::SymExpr> m(view.dims.begin() + 1, view.dims.end());
  if (layout.transposed)
    std::swap(m[0], m[1]);
  // The sources' rows alternate.
  m[0] = m[0] * ir::SymExpr(static_cast<int64_t>(sources.size()));
  // Cut in parts, or (firstPartOnly) whole in part 0 and zeros after it.
  int64_t cut = m[static_cast<size_t>(layout.axis)].getConstant().value_or(0);
  int64_t pieces = layout.firstPartOnly ? 1 : layout.parts;
  assert(cut % pieces == 0 && "parts divide the matrix");
  m[static_cast<size_t>(layout.axis)] = ir::SymExpr(cut / pieces);
  int64_t experts = view.dims[0].getConstant().value_or(0);
  m.insert(m.begin(), ir::SymExpr(experts * layout.parts));
  ir::TensorType t = view;
  t.dims = m;
  Entry &e = entryFor(name, t);
  e.members.clear();
  e.sourceTypes.clear();
  for (const StackSource &src : sources) {
    e.members.push_back(src.name);
    e.sourceTypes.push_back(src.type);
  }
  e.blocks = true;
  e.blockLayout = layout;
  e.view = view;
  return use(name, t);
}

WeightPlan::Entry WeightPlan::blockSource(const Entry &e, size_t i) const {
  Entry s;
  s.name = e.members[i];
  s.type = e.sourceTypes[i];
  for (const ir::SymExpr &d : s.type.dims)
    s.shape.push_back(d.getConstant().value_or(0));
  s.plain = true;
  s.inOut = inOutNames.count(s.name) > 0;
  return s;
}

WeightPlan::Entry WeightPlan::memberEntry(const Entry &stacked,
                                          size_t i) const {
  Entry m;
  m.name = stacked.members[i];
  m.type = stacked.memberType;
  m.shape.assign(stacked.shape.begin() + 1, stacked.shape.end());
  m.shape[static_cast<size_t>(stacked.partAxis)] *= stacked.parts;
  m.shape[0] /= stacked.interleave;
  if (stacked.membersTransposed)
    std::swap(m.shape[0], m.shape[1]);
  m.plain = true;
  m.inOut = inOutNames.count(m.name) > 0;
  return m;
}

QuantizedRef WeightPlan::useQuantized(const std::string &name,
                                      const ir::TensorType &type,
                                      const ir::QuantLayout &layout, bool inOut,
                                      int64_t expert, QuantRead read) {
  Entry &e = entryFor(name, type);
  e.quantized = true;
  e.layout = layout;
  e.inOut = inOut;
  const ir::QuantLayout &l = e.layout;
  int32_t scaleType = onnxDType(ir::dtypeName(scaleDType(type)));
  uint64_t scaleBytes = ir::dtypeBits(scaleDType(type)) / 8;
  std::string base =
      expert >= 0 ? fmt::format("{}.{}", name, expert) : std::string(name);
  uint64_t e0 = expert >= 0 ? static_cast<uint64_t>(expert) : 0;
  auto add = [&](const std::string &vn, int region, uint64_t offset,
                 uint64_t bytes, std::vector<int64_t> dims, int32_t t) {
    if (e.viewNames.insert(vn).second) {
      e.views.push_back(View{vn, region, offset, bytes, std::move(dims), t});
      return;
    }
    // One name, one view: readers of a view agree on its dims.
    assert(std::any_of(
               e.views.begin(), e.views.end(),
               [&](const View &v) { return v.name == vn && v.dims == dims; }) &&
           "two readers ask for one quantized view with different dims");
  };
  QuantizedRef r;
  r.layout = l;
  r.scaleType = scaleType;
  int64_t nb = l.blocksPerRow();
  bool forGather = read == QuantRead::Gather;
  // A stacked tensor read whole (expert -1): one view per region over all
  // experts, with the codes as QMoE (Stack) or a Scan of MatMulNBits
  // (Matrix) reads them.
  bool whole = expert < 0 && l.experts > 1;
  uint64_t count = whole ? static_cast<uint64_t>(l.experts) : 1;
  auto dims = [&](std::vector<int64_t> d) {
    if (whole)
      d.insert(d.begin(), l.experts);
    return d;
  };
  r.codes = base + (forGather ? ".qweight.gather" : ".qweight");
  std::vector<int64_t> codeDims =
      read == QuantRead::Matrix
          ? std::vector<int64_t>{l.rows, nb, l.blobBytes()}
          : std::vector<int64_t>{l.rows, nb * l.blobBytes()};
  add(r.codes, 1, e0 * l.codeBytesPerMatrix(), count * l.codeBytesPerMatrix(),
      dims(codeDims), onnx::TensorProto_DataType_UINT8);
  r.scales = base + ".scales";
  add(r.scales, 2, e0 * l.scalesPerMatrix() * scaleBytes,
      count * l.scalesPerMatrix() * scaleBytes, dims({l.rows, nb}), scaleType);
  if (!l.symmetric) {
    r.zeroPoints = base + ".zero_points";
    uint64_t zpb = l.zeroPointBytesPerRow();
    add(r.zeroPoints, 3, e0 * l.rows * zpb, count * l.rows * zpb,
        dims({l.rows, static_cast<int64_t>(zpb)}),
        onnx::TensorProto_DataType_UINT8);
  }
  return r;
}

QuantizedRef WeightPlan::quantizeStack(const std::string &name,
                                       const ir::QuantLayout &layout,
                                       QuantRead read) {
  auto it = index.find(name);
  assert(it != index.end() && "the stack is registered first");
  Entry &e = entries[it->second];
  assert((e.blocks || !e.members.empty()) && e.shape.size() == 3 &&
         e.shape[0] == layout.experts && e.shape[1] == layout.rows &&
         e.shape[2] == layout.cols && "a stack of [rows, cols] matrices");
  // The float form is not written.
  e.plain = false;
  e.viewNames.erase(name);
  std::erase_if(e.views, [&](const View &v) { return v.name == name; });
  return useQuantized(name, e.type, layout, /*inOut=*/false, /*expert=*/-1,
                      read);
}

uint64_t WeightPlan::regionBytes(const Entry &e, int region) const {
  const ir::QuantLayout &l = e.layout;
  uint64_t experts = static_cast<uint64_t>(l.experts);
  switch (region) {
  case 0:
    return e.plain ? numElements(e.shape) * ir::dtypeBits(e.type.dtype) / 8 : 0;
  case 1:
    return e.quantized ? experts * l.codeBytesPerMatrix() : 0;
  case 2:
    return e.quantized ? experts * l.scalesPerMatrix() *
                             (ir::dtypeBits(scaleDType(e.type)) / 8)
                       : 0;
  case 3:
    return e.quantized ? experts * l.rows * l.zeroPointBytesPerRow() : 0;
  }
  return 0;
}

uint64_t WeightPlan::totalBytes() const {
  uint64_t n = 0;
  for (const Entry &e : entries)
    for (int r = 0; r < 4; ++r)
      n += regionBytes(e, r);
  return n;
}

bool WeightPlan::validate(DiagnosticEngine &diags, const std::string &ckptPath,
                          bool reportUnused,
                          const std::set<std::string> *declared) {
  if (source != WeightSource::Checkpoint || !binder)
    return true;
  for (const Entry &e : entries) {
    if (e.blocks) {
      for (size_t i = 0; i < e.members.size(); ++i) {
        Entry s = blockSource(e, i);
        binder->bind(s.name, s.shape, ir::isFloat(s.type.dtype), s.inOut);
      }
      continue;
    }
    if (e.members.empty()) {
      binder->bind(e.name, e.shape, ir::isFloat(e.type.dtype), e.inOut);
      continue;
    }
    for (size_t i = 0; i < e.members.size(); ++i) {
      Entry m = memberEntry(e, i);
      binder->bind(m.name, m.shape, ir::isFloat(m.type.dtype), m.inOut);
    }
  }
  return binder->report(diags, ckptPath, reportUnused, declared);
}

const std::set<std::string> *WeightPlan::consumedTensors() const {
  return binder ? &binder->consumedTensors() : nullptr;
}

std::unique_ptr<FloatSource> WeightPlan::valuesOf(const Entry &e) const {
  if (source == WeightSource::Checkpoint && binder)
    if (const StoredTensor *t =
            binder->bind(e.name, e.shape, ir::isFloat(e.type.dtype), e.inOut))
      return binder->source(*t);
  if (source == WeightSource::Random)
    return randomSource(seed, e.name);
  return zeroSource();
}

template <typename Sink>
bool WeightPlan::produceTransposed(const Entry &e, DiagnosticEngine &diags,
                                   WeightStats &stats, Sink &&sink) const {
  // The [rows, cols] tensor in memory (converted or dequantized as a plain
  // tensor is), written as [cols, rows] in chunks of output rows.
  std::vector<uint8_t> whole;
  auto collect = [&whole](const uint8_t *p, uint64_t n, DiagnosticEngine &) {
    whole.insert(whole.end(), p, p + n);
    return true;
  };
  if (!produceTensor(e, diags, stats, collect))
    return false;
  const uint64_t rows = static_cast<uint64_t>(e.shape[0]),
                 cols = static_cast<uint64_t>(e.shape[1]);
  const size_t es = ir::dtypeBits(e.type.dtype) / 8;
  const uint64_t perChunk =
      std::max<uint64_t>(1, rows ? kChunkElems / rows : 1);
  std::vector<uint8_t> out(std::min(cols, perChunk) * rows * es);
  for (uint64_t c0 = 0; c0 < cols; c0 += perChunk) {
    uint64_t n = std::min(perChunk, cols - c0);
    switch (es) {
    case 2:
      transposeBlock<uint16_t>(whole.data(), out.data(), rows, cols, c0, n);
      break;
    case 4:
      transposeBlock<uint32_t>(whole.data(), out.data(), rows, cols, c0, n);
      break;
    case 8:
      transposeBlock<uint64_t>(whole.data(), out.data(), rows, cols, c0, n);
      break;
    default:
      transposeBlock<uint8_t>(whole.data(), out.data(), rows, cols, c0, n);
    }
    // produceTensor counted these bytes when it produced them.
    if (!sink(out.data(), n * rows * es, diags))
      return false;
  }
  return true;
}

bool WeightPlan::produceExpertMatrix(const Entry &stacked, size_t expert,
                                     DiagnosticEngine &diags,
                                     WeightStats &stats,
                                     std::vector<uint8_t> &matrix) const {
  const size_t g = static_cast<size_t>(stacked.interleave);
  std::vector<std::vector<uint8_t>> parts(g);
  for (size_t j = 0; j < g; ++j) {
    std::vector<uint8_t> &whole = parts[j];
    auto collect = [&whole](const uint8_t *p, uint64_t n, DiagnosticEngine &) {
      whole.insert(whole.end(), p, p + n);
      return true;
    };
    if (!produceTensor(memberEntry(stacked, expert * g + j), diags, stats,
                       collect))
      return false;
  }
  if (g == 1) {
    matrix = std::move(parts[0]);
    return true;
  }
  // Row r of member j at row r * G + j.
  const uint64_t rows = static_cast<uint64_t>(memberEntry(stacked, 0).shape[0]);
  const uint64_t rowBytes = rows ? parts[0].size() / rows : 0;
  matrix.clear();
  matrix.reserve(parts[0].size() * g);
  for (uint64_t r = 0; r < rows; ++r)
    for (size_t j = 0; j < g; ++j)
      matrix.insert(matrix.end(), parts[j].begin() + r * rowBytes,
                    parts[j].begin() + (r + 1) * rowBytes);
  return true;
}

template <typename Sink>
bool WeightPlan::produceInterleaved(const Entry &stacked,
                                    DiagnosticEngine &diags, WeightStats &stats,
                                    Sink &&sink) const {
  const size_t experts =
      stacked.members.size() / static_cast<size_t>(stacked.interleave);
  const uint64_t parts = static_cast<uint64_t>(stacked.parts);
  // The block's [rows, cols] (one entry of the stack).
  const uint64_t rows = static_cast<uint64_t>(stacked.shape[1]),
                 cols = static_cast<uint64_t>(stacked.shape[2]);
  const uint64_t es = ir::dtypeBits(stacked.type.dtype) / 8;
  std::vector<uint8_t> matrix;
  for (uint64_t p = 0; p < parts; ++p)
    for (size_t e = 0; e < experts; ++e) {
      // Blocks after the first re-produce the expert: counted once.
      WeightStats again;
      if (!produceExpertMatrix(stacked, e, diags, p ? again : stats, matrix))
        return false;
      if (stacked.partAxis == 0) {
        if (!sink(matrix.data() + p * rows * cols * es, rows * cols * es,
                  diags))
          return false;
        continue;
      }
      // Columns [p * cols, (p + 1) * cols) of every row.
      for (uint64_t r = 0; r < rows; ++r)
        if (!sink(matrix.data() + (r * parts + p) * cols * es, cols * es,
                  diags))
          return false;
    }
  return true;
}

template <typename Sink>
bool WeightPlan::produceExpertBlocks(const Entry &e, DiagnosticEngine &diags,
                                     WeightStats &stats, Sink &&sink) const {
  const ExpertBlocks &l = e.blockLayout;
  const size_t g = e.members.size();
  auto viewDim = [&](size_t i) {
    return static_cast<uint64_t>(e.view.dims[i].getConstant().value_or(0));
  };
  const uint64_t experts = viewDim(0);
  // One source's slice as the view has it ([sr, sc]; a vector's is [C,
  // 1]), then as the block reads it ([mr, mc], transposed or not).
  const uint64_t sr = viewDim(1), sc = e.view.rank() == 3 ? viewDim(2) : 1;
  const uint64_t n = sr * sc;
  const uint64_t mr = l.transposed ? sc : sr, mc = l.transposed ? sr : sc;
  // The expert's matrix: the sources' rows alternating, [g * mr, mc].
  const uint64_t rows = g * mr, cols = mc;
  const uint64_t parts = static_cast<uint64_t>(l.parts);
  const uint64_t pieces = l.firstPartOnly ? 1 : parts;
  const uint64_t bRows = l.axis == 0 ? rows / pieces : rows;
  const uint64_t bCols = l.axis == 1 ? cols / pieces : cols;
  const size_t es = ir::dtypeBits(e.type.dtype) / 8;
  std::vector<Entry> srcs;
  std::vector<std::unique_ptr<FloatSource>> values;
  for (size_t j = 0; j < g; ++j) {
    srcs.push_back(blockSource(e, j));
    values.push_back(valuesOf(srcs.back()));
  }
  std::vector<float> slice(g * n), matrix(rows * cols);
  std::vector<uint8_t> out(bRows * bCols * es);
  for (uint64_t p = 0; p < parts; ++p) {
    for (uint64_t x = 0; x < experts; ++x) {
      if (p > 0 && l.firstPartOnly) {
        std::fill(out.begin(), out.end(), 0);
      } else {
        for (size_t j = 0; j < g; ++j) {
          // Released on every pass: a later pass maps the pages again, so
          // memory holds one expert's slices whatever the stacks' size.
          values[j]->read(x * n, n, slice.data() + j * n);
          values[j]->release(x * n, n);
          if (!values[j]->error.empty()) {
            diags.error(SourceRange(), "cannot read weight '{}': {}",
                        srcs[j].name, values[j]->error);
            return false;
          }
        }
        // Row r of the expert's matrix is row `from` of source j's [mr, mc]
        // (its slice stored [sr, sc]).
        const uint64_t half = rows / 2;
        for (uint64_t r = 0; r < rows; ++r) {
          uint64_t j = g > 1 ? r % g : 0;
          uint64_t from = g > 1                ? r / g
                          : l.interleaveHalves ? (r % 2) * half + r / 2
                                               : r;
          const float *s = slice.data() + j * n;
          for (uint64_t c = 0; c < cols; ++c)
            matrix[r * cols + c] =
                l.transposed ? s[c * mr + from] : s[from * mc + c];
        }
        uint64_t r0 = l.axis == 0 ? p * bRows : 0;
        uint64_t c0 = l.axis == 1 ? p * bCols : 0;
        for (uint64_t r = 0; r < bRows; ++r)
          for (uint64_t c = 0; c < bCols; ++c)
            storeFloat(out.data() + (r * bCols + c) * es,
                       matrix[(r0 + r) * cols + c0 + c], e.type.dtype);
      }
      if (!sink(out.data(), out.size(), diags))
        return false;
      stats.bytesWritten += out.size();
    }
    // Later passes re-read the same data: counted once.
    if (p == 0)
      for (const auto &v : values)
        stats.bytesRead += v->bytesRead;
  }
  return true;
}

template <typename Sink>
bool WeightPlan::producePlain(const Entry &e, DiagnosticEngine &diags,
                              WeightStats &stats, Sink &&sink) const {
  if (e.blocks)
    return produceExpertBlocks(e, diags, stats, sink);
  if (e.interleave > 1 || e.parts > 1)
    return produceInterleaved(e, diags, stats, sink);
  if (!e.members.empty()) {
    // A stacked tensor: its members' data one after the other, each
    // streamed in chunks like a tensor of its own (or, for a transposed
    // stack, held in memory while it is transposed).
    for (size_t i = 0; i < e.members.size(); ++i) {
      Entry m = memberEntry(e, i);
      if (!(e.membersTransposed ? produceTransposed(m, diags, stats, sink)
                                : produceTensor(m, diags, stats, sink)))
        return false;
    }
    return true;
  }
  return e.transposed ? produceTransposed(e, diags, stats, sink)
                      : produceTensor(e, diags, stats, sink);
}

template <typename Sink>
bool WeightPlan::produceTensor(const Entry &e, DiagnosticEngine &diags,
                               WeightStats &stats, Sink &&sink) const {
  uint64_t n = numElements(e.shape);
  size_t outSize = ir::dtypeBits(e.type.dtype) / 8;
  std::vector<uint8_t> buf(std::min(n, kChunkElems) * outSize);
  bool wantFloat = ir::isFloat(e.type.dtype);
  const StoredTensor *stored =
      source == WeightSource::Checkpoint && binder
          ? binder->bind(e.name, e.shape, wantFloat, e.inOut)
          : nullptr;
  const StTensor *src = stored && !stored->quantized() ? stored->data : nullptr;
  // Float output from a quantized checkpoint tensor or generated data goes
  // through a FloatSource; same-dtype and integer tensors are copied.
  std::unique_ptr<FloatSource> values;
  std::vector<float> floats;
  if (wantFloat &&
      (!src ||
       !((src->dtype == StDType::F32 && e.type.dtype == ir::DType::F32) ||
         (src->dtype == StDType::F16 && e.type.dtype == ir::DType::F16) ||
         (src->dtype == StDType::BF16 && e.type.dtype == ir::DType::BF16)))) {
    if (stored || source != WeightSource::Checkpoint)
      values = valuesOf(e);
    floats.resize(std::min(n, kChunkElems));
  }
  size_t inSize = src ? stDTypeSize(src->dtype) : 0;
  for (uint64_t start = 0; start < n; start += kChunkElems) {
    uint64_t count = std::min(kChunkElems, n - start);
    uint8_t *out = buf.data();
    if (values) {
      values->read(start, count, floats.data());
      for (uint64_t i = 0; i < count; ++i)
        storeFloat(out + i * outSize, floats[i], e.type.dtype);
      values->release(start, count);
      if (!values->error.empty()) {
        diags.error(SourceRange(), "cannot read weight '{}': {}", e.name,
                    values->error);
        return false;
      }
    } else if (src) {
      const uint8_t *in = src->data + start * inSize;
      if (wantFloat ||
          (src->dtype == StDType::I64 && e.type.dtype == ir::DType::I64))
        std::memcpy(out, in, count * outSize);
      else
        for (uint64_t i = 0; i < count; ++i)
          storeInt(out + i * outSize, loadInt(in + i * inSize, src->dtype),
                   e.type.dtype);
      stats.bytesRead += count * inSize;
      ckpt->file(src->file).release(in, count * inSize);
    } else {
      std::memset(out, 0, count * outSize);
    }
    if (!sink(out, count * outSize, diags))
      return false;
    stats.bytesWritten += count * outSize;
  }
  if (values)
    stats.bytesRead += values->bytesRead;
  return true;
}

template <typename Sink>
bool WeightPlan::produceQuantized(const Entry &e, DiagnosticEngine &diags,
                                  WeightStats &stats, Sink &&codesSink,
                                  std::vector<uint8_t> &scales,
                                  std::vector<uint8_t> &zeroPoints) const {
  // A stack made of other tensors (quantizeStack): its float rows as the
  // float stack would be written.
  if (e.blocks || !e.members.empty())
    return quantizeProducedRows(e, diags, stats, codesSink, scales, zeroPoints);
  const ir::QuantLayout &l = e.layout;
  RowQuantizer quantizer(l, e.type, scales, zeroPoints);
  std::unique_ptr<FloatSource> values = valuesOf(e);
  const uint64_t N = static_cast<uint64_t>(l.rows),
                 K = static_cast<uint64_t>(l.cols);
  const uint64_t rowBytes = quantizer.codeBytes();
  // Output rows are quantized in tiles of T rows: rows of an [out, in]
  // matrix are contiguous; an [in, out] matrix is read column tiles.
  uint64_t T = std::max<uint64_t>(1, std::min<uint64_t>(N, kChunkElems / K));
  std::vector<float> tile(T * K), row(K);
  std::vector<uint8_t> codes(T * rowBytes);
  for (int64_t x = 0; x < l.experts; ++x) {
    uint64_t base = static_cast<uint64_t>(x) * N * K;
    for (uint64_t n0 = 0; n0 < N; n0 += T) {
      uint64_t t = std::min(T, N - n0);
      if (e.inOut) {
        for (uint64_t k = 0; k < K; ++k)
          values->read(base + k * N + n0, t, tile.data() + k * t);
      } else {
        values->read(base + n0 * K, t * K, tile.data());
        values->release(base + n0 * K, t * K);
      }
      for (uint64_t i = 0; i < t; ++i) {
        const float *src = tile.data() + i * K;
        if (e.inOut) {
          for (uint64_t k = 0; k < K; ++k)
            row[k] = tile[k * t + i];
          src = row.data();
        }
        quantizer.quantize(src, static_cast<uint64_t>(x) * N + n0 + i,
                           codes.data() + i * rowBytes);
      }
      if (!values->error.empty()) {
        diags.error(SourceRange(), "cannot read weight '{}': {}", e.name,
                    values->error);
        return false;
      }
      uint64_t bytes = t * rowBytes;
      if (!codesSink(codes.data(), bytes, diags))
        return false;
      stats.bytesWritten += bytes;
    }
    if (e.inOut)
      values->release(base, N * K);
  }
  stats.bytesRead += values->bytesRead;
  return true;
}

template <typename Sink>
bool WeightPlan::quantizeProducedRows(const Entry &e, DiagnosticEngine &diags,
                                      WeightStats &stats, Sink &&codesSink,
                                      std::vector<uint8_t> &scales,
                                      std::vector<uint8_t> &zeroPoints) const {
  const ir::QuantLayout &l = e.layout;
  RowQuantizer quantizer(l, e.type, scales, zeroPoints);
  const uint64_t K = static_cast<uint64_t>(l.cols);
  const size_t es = ir::dtypeBits(e.type.dtype) / 8;
  // Bytes arrive in pieces of any size; each complete row is quantized.
  std::vector<uint8_t> pending;
  pending.reserve(K * es);
  std::vector<float> row(K);
  std::vector<uint8_t> codes(quantizer.codeBytes());
  uint64_t r = 0;
  const uint64_t totalRows = static_cast<uint64_t>(l.experts * l.rows);
  auto rows = [&](const uint8_t *p, uint64_t n, DiagnosticEngine &d) {
    while (n > 0) {
      uint64_t take = std::min<uint64_t>(n, K * es - pending.size());
      pending.insert(pending.end(), p, p + take);
      p += take;
      n -= take;
      if (pending.size() < K * es)
        continue;
      if (r >= totalRows) {
        d.error(SourceRange(),
                "weight '{}' produced more rows than its "
                "{} x {} stack",
                e.name, l.experts, l.rows);
        return false;
      }
      for (uint64_t k = 0; k < K; ++k)
        row[k] = loadFloat(pending.data() + k * es, e.type.dtype);
      pending.clear();
      quantizer.quantize(row.data(), r++, codes.data());
      if (!codesSink(codes.data(), codes.size(), d))
        return false;
    }
    return true;
  };
  // The float bytes the producer counts are not written: its count is
  // replaced by the codes'.
  uint64_t written = stats.bytesWritten;
  if (!producePlain(e, diags, stats, rows))
    return false;
  stats.bytesWritten = written + r * codes.size();
  assert(r == totalRows && pending.empty() && "whole rows of the stack");
  return true;
}

static void describe(onnx::TensorProto *t, const std::string &name,
                     const std::vector<int64_t> &dims, int32_t type) {
  t->set_name(name);
  t->set_data_type(type);
  for (int64_t d : dims)
    t->add_dims(d);
}

bool WeightPlan::writeExternal(onnx::GraphProto &graph, ExternalDataWriter &out,
                               DiagnosticEngine &diags,
                               WeightStats &stats) const {
  bool write = source != WeightSource::Layout;
  auto sink = [&](const uint8_t *p, uint64_t n, DiagnosticEngine &d) {
    return out.write(p, n, d);
  };
  // Each region of an entry is placed on its own (aligned, in the chunk
  // that has room for it), so the codes, scales and zero points of one
  // quantized weight may lie in different data files; every view names its
  // region's file.
  struct Placed {
    std::string location;
    uint64_t offset = 0;
  };
  for (const Entry &e : entries) {
    Placed region[4];
    auto place = [&](int r) {
      return out.place(regionBytes(e, r), region[r].location, region[r].offset,
                       diags);
    };
    if (e.plain) {
      if (!place(0) || (write && !producePlain(e, diags, stats, sink)))
        return false;
    }
    if (e.quantized) {
      std::vector<uint8_t> scales, zps;
      // The scales and zero points are known once the codes are written.
      if (!place(1) ||
          (write && !produceQuantized(e, diags, stats, sink, scales, zps)))
        return false;
      if (!place(2) ||
          (write && !out.write(scales.data(), scales.size(), diags)))
        return false;
      stats.bytesWritten += write ? scales.size() : 0;
      if (!e.layout.symmetric) {
        if (!place(3) || (write && !out.write(zps.data(), zps.size(), diags)))
          return false;
        stats.bytesWritten += write ? zps.size() : 0;
      }
    }
    ++stats.tensors;
    for (const View &v : e.views) {
      onnx::TensorProto *t = graph.add_initializer();
      describe(t, v.name, v.dims, v.onnxType);
      t->set_data_location(onnx::TensorProto_DataLocation_EXTERNAL);
      auto add = [&](const std::string &k, const std::string &val) {
        auto *kv = t->add_external_data();
        kv->set_key(k);
        kv->set_value(val);
      };
      add("location", region[v.region].location);
      add("offset", std::to_string(region[v.region].offset + v.offset));
      add("length", std::to_string(v.bytes));
    }
  }
  return out.finish(diags);
}

bool WeightPlan::embed(onnx::GraphProto &graph, DiagnosticEngine &diags,
                       WeightStats &stats, ProgressBar *progress) const {
  for (const Entry &e : entries) {
    std::string region[4];
    auto appendTo = [progress](std::string &s) {
      return [&s, progress](const uint8_t *p, uint64_t n, DiagnosticEngine &) {
        s.append(reinterpret_cast<const char *>(p), n);
        if (progress)
          progress->advance(n);
        return true;
      };
    };
    if (e.plain && !producePlain(e, diags, stats, appendTo(region[0])))
      return false;
    if (e.quantized) {
      std::vector<uint8_t> scales, zps;
      if (!produceQuantized(e, diags, stats, appendTo(region[1]), scales, zps))
        return false;
      region[2].assign(scales.begin(), scales.end());
      region[3].assign(zps.begin(), zps.end());
      if (progress)
        progress->advance(scales.size() + zps.size());
    }
    ++stats.tensors;
    for (const View &v : e.views) {
      onnx::TensorProto *t = graph.add_initializer();
      describe(t, v.name, v.dims, v.onnxType);
      t->set_raw_data(region[v.region].substr(v.offset, v.bytes));
    }
  }
  if (progress)
    progress->finish();
  return true;
}

} // namespace archc
