//===- LowerQuantized.cpp - ONNX lowering of quantized weights ------------===//
//
// This file lowers the readers of block-quantized weights (`--quant`):
//   matmul of a Linear weight -> com.microsoft MatMulNBits(A, codes, scales
//       [, zero_points]) with K, N, bits, block_size (and accuracy_level);
//       inside an expert body, a stacked weight's expert e is read through
//       its own view of the stacked codes (no float slice);
//   gather of an embedding table (--quant-embeddings) ->
//       com.microsoft GatherBlockQuantized(codes [V, blocks * blob], ids,
//       scales [, zero_points]), sliced to the table width when the last
//       block is padded. A tied table serves both from one set of codes.
// The quantized-linear helper takes any (activation, weight reference)
// pair, so a stacked-expert dispatch can reuse the same weights.
//
//===----------------------------------------------------------------------===//
#include "emit/lowering/OnnxLowering.h"
#include "emit/onnx/OnnxContribSchemas.h"

#include <map>

namespace archc {

void OnnxLowering::planQuantization() {
  // The expert bodies an unrolled dispatch of every quantized MoE layer
  // would copy (--quant-unroll-experts bounds them).
  ir::walk(module.graph.body, [&](const ir::Op &op) {
    if (op.getFamily() == ir::OpFamily::Experts &&
        expertBodyQuantized(*op.getRegions()[0]))
      quantExpertBodies += op.attr<int64_t>("count");
  });
  // Stacked weights read as [in, out] matrices bind gpt-oss's MXFP4 blocks
  // transposed (also without --quant, see OnnxEmitter).
  weightStorage.reportFloatProjections(diags);
}

ir::QuantLayout OnnxLowering::quantLayout(int64_t rows, int64_t cols,
                                          int64_t experts,
                                          const std::string &name) const {
  return weightStorage.layout(rows, cols, experts, module.activationDType,
                              name);
}

const PackedWeight *OnnxLowering::packedOf(const ir::LinearWeightUse &u) const {
  if (weightStorage.kindOf(u.matmul) != WeightStorage::Kind::CheckpointCodes)
    return nullptr;
  const std::string &name = u.param->attr<std::string>("name");
  return weightStorage.packedWeight(
      name.find("{e}") == std::string::npos
          ? name
          : ir::instantiatePattern(name, -1, std::max<int64_t>(expert, 0)));
}

const PackedWeight *OnnxLowering::commonPacked(const std::string &pattern,
                                               int64_t experts) const {
  const PackedWeight *first = nullptr;
  for (int64_t e = 0; e < experts; ++e) {
    const PackedWeight *p =
        weightStorage.packedWeight(ir::instantiatePattern(pattern, -1, e));
    if (!p || !p->perm.empty())
      return nullptr;
    if (first &&
        (p->containerBits != first->containerBits || p->block != first->block ||
         p->storeZeros != first->storeZeros))
      return nullptr;
    first = first ? first : p;
  }
  return first;
}

bool OnnxLowering::samePackedLayouts(const ir::LinearWeightUse &u,
                                     int64_t experts) const {
  return commonPacked(u.param->attr<std::string>("name"), experts) != nullptr;
}

std::string OnnxLowering::permutedInput(const std::string &x,
                                        const std::vector<int32_t> &perm) {
  // One Gather per input and permutation (q, k and v of a layer usually
  // share theirs; equal constants are one node).
  std::string indices = b.i32(perm);
  std::string key = x + "|" + indices;
  auto it = permuted.find(key);
  if (it != permuted.end())
    return it->second;
  return permuted[key] =
             b.node("Gather", {x, indices}, {OnnxAttr::integer("axis", -1)});
}

std::string OnnxLowering::paramName(const ir::Op &param) const {
  std::string name = param.attr<std::string>("name");
  if (expert >= 0)
    name = ir::instantiatePattern(name, -1, expert);
  return name;
}

QuantizedRef
OnnxLowering::scannedQuantizedWeight(const ir::LinearWeightUse &u) {
  const ir::Op &p = *u.param;
  const std::string &name = p.attr<std::string>("name");
  const ir::TensorType &type = p.getResult()->type;
  if (u.slice) // the checkpoint's stack, quantized expert by expert
    return weights.useQuantized(name, type,
                                quantLayout(u.rows, u.cols, u.experts), u.inOut,
                                -1, QuantRead::Matrix);
  // Per-expert [out, in] tensors: stacked in expert order, each expert's
  // rows quantized as it is produced (or the checkpoint's codes copied,
  // expertBodyStackable having checked that the experts share a layout).
  std::vector<std::string> members;
  for (int64_t e = 0; e < expertCount; ++e)
    members.push_back(ir::instantiatePattern(name, -1, e));
  std::string stacked =
      weights.useInterleavedStack(stackedWeightName(name), members, 1, type);
  return weights.quantizeStack(
      stacked, quantLayout(u.rows, u.cols, expertCount, members[0]),
      QuantRead::Matrix);
}

bool OnnxLowering::lowerQuantizedMatMul(const ir::Op &op,
                                        const ir::LinearWeightUse &u) {
  const ir::Op &p = *u.param;
  QuantizedRef r;
  if (!expertIndex.empty()) {
    // A Scan step over the experts: its expert's slices of the stacks.
    QuantizedRef whole = scannedQuantizedWeight(u);
    r.layout = whole.layout;
    r.codes = expertScanInput(whole.codes, onnx::TensorProto_DataType_UINT8);
    r.scales = expertScanInput(whole.scales, whole.scaleType);
    if (!whole.zeroPoints.empty())
      r.zeroPoints =
          expertScanInput(whole.zeroPoints, onnx::TensorProto_DataType_UINT8);
  } else {
    std::string name = paramName(p);
    if (name.find('{') != std::string::npos)
      return fail(op, "weight '" + name + "' still has a placeholder");
    if (u.slice && expert < 0)
      return fail(op, "expert_slice outside an expert body");
    r = weights.useQuantized(name, p.getResult()->type,
                             quantLayout(u.rows, u.cols, u.experts, name),
                             u.inOut, u.slice ? expert : -1, QuantRead::Matrix);
  }
  std::vector<OnnxAttr> attrs = {
      OnnxAttr::integer("K", u.cols), OnnxAttr::integer("N", u.rows),
      OnnxAttr::integer("bits", r.layout.bits),
      OnnxAttr::integer("block_size", r.layout.block)};
  if (quant.accuracyLevel != 0)
    attrs.push_back(OnnxAttr::integer("accuracy_level", quant.accuracyLevel));
  // Act-order codes are stored in the order of their groups: the
  // activations are gathered into that order (exact; MatMulNBits' own
  // g_idx input is deprecated and not implemented by every provider).
  std::string a = in(op.getOperand(0));
  if (const PackedWeight *pw = expertIndex.empty() ? packedOf(u) : nullptr;
      pw && !pw->perm.empty())
    a = permutedInput(a, pw->perm);
  def(op.getResult(),
      b.nodeInDomain(kContribDomain, "MatMulNBits",
                     {a, r.codes, r.scales, r.zeroPoints}, attrs));
  contribOps = true;
  return true;
}

bool OnnxLowering::lowerGroupedQuantized(const ir::Op &op,
                                         const ir::GroupedWeightUse &u) {
  // [G * R, K] codes read as G matrices [R, K]; the input [..., G, M, K]
  // as [G, N, K], a Scan over the groups, and back.
  const ir::Op &p = *u.param;
  QuantizedRef r = weights.useQuantized(paramName(p), p.getResult()->type,
                                        quantLayout(u.rows, u.cols, u.groups),
                                        /*inOut=*/false, -1, QuantRead::Matrix);
  const std::string a = in(op.getOperand(0));
  const int64_t rank = static_cast<int64_t>(op.getOperand(0)->type.rank());
  std::vector<int64_t> toGroups = {rank - 3}, back;
  for (int64_t i = 0; i < rank - 3; ++i)
    toGroups.push_back(i);
  toGroups.insert(toGroups.end(), {rank - 2, rank - 1});
  for (int64_t i = 1; i <= rank - 3; ++i)
    back.push_back(i);
  back.insert(back.end(), {0, rank - 2, rank - 1});
  std::string ag = b.node(
      "Reshape", {b.node("Transpose", {a}, {OnnxAttr::list("perm", toGroups)}),
                  b.i64({u.groups, -1, u.cols})});
  std::string y = perHeadMatMulNBits(ag, r, u.cols, u.rows); // [G, N, R]
  std::string shapeA = b.node("Shape", {a});
  std::string shape = b.node(
      "Concat",
      {b.i64({u.groups}),
       b.node("Slice", {shapeA, b.i64({0}), b.i64({rank - 3}), b.i64({0})}),
       b.node("Slice",
              {shapeA, b.i64({rank - 2}), b.i64({rank - 1}), b.i64({0})}),
       b.i64({u.rows})},
      {OnnxAttr::integer("axis", 0)});
  def(op.getResult(), b.node("Transpose", {b.node("Reshape", {y, shape})},
                             {OnnxAttr::list("perm", back)}));
  return true;
}

bool OnnxLowering::lowerQuantizedGather(const ir::Op &op) {
  const ir::Op &p = *op.getOperand(0)->getDefiningOp();
  const ir::TensorType &t = p.getResult()->type;
  int64_t rows = t.dims[0].getConstant().value_or(0);
  int64_t cols = t.dims[1].getConstant().value_or(0);
  QuantizedRef r =
      weights.useQuantized(paramName(p), t, quantLayout(rows, cols, 1),
                           /*inOut=*/false, -1, QuantRead::Gather);
  std::string y =
      b.nodeInDomain(kContribDomain, "GatherBlockQuantized",
                     {r.codes, in(op.getOperand(1)), r.scales, r.zeroPoints},
                     {OnnxAttr::integer("bits", quant.bits),
                      OnnxAttr::integer("block_size", quant.block),
                      OnnxAttr::integer("gather_axis", 0),
                      OnnxAttr::integer("quantize_axis", 1)});
  // The codes cover whole blocks; drop the last block's padding.
  if (r.layout.blocksPerRow() * quant.block != cols)
    y = b.node("Slice", {y, b.i64({0}), b.i64({cols}), b.i64({-1})});
  def(op.getResult(), y);
  contribOps = true;
  return true;
}

} // namespace archc
