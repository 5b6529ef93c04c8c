//===- WeightPlan.cpp - Which weights a model stores, and how -------------===//
//
// This file implements the registry the lowering asks for initializers
// (float, stacked, interleaved, expert blocks, quantized) and the check of
// the checkpoint against it. WeightWriter.cpp makes and writes the bytes.
//
//===----------------------------------------------------------------------===//
#include "emit/weights/WeightPlan.h"

#include "emit/onnx/OnnxBuilder.h"
#include "emit/weights/WeightElements.h"
#include "emit/weights/WeightStorage.h"

#include <fmt/format.h>

#include <algorithm>
#include <cassert>
#include <cstdlib>
#include <cstring>

namespace archc {

using namespace weights;

WeightPlan::WeightPlan(WeightSource source, const Checkpoint *ckpt,
                       uint64_t seed, const ir::CheckpointQuant &ckptQuant,
                       const PackedWeights *packed)
    : source(source), ckpt(ckpt), seed(seed), ckptQuant(ckptQuant),
      packed(packed), tile(kDefaultTileBytes),
      scratch(std::make_unique<weights::Scratch>()) {
  if (source == WeightSource::Checkpoint && ckpt)
    binder = std::make_unique<CheckpointBinder>(*ckpt, ckptQuant, packed);
  // Tests bind with tiles of a few elements: every band and tile edge.
  if (const char *env = std::getenv("ARCHC_WEIGHT_TILE_BYTES"))
    if (uint64_t bytes = std::strtoull(env, nullptr, 10))
      tile = bytes;
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
  if (layout.rowCount > 0)
    m[0] = ir::SymExpr(layout.rowCount);
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

bool chooseWeightSource(const std::string &weights, const std::string &init,
                        bool text, Checkpoint &ckpt, WeightSource &source,
                        DiagnosticEngine &diags) {
  source = WeightSource::Layout;
  if (text)
    return true;
  if (!weights.empty()) {
    if (!ckpt.open(weights, diags))
      return false;
    source = WeightSource::Checkpoint;
  } else if (init == "random") {
    source = WeightSource::Random;
  } else if (init == "zeros") {
    source = WeightSource::Zeros;
  }
  return true;
}

std::unique_ptr<WeightPlan>
makeWeightPlan(const ir::Module &m, WeightSource source, const Checkpoint *ckpt,
               uint64_t seed, const WeightStorage &storage) {
  auto plan = std::make_unique<WeightPlan>(
      source, source == WeightSource::Checkpoint ? ckpt : nullptr, seed,
      storage.checkpoint(),
      source == WeightSource::Checkpoint ? storage.packed() : nullptr);
  std::set<std::string> inOut;
  for (const ir::LinearWeightUse &u : ir::findLinearWeightUses(m))
    if (u.slice && u.inOut)
      inOut.insert(u.param->attr<std::string>("name"));
  plan->setInOutWeights(std::move(inOut));
  return plan;
}

} // namespace archc
