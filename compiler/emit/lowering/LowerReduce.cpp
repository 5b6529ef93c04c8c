//===- LowerReduce.cpp - ONNX lowering of reductions and top-k masks ------===//
//
// This file lowers
//   reduce_sum / reduce_mean: ReduceSum / ReduceMean over the listed axes,
//       accumulated in float32;
//   sinkhorn: the 2 iters - 1 normalisation steps (ReduceSum, Add eps,
//       Div), in float32, all but the first in an ONNX Loop;
//   topk_mask: the scores of keys a query may not see (causal: query j of
//       S sits at key position T - S + j; `valid` flags) become -inf, TopK
//       with k' = min(k, T) picks each row's best keys, ScatterElements
//       marks them in a [B, S, T] grid, and the grid is and-ed with the
//       visibility (a pick among invisible keys - fewer than k visible - is
//       dropped).
//
//===----------------------------------------------------------------------===//
#include "emit/lowering/OnnxLowering.h"

#include <limits>

namespace archc {

bool OnnxLowering::lowerReduce(const ir::Op &op) {
  const ir::Value *x = op.getOperand(0);
  if (op.getKind() == ir::OpKind::TopkMask)
    return lowerTopkMask(op);
  if (op.getKind() == ir::OpKind::Sinkhorn) {
    // In float32: each step divides by the sums over one axis; the first
    // over the columns, then iters - 1 (rows, columns) pairs, the body of
    // an ONNX Loop (the graph does not grow with iters).
    std::string c = widen(in(x));
    std::string eps = b.f32Scalar(static_cast<float>(op.attr<double>("eps")));
    auto normalize = [&](GraphBuilder &g, const std::string &t, int64_t axis) {
      return g.node(
          "Div", {t, g.node("Add", {g.node("ReduceSum", {t, g.i64({axis})},
                                           {OnnxAttr::integer("keepdims", 1)}),
                                    eps})});
    };
    c = normalize(b, c, -2);
    int64_t pairs = op.attr<int64_t>("iters") - 1;
    if (pairs > 0) {
      onnx::GraphProto body;
      body.set_name(b.fresh("sinkhorn_step"));
      GraphBuilder s(body, body.name() + "_");
      std::string iter = s.fresh("iter"), condIn = s.fresh("cond"),
                  cIn = s.fresh("c");
      auto input = [&](const std::string &n, int32_t t, bool scalar) {
        onnx::ValueInfoProto *vi = body.add_input();
        vi->set_name(n);
        auto *tt = vi->mutable_type()->mutable_tensor_type();
        tt->set_elem_type(t);
        if (scalar) // Loop needs the iteration number and condition rank 0
          tt->mutable_shape();
      };
      input(iter, onnx::TensorProto_DataType_INT64, true);
      input(condIn, onnx::TensorProto_DataType_BOOL, true);
      input(cIn, onnx::TensorProto_DataType_FLOAT, false);
      // The condition passes through as the body's own input (no copy);
      // the matrix is renamed its output by produceOutputsInPlace.
      std::string cOut = s.fresh("c_out");
      s.nodeNamed("Identity", {normalize(s, normalize(s, cIn, -1), -2)}, cOut);
      for (const auto &[n, t] :
           {std::pair{condIn, onnx::TensorProto_DataType_BOOL},
            std::pair{cOut, onnx::TensorProto_DataType_FLOAT}}) {
        onnx::ValueInfoProto *vi = body.add_output();
        vi->set_name(n);
        vi->mutable_type()->mutable_tensor_type()->set_elem_type(t);
      }
      c = b.node("Loop", {b.i64Scalar(pairs), "", c},
                 {OnnxAttr::graph("body", std::move(body))}, "sinkhorn");
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
  std::string scores = asFloat32(op, 0);
  // [B, S, T] from the graph's symbols where it can (one copy for every
  // layer, and so one causal grid), else from the scores.
  const ir::TensorType &st = op.getOperand(0)->type;
  std::string shape = sharedShape(st.dims);
  std::string t = dimTensor(st.dims[2]), s = dimTensor(st.dims[1]); // [1]
  if (shape.empty() || t.empty() || s.empty()) {
    shape = b.node("Shape", {scores});
    t = b.node("Slice", {shape, b.i64({2}), b.i64({3})});
    s = b.node("Slice", {shape, b.i64({1}), b.i64({2})});
  }
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
  // Ones shaped as the picks [B, S, k']: from the graph's symbols where it
  // can (one tensor for every layer).
  std::string lead = sharedShape({st.dims[0], st.dims[1]});
  std::string picksShape =
      lead.empty()
          ? b.node("Shape", {top[1]})
          : b.node("Concat", {lead, k}, {OnnxAttr::integer("axis", 0)});
  std::string ones = b.node("Expand", {b.f32Scalar(1.0f), picksShape});
  std::string picked = b.node("Cast",
                              {b.node("ScatterElements", {zeros, top[1], ones},
                                      {OnnxAttr::integer("axis", -1)})},
                              {OnnxAttr::integer("to", kBool)});
  def(op.getResult(),
      allowed.empty() ? picked : b.node("And", {picked, allowed}));
  return true;
}

} // namespace archc
