//===- LowerMla.cpp - ONNX lowering of multi-head latent attention --------===//
//
// This file lowers `mla_attention` in the absorbed form, which never
// expands the cached latent into per-head keys and values:
//   U = kv_weight viewed [H, dn + dv, c];  U_K = U[:, :dn],  U_V = U[:, dn:]
//   q_lat = q_nope · U_K                         [B, H, S, c]
//   z     = scale · (q_lat · latentᵀ + q_pe · k_peᵀ)   [B, H, S, T]
//   p     = softmax(mask(z))   (float32)
//   o     = (p · latent) · U_Vᵀ                  [B, H, S, dv]
// This equals expanding K = [latent · U_Kᵀ | k_pe], V = latent · U_Vᵀ and
// running ordinary attention, and costs per decode step O(T·H·(c + dr))
// instead of the O(T·c·H·(dn + dv)) of re-expanding the cache.
//
// Under --quant the two per-head products read block-quantized weights:
// U_Kᵀ [H, c, dn] quantized along dn and U_V [H, dv, c] along c (each
// product's own inputs), stored as stacks of per-head MatMulNBits codes
// (`<kv>.uk_t.qweight`, `<kv>.uv.qweight`) and run by a Scan over the
// heads, each step one MatMulNBits on its head's codes.
//
//===----------------------------------------------------------------------===//
#include "emit/lowering/OnnxLowering.h"
#include "emit/onnx/OnnxContribSchemas.h"

#include <cfloat>
#include <cmath>

