//===- LowerMoe.cpp - ONNX lowering of MoE routing ------------------------===//
//
// This file lowers `route` (scores, optional selection bias, group-limited
// selection, top-k or a table lookup, renormalisation by the p-norm with an
// optional floor, scaling). The expert dispatch is in LowerExperts.cpp.
//
//===----------------------------------------------------------------------===//
#include "emit/lowering/OnnxLowering.h"

#include <limits>

namespace archc {

bool OnnxLowering::lowerRoute(const ir::Op &op) {
  std::string logits = widen(in(op.getOperand(0)));
  int64_t k = op.attr<int64_t>("top_k");
  const std::string &scoring = op.attr<std::string>("scoring");
  const std::string &order = op.attr<std::string>("order");
  bool normalize = op.attr<bool>("normalize");
  double scale = op.attr<double>("scale");
  int64_t groups = op.attr<int64_t>("groups"),
          topkGroups = op.attr<int64_t>("topk_groups");
  int64_t experts =
      op.getOperand(0)->type.dims.back().getConstant().value_or(0);
  auto topk = [&](const std::string &x, int64_t n) {
    return b.nodeN("TopK", {x, b.i64({n})},
                   {OnnxAttr::integer("axis", -1),
                    OnnxAttr::integer("largest", 1),
                    OnnxAttr::integer("sorted", 1)},
                   2);
  };
  std::string weights, indices;
  if (scoring == "sparsemixer") {
    // PhiMoE's SparseMixer (inference form): the arg-max expert, weighted by
    // the softmax over the logits within a relative distance 2 eps of the
    // maximum, (m - s_j) / max(|s_j|, m) <= 2 eps; then the same for the
    // runner-up over the logits without the first choice. Not renormalised.
    const double *jitter = op.optAttr<double>("jitter_eps");
    float eps2 = static_cast<float>(2.0 * (jitter ? *jitter : 0.0));
    std::string negInf = b.f32Scalar(-std::numeric_limits<float>::infinity());
    std::string absS = b.node("Abs", {logits});
    auto pick = [&](const std::string &s) {
      std::string idx = b.node(
          "ArgMax", {s},
          {OnnxAttr::integer("axis", -1), OnnxAttr::integer("keepdims", 1)});
      std::string m = b.node(
          "ReduceMax", {s},
          {OnnxAttr::list("axes", {-1}), OnnxAttr::integer("keepdims", 1)});
      std::string far =
          b.node("Greater", {b.node("Div", {b.node("Sub", {m, logits}),
                                            b.node("Max", {absS, m})}),
                             b.f32Scalar(eps2)});
      std::string gates = b.node("Softmax", {b.node("Where", {far, negInf, s})},
                                 {OnnxAttr::integer("axis", -1)});
      return std::make_pair(b.node("GatherElements", {gates, idx},
                                   {OnnxAttr::integer("axis", -1)}),
                            idx);
    };
    auto [w1, i1] = pick(logits);
    std::string without =
        b.node("ScatterElements",
               {logits, i1, b.node("Expand", {negInf, b.node("Shape", {i1})})},
               {OnnxAttr::integer("axis", -1)});
    auto [w2, i2] = pick(without);
    weights = b.node("Concat", {w1, w2}, {OnnxAttr::integer("axis", -1)});
    indices = b.node("Concat", {i1, i2}, {OnnxAttr::integer("axis", -1)});
  } else if (order == "topk_score") {
    // Top-k of the raw logits, then the score over those k.
    auto tk = topk(logits, k);
    indices = tk[1];
    if (scoring == "softmax")
      weights = b.node("Softmax", {tk[0]}, {OnnxAttr::integer("axis", -1)});
    else if (scoring == "sigmoid")
      weights = b.node("Sigmoid", {tk[0]});
    else
      weights = tk[0];
  } else if (scoring == "softmax" && normalize && groups <= 1 &&
             !op.operand("bias") && !op.operand("table") &&
             (!op.optAttr<double>("norm_p") ||
              *op.optAttr<double>("norm_p") == 1.0) &&
             !op.optAttr<double>("norm_min")) {
    // Softmax, top-k, renormalised to sum 1: exp(l_i) / sum over the k of
    // exp(l_j), i.e. the softmax of the k largest logits (the softmax is
    // monotonic, so the top-k of the logits are the top-k of the scores).
    auto tk = topk(logits, k);
    indices = tk[1];
    weights = b.node("Softmax", {tk[0]}, {OnnxAttr::integer("axis", -1)});
    normalize = false;
  } else {
    std::string scores;
    if (scoring == "softmax")
      scores = b.node("Softmax", {logits}, {OnnxAttr::integer("axis", -1)});
    else if (scoring == "sigmoid")
      scores = b.node("Sigmoid", {logits});
    else if (scoring == "sqrtsoftplus")
      scores = b.node("Sqrt", {b.node("Softplus", {logits})});
    else
      scores = logits;
    // The selection may add a bias that does not enter the weights.
    std::string select = scores;
    if (const ir::Value *bias = op.operand("bias"))
      select = b.node("Add", {scores, widen(in(bias))});
    if (groups > 1) {
      // Group score = sum of the top-2 selection scores in the group; keep
      // the best topk_groups groups.
      int64_t per = experts / groups;
      std::string grouped =
          b.node("Reshape",
                 {select, b.node("Concat",
                                 {b.node("Slice", {b.node("Shape", {select}),
                                                   b.i64({0}), b.i64({-1})}),
                                  b.i64({groups, per})},
                                 {OnnxAttr::integer("axis", 0)})},
                 {OnnxAttr::integer("allowzero", 1)});
      std::string groupScore;
      if (op.hasAttr("group_score")) { // "max"
        // DeepSeek-V2's group_limited_greedy: the group's best score.
        groupScore = b.node(
            "ReduceMax", {grouped},
            {OnnxAttr::list("axes", {-1}), OnnxAttr::integer("keepdims", 0)});
      } else {
        auto top2 = topk(grouped, std::min<int64_t>(2, per));
        groupScore = b.node("ReduceSum", {top2[0], b.i64({-1})},
                            {OnnxAttr::integer("keepdims", 0)});
      }
      auto bestGroups = topk(groupScore, topkGroups);
      // One-hot of the kept groups, broadcast over their experts.
      std::string groupIds = b.node(
          "Range", {b.i64Scalar(0), b.i64Scalar(groups), b.i64Scalar(1)});
      std::string hit =
          b.node("Equal",
                 {b.node("Unsqueeze", {bestGroups[1], b.i64({-1})}), groupIds});
      std::string kept =
          b.node("Cast",
                 {b.node("ReduceMax",
                         {b.node("Cast", {hit},
                                 {OnnxAttr::integer(
                                     "to", onnx::TensorProto_DataType_INT32)})},
                         {OnnxAttr::list("axes", {-2}),
                          OnnxAttr::integer("keepdims", 0)})},
                 {OnnxAttr::integer("to", onnx::TensorProto_DataType_BOOL)});
      std::string keptExperts =
          b.node("Reshape",
                 {b.node("Expand", {b.node("Unsqueeze", {kept, b.i64({-1})}),
                                    b.node("Shape", {grouped})}),
                  b.node("Shape", {select})},
                 {OnnxAttr::integer("allowzero", 1)});
      // Experts of dropped groups score 0, as Hugging Face's DeepSeek-V3
      // router does (the reference code uses -inf; the two differ only
      // when a kept expert's biased score is negative).
      select = b.node("Where", {keptExperts, select, b.f32Scalar(0.0f)});
    }
    if (const ir::Value *table = op.operand("table")) {
      // Hash routing: the experts of token t are table[t].
      indices = b.node("Gather", {in(table), in(op.operand("tokens"))},
                       {OnnxAttr::integer("axis", 0)});
      if (table->type.dtype != ir::DType::I64)
        indices = castTo(indices, onnx::TensorProto_DataType_INT64);
    } else {
      auto tk = topk(select, k);
      indices = tk[1];
    }
    weights = b.node("GatherElements", {scores, indices},
                     {OnnxAttr::integer("axis", -1)});
  }
  if (normalize && scoring != "sparsemixer") {
    // Divide by the p-norm of the k weights (p = 1: their sum), clamped
    // from below by norm_min when given.
    const double *normP = op.optAttr<double>("norm_p");
    double p = normP ? *normP : 1.0;
    std::string norm;
    if (p == 1.0) {
      norm = b.node("ReduceSum", {weights, b.i64({-1})},
                    {OnnxAttr::integer("keepdims", 1)});
    } else {
      std::string pw = b.f32Scalar(static_cast<float>(p));
      norm = b.node(
          "Pow",
          {b.node("ReduceSum",
                  {b.node("Pow", {b.node("Abs", {weights}), pw}), b.i64({-1})},
                  {OnnxAttr::integer("keepdims", 1)}),
           b.f32Scalar(static_cast<float>(1.0 / p))});
    }
    if (const double *lo = op.optAttr<double>("norm_min"))
      norm = b.node("Max", {norm, b.f32Scalar(static_cast<float>(*lo))});
    weights = b.node("Div", {weights, norm});
  }
  if (scale != 1.0)
    weights = b.node("Mul", {weights, b.f32Scalar(static_cast<float>(scale))});
  def(op.getResult(0), narrow(weights));
  def(op.getResult(1), indices);
  return true;
}

} // namespace archc
