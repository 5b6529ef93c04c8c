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
//===----------------------------------------------------------------------===//
#include "emit/lowering/OnnxLowering.h"

#include <cfloat>
#include <cmath>

namespace archc {

bool OnnxLowering::lowerMlaAttention(const ir::Op &op) {
  const ir::TensorType &qt = op.getOperand(0)->type;
  int64_t heads = qt.dims[2].getConstant().value_or(0);
  int64_t dn = qt.dims[3].getConstant().value_or(0);
  int64_t dv = op.attr<int64_t>("v_dim");
  int64_t c = op.getOperand(2)->type.dims[2].getConstant().value_or(0);
  const std::string &qNope = in(op.getOperand(0));
  const std::string &qPe = in(op.getOperand(1));
  const std::string &latent = in(op.getOperand(2)); // [B, T, c]
  const std::string &kPe = in(op.getOperand(3));    // [B, T, dr]
  const std::string &w = in(op.getOperand(4));      // [H * (dn + dv), c]

  std::string u = b.node("Reshape", {w, b.i64({heads, dn + dv, c})});
  std::string uk = b.node("Slice", {u, b.i64({0}), b.i64({dn}), b.i64({1})});
  std::string uv =
      b.node("Slice", {u, b.i64({dn}), b.i64({dn + dv}), b.i64({1})});
  auto heads1 = [&](const std::string &x) { // [B, S, H, d] -> [B, H, S, d]
    return b.node("Transpose", {x}, {OnnxAttr::list("perm", {0, 2, 1, 3})});
  };
  auto keysT = [&](const std::string &x) { // [B, T, d] -> [B, 1, d, T]
    return b.node("Transpose", {b.node("Unsqueeze", {x, b.i64({1})})},
                  {OnnxAttr::list("perm", {0, 1, 3, 2})});
  };
  std::string qLat = b.node("MatMul", {heads1(qNope), uk}); // [B, H, S, c]
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
  std::string o = b.node(
      "MatMul",
      {oLat, b.node("Transpose", {uv}, {OnnxAttr::list("perm", {0, 2, 1})})});
  def(op.getResult(), heads1(o)); // [B, S, H, dv]
  return true;
}

} // namespace archc