namespace archc {

std::string OnnxLowering::perHeadMatMulNBits(const std::string &a,
                                             const QuantizedRef &q, int64_t k,
                                             int64_t n) {
  // Scan over the heads: a [H, M, k] and the stacks of codes, scales (and
  // zero points) as scan inputs; each step MatMulNBits -> [M, n]; the scan
  // output [H, M, n].
  onnx::GraphProto body;
  body.set_name(b.fresh("mla_head"));
  SavedCaches saved = saveCaches();
  GraphBuilder::Target outer = b.retarget(body, body.name() + "_");
  std::string ah = b.fresh("a"), codes = b.fresh("codes"),
              scales = b.fresh("scales"), zps;
  addGraphInput(body, ah, act);
  addGraphInput(body, codes, onnx::TensorProto_DataType_UINT8);
  addGraphInput(body, scales, q.scaleType);
  std::vector<std::string> outerIns = {a, q.codes, q.scales};
  if (!q.zeroPoints.empty()) {
    zps = b.fresh("zero_points");
    addGraphInput(body, zps, onnx::TensorProto_DataType_UINT8);
    outerIns.push_back(q.zeroPoints);
  }
  std::vector<OnnxAttr> attrs = {
      OnnxAttr::integer("K", k), OnnxAttr::integer("N", n),
      OnnxAttr::integer("bits", q.layout.bits),
      OnnxAttr::integer("block_size", q.layout.block)};
  if (quant.accuracyLevel != 0)
    attrs.push_back(OnnxAttr::integer("accuracy_level", quant.accuracyLevel));
  std::vector<std::string> ins = {ah, codes, scales};
  if (!zps.empty())
    ins.push_back(zps);
  std::string y = b.nodeInDomain(kContribDomain, "MatMulNBits", ins, attrs);
  addGraphOutput(body, y, act);
  b.restore(std::move(outer));
  restoreCaches(std::move(saved));
  contribOps = true;
  return b.nodeN("Scan", outerIns,
                 {OnnxAttr::graph("body", std::move(body)),
                  OnnxAttr::integer("num_scan_inputs",
                                    static_cast<int64_t>(outerIns.size()))},
                 1, "mla_heads")[0];
}

bool OnnxLowering::lowerMlaAttention(const ir::Op &op) {
  const ir::TensorType &qt = op.getOperand(0)->type;
  int64_t heads = qt.dims[2].getConstant().value_or(0);
  int64_t dn = qt.dims[3].getConstant().value_or(0);
  int64_t dv = op.attr<int64_t>("v_dim");
  int64_t c = op.getOperand(2)->type.dims[2].getConstant().value_or(0);
  // Copies: the per-head Scan saves and restores the value names.
  const std::string qNope = in(op.getOperand(0));
  const std::string qPe = in(op.getOperand(1));
  const std::string latent = in(op.getOperand(2)); // [B, T, c]
  const std::string kPe = in(op.getOperand(3));    // [B, T, dr]

  auto heads1 = [&](const std::string &x) { // [B, S, H, d] -> [B, H, S, d]
    return b.node("Transpose", {x}, {OnnxAttr::list("perm", {0, 2, 1, 3})});
  };
  // --quant: the per-head products on U_K^T and U_V codes (Scan over the
  // heads); otherwise the float weight viewed [H, dn + dv, c].
  auto quantized = weightStorage.quantizedMla().find(&op);
  bool q = quantized != weightStorage.quantizedMla().end();
  std::string uk, uv;
  QuantizedRef qk, qv;
  if (q) {
    const ir::Op &p = *quantized->second.param;
    std::string name = paramName(p);
    const ir::TensorType &type = p.getResult()->type;
    ir::TensorType view = type;
    view.dims = {ir::SymExpr(heads), ir::SymExpr(dn + dv), ir::SymExpr(c)};
    WeightPlan::ExpertBlocks k;
    k.transposed = true; // U_K^T [H, c, dn]
    k.rowCount = dn;
    qk = weights.quantizeStack(
        weights.useExpertBlocks(name + ".uk_t", {{name, type}}, view, k),
        quantLayout(c, dn, heads), QuantRead::Matrix);
    WeightPlan::ExpertBlocks v; // U_V [H, dv, c]
    v.firstRow = dn;
    v.rowCount = dv;
    qv = weights.quantizeStack(
        weights.useExpertBlocks(name + ".uv", {{name, type}}, view, v),
        quantLayout(dv, c, heads), QuantRead::Matrix);
  } else {
    const std::string &w = in(op.getOperand(4)); // [H * (dn + dv), c]
    std::string u = b.node("Reshape", {w, b.i64({heads, dn + dv, c})});
    uk = b.node("Slice", {u, b.i64({0}), b.i64({dn}), b.i64({1})});
    uv = b.node("Slice", {u, b.i64({dn}), b.i64({dn + dv}), b.i64({1})});
  }
  // [B, H, S, d] <-> [H, B * S, d] for the per-head Scan.
  auto toHeads = [&](const std::string &x, int64_t d) {
    return b.node("Reshape", {b.node("Transpose", {x},
                                     {OnnxAttr::list("perm", {1, 0, 2, 3})}),
                              b.i64({heads, -1, d})});
  };
  auto fromHeads = [&](const std::string &y, const std::string &like,
                       int64_t d) { // [H, B * S, d] -> [B, H, S, d]
    std::string bs = b.node(
        "Slice", {b.node("Shape", {like}), b.i64({0}), b.i64({2}), b.i64({0})});
    std::string shape = b.node("Concat", {b.i64({heads}), bs, b.i64({d})},
                               {OnnxAttr::integer("axis", 0)}); // [H, B, S, d]
    return b.node("Transpose", {b.node("Reshape", {y, shape})},
                  {OnnxAttr::list("perm", {1, 0, 2, 3})});
  };
  auto keysT = [&](const std::string &x) { // [B, T, d] -> [B, 1, d, T]
    return b.node("Transpose", {b.node("Unsqueeze", {x, b.i64({1})})},
                  {OnnxAttr::list("perm", {0, 1, 3, 2})});
  };
  std::string qLat = // [B, H, S, c]
      q ? fromHeads(perHeadMatMulNBits(toHeads(heads1(qNope), dn), qk, dn, c),
                    qNope, c)
        : b.node("MatMul", {heads1(qNope), uk});
  std::string scores =
      b.node("Add", {b.node("MatMul", {qLat, keysT(latent)}),
                     b.node("MatMul", {heads1(qPe), keysT(kPe)})});
  scores = widen(scores);
  const double *scaleAttr = op.optAttr<double>("scale");
  double scale =
      scaleAttr
          ? *scaleAttr
          : 1.0 /
                std::sqrt(static_cast<double>(
                    dn +
                    op.getOperand(1)->type.dims[3].getConstant().value_or(0)));
  scores = b.node("Mul", {scores, b.f32Scalar(static_cast<float>(scale))});
  // The latent acts as one key/value head shared by all H query heads:
  // [B, 1, H, S, T] matches the mask layout [B, Hkv, G, S, T].
  std::string scores5 = b.node("Unsqueeze", {scores, b.i64({1})});
  std::string allowed = allowedMask(op, qNope, latent, 1, 0);
  scores5 = b.node("Where", {allowed, scores5, b.f32Scalar(-FLT_MAX)});
  std::string probs = narrow(b.node(
      "Squeeze", {b.node("Softmax", {scores5}, {OnnxAttr::integer("axis", -1)}),
                  b.i64({1})}));
  std::string oLat = b.node(
      "MatMul",
      {probs, b.node("Unsqueeze", {latent, b.i64({1})})}); // [B, H, S, c]
  std::string o =
      q ? fromHeads(perHeadMatMulNBits(toHeads(oLat, c), qv, c, dv), qNope, dv)
        : b.node("MatMul", {oLat, b.node("Transpose", {uv},
                                         {OnnxAttr::list("perm", {0, 2, 1})})});
  def(op.getResult(), heads1(o)); // [B, S, H, dv]
  return true;
}

} // namespace archc
