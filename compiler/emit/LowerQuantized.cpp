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
#include "emit/OnnxContribSchemas.h"
#include "emit/OnnxLowering.h"

#include <map>

namespace archc {

void OnnxLowering::planQuantization() {
  // How often each value is read, to keep slices other ops also read.
  std::map<const ir::Value *, int> reads;
  ir::walk(module.graph.body, [&](const ir::Op &op) {
    for (const ir::Value *v : op.operands)
      ++reads[v];
  });
  for (const ir::LinearWeightUse &u : ir::findLinearWeightUses(module)) {
    if (u.slice && reads[u.slice->getResult()] != 1)
      continue;
    quantMatmuls[u.matmul] = u;
    quantParams.insert(u.param);
    if (u.slice)
      quantSlices.insert(u.slice);
  }
  if (quant.embeddings)
    for (const ir::Op *g : ir::findEmbeddingGathers(module)) {
      quantGathers.insert(g);
      quantParams.insert(g->getOperand(0)->getDefiningOp());
    }
  // Stacked weights read as [in, out] matrices bind gpt-oss's MXFP4 blocks
  // transposed (also without --quant, see OnnxEmitter).
}

ir::QuantLayout OnnxLowering::quantLayout(int64_t rows, int64_t cols,
                                          int64_t experts) const {
  ir::QuantLayout l;
  l.bits = quant.bits;
  l.block = quant.block;
  l.rows = rows;
  l.cols = cols;
  l.experts = experts;
  l.symmetric = quant.symmetric;
  l.scaleBits = ir::dtypeBits(module.activationDType);
  return l;
}

std::string OnnxLowering::paramName(const ir::Op &param) const {
  std::string name = param.attr<std::string>("name");
  if (expert >= 0)
    name = ir::instantiatePattern(name, -1, expert);
  return name;
}

bool OnnxLowering::lowerQuantizedMatMul(const ir::Op &op,
                                        const ir::LinearWeightUse &u) {
  const ir::Op &p = *u.param;
  std::string name = paramName(p);
  if (name.find('{') != std::string::npos)
    return fail(op, "weight '" + name + "' still has a placeholder");
  if (u.slice && expert < 0)
    return fail(op, "expert_slice outside an expert body");
  QuantizedRef r = weights.useQuantized(
      name, p.getResult()->type, quantLayout(u.rows, u.cols, u.experts),
      u.inOut, u.slice ? expert : -1, /*forGather=*/false);
  std::vector<OnnxAttr> attrs = {OnnxAttr::integer("K", u.cols),
                                 OnnxAttr::integer("N", u.rows),
                                 OnnxAttr::integer("bits", quant.bits),
                                 OnnxAttr::integer("block_size", quant.block)};
  if (quant.accuracyLevel != 0)
    attrs.push_back(OnnxAttr::integer("accuracy_level", quant.accuracyLevel));
  def(op.getResult(),
      b.nodeInDomain(kContribDomain, "MatMulNBits",
                     {in(op.getOperand(0)), r.codes, r.scales, r.zeroPoints},
                     attrs));
  contribOps = true;
  return true;
}

bool OnnxLowering::lowerQuantizedGather(const ir::Op &op) {
  const ir::Op &p = *op.getOperand(0)->getDefiningOp();
  const ir::TensorType &t = p.getResult()->type;
  int64_t rows = t.dims[0].getConstant().value_or(0);
  int64_t cols = t.dims[1].getConstant().value_or(0);
  QuantizedRef r =
      weights.useQuantized(paramName(p), t, quantLayout(rows, cols, 1),
                           /*inOut=*/false, -1, /*forGather=*/true);
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
