//===- LowerReduce.cpp - ONNX lowering of reductions and top-k masks ------===//
//
// This file lowers
//   reduce_sum / reduce_mean: ReduceSum / ReduceMean over the listed axes,
//       accumulated in float32;
//   sinkhorn: the 2 iters - 1 normalisation steps unrolled (ReduceSum, Add
//       eps, Div), in float32;
//   topk_mask: the scores of keys a query may not see (causal: query j of
//       S sits at key position T - S + j; `valid` flags) become -inf, TopK
//       with k' = min(k, T) picks each row's best keys, ScatterElements
//       marks them in a [B, S, T] grid, and the grid is and-ed with the
//       visibility (a pick among invisible keys - fewer than k visible - is
//       dropped).
//
//===----------------------------------------------------------------------===//
#include "emit/OnnxLowering.h"

#include <limits>

namespace archc {

bool OnnxLowering::lowerReduce(const ir::Op &op) {
  const ir::Value *x = op.getOperand(0);
  if (op.getKind() == ir::OpKind::TopkMask)
    return lowerTopkMask(op);
  if (op.getKind() == ir::OpKind::Sinkhorn) {
    // Unrolled in float32: each step divides by the sums over one axis.
    std::string c = widen(in(x));
    std::string eps = b.f32Scalar(static_cast<float>(op.attr<double>("eps")));
    auto normalize = [&](int64_t axis) {
      c = b.node("Div",
                 {c, b.node("Add", {b.node("ReduceSum", {c, b.i64({axis})},
                                           {OnnxAttr::integer("keepdims", 1)}),
                                    eps})});
    };
    normalize(-2);
    for (int64_t i = 1; i < op.attr<int64_t>("iters"); ++i) {
      normalize(-1);
      normalize(-2);
    }
    def(op.getResult(), narrowTo(c, x->type.dtype));
    return true;
  }
  const auto &axes = op.attr<std::vector<int64_t>>("axes");
  int64_t keep = op.attr<bool>("keepdims") ? 1 : 0;
  std::string y;
  if (op.getKind() == ir::OpKind::ReduceSum)
    y = b.node("ReduceSum", {widen(in(x)), b.i64(axes)},
               {OnnxAttr::integer("keepdims", keep)});
  else // opset 17: ReduceMean takes its axes as an attribute
    y = b.node(
        "ReduceMean", {widen(in(x))},
        {OnnxAttr::list("axes", axes), OnnxAttr::integer("keepdims", keep)});
  def(op.getResult(), x->type.dtype == ir::DType::F32
                          ? y
                          : castTo(y, onnxDType(ir::dtypeName(x->type.dtype))));
  return true;
}

bool OnnxLowering::lowerTopkMask(const ir::Op &op) {
  constexpr int32_t kBool = onnx::TensorProto_DataType_BOOL;
  std::string scores =
      b.node("Cast", {in(op.getOperand(0))},
             {OnnxAttr::integer("to", onnx::TensorProto_DataType_FLOAT)});
  std::string shape = b.node("Shape", {scores});
  std::string t = b.node("Slice", {shape, b.i64({2}), b.i64({3})}); // [1]
  std::string s = b.node("Slice", {shape, b.i64({1}), b.i64({2})});
  std::string allowed;
  if (op.attr<bool>("causal")) {
    std::string tS = b.node("Squeeze", {t, b.i64({0})});
    std::string sS = b.node("Squeeze", {s, b.i64({0})});
    std::string kpos = b.node("Range", {b.i64Scalar(0), tS, b.i64Scalar(1)});
    std::string qpos =
        b.node("Range", {b.node("Sub", {tS, sS}), tS, b.i64Scalar(1)});
    allowed = b.node("LessOrEqual", {b.node("Unsqueeze", {kpos, b.i64({0})}),
                                     b.node("Unsqueeze", {qpos, b.i64({1})})});
  }
  if (const ir::Value *valid = op.operand("valid")) {
    std::string v =
        b.node("Unsqueeze",
               {b.node("Cast", {in(valid)}, {OnnxAttr::integer("to", kBool)}),
                b.i64({1})}); // [B, 1, T]
    allowed = allowed.empty() ? v : b.node("And", {allowed, v});
  }
  if (!allowed.empty())
    scores =
        b.node("Where", {allowed, scores,
                         b.f32Scalar(-std::numeric_limits<float>::infinity())});
  std::string k = b.node("Min", {b.i64({op.attr<int64_t>("k")}), t});
  std::vector<std::string> top =
      b.nodeN("TopK", {scores, k},
              {OnnxAttr::integer("axis", -1), OnnxAttr::integer("largest", 1),
               OnnxAttr::integer("sorted", 1)},
              2);
  // Mark the picks: a [B, S, T] grid of zeros with ones scattered in.
  std::string zeros = b.node("ConstantOfShape", {shape}); // float32 zeros
  std::string ones =
      b.node("Expand", {b.f32Scalar(1.0f), b.node("Shape", {top[1]})});
  std::string picked = b.node("Cast",
                              {b.node("ScatterElements", {zeros, top[1], ones},
                                      {OnnxAttr::integer("axis", -1)})},
                              {OnnxAttr::integer("to", kBool)});
  def(op.getResult(),
      allowed.empty() ? picked : b.node("And", {picked, allowed}));
  return true;
}

} // namespace archc
