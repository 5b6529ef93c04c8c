//===- OnnxContribSchemas.cpp - ONNX Runtime contrib ops for the checker --===//
//
// This file registers MatMulNBits, GatherBlockQuantized,
// SimplifiedLayerNormalization and SkipSimplifiedLayerNormalization, MoE and
// QMoE (`--target=ort`) with onnx's schema
// registry. The quantized ops' shape rules also check the quantized
// initializers' shapes against the attributes, so a layout bug fails
// in-process instead of in ONNX Runtime.
//
//===----------------------------------------------------------------------===//
#include "emit/onnx/OnnxContribSchemas.h"

#include <onnx/defs/schema.h>
#include <onnx/defs/shape_inference.h>

#include <mutex>
#include <string>

namespace archc {

namespace {
using namespace ONNX_NAMESPACE;

int64_t intAttr(InferenceContext &ctx, const char *name, int64_t dflt) {
  return getAttribute(ctx, name, dflt);
}

void expectDims(InferenceContext &ctx, size_t input,
                const std::vector<int64_t> &want, const char *what) {
  if (!hasInputShape(ctx, input))
    return;
  const TensorShapeProto &s = getInputShape(ctx, input);
  bool ok = s.dim_size() == static_cast<int>(want.size());
  for (int i = 0; ok && i < s.dim_size(); ++i)
    if (want[i] >= 0 && s.dim(i).has_dim_value() &&
        s.dim(i).dim_value() != want[i])
      ok = false;
  if (!ok) {
    std::string w;
    for (int64_t d : want)
      w += (w.empty() ? "" : ", ") + std::to_string(d);
    fail_shape_inference(what, " has the wrong shape (expected [", w, "])");
  }
}

/// MoE's output is its input's shape; the stacks must agree with each
/// other, the router and the hidden size (swiglu: fc1 has 2 I rows).
void inferMoe(InferenceContext &ctx) {
  propagateElemTypeFromInputToOutput(ctx, 0, 0);
  if (hasInputShape(ctx, 0))
    propagateShapeFromInputToOutput(ctx, 0, 0);
  if (!hasInputShape(ctx, 2) || !hasInputShape(ctx, 4))
    return;
  const TensorShapeProto &fc1 = getInputShape(ctx, 2);
  const TensorShapeProto &fc2 = getInputShape(ctx, 4);
  if (fc1.dim_size() != 3 || fc2.dim_size() != 3)
    fail_shape_inference("MoE's expert weights are not [experts, rows, cols]");
  auto value = [](const TensorShapeProto &s, int i) {
    return s.dim(i).has_dim_value() ? s.dim(i).dim_value() : int64_t(-1);
  };
  int64_t experts = value(fc1, 0), hidden = value(fc1, 2);
  int64_t inter = value(fc2, 2);
  std::string act = getAttribute(ctx, "activation_type", std::string("relu"));
  int64_t rows = inter < 0 ? -1 : (act == "swiglu" ? 2 * inter : inter);
  expectDims(ctx, 4, {experts, hidden, inter}, "fc2_experts_weights");
  expectDims(ctx, 2, {experts, rows, hidden}, "fc1_experts_weights");
}

/// QMoE's output is its input's shape; the block-quantized stacks (codes
/// [E, N, K * bits / 8], scales [E, N, K / block], zero points [E, N,
/// ceil(K / block * bits / 8)]) must agree with each other and the hidden
/// size.
void inferQMoe(InferenceContext &ctx) {
  propagateElemTypeFromInputToOutput(ctx, 0, 0);
  if (hasInputShape(ctx, 0))
    propagateShapeFromInputToOutput(ctx, 0, 0);
  int64_t bits = intAttr(ctx, "expert_weight_bits", 4);
  int64_t block = intAttr(ctx, "block_size", 0);
  if ((bits != 4 && bits != 8) || block < 16 || (block & (block - 1)))
    fail_shape_inference("QMoE: invalid expert_weight_bits or block_size");
  if (!hasInputShape(ctx, 2) || !hasInputShape(ctx, 5))
    return;
  const TensorShapeProto &fc1 = getInputShape(ctx, 2);
  const TensorShapeProto &fc2 = getInputShape(ctx, 5);
  if (fc1.dim_size() != 3 || fc2.dim_size() != 3)
    fail_shape_inference("QMoE's expert codes are not [experts, rows, bytes]");
  auto value = [](const TensorShapeProto &s, int i) {
    return s.dim(i).has_dim_value() ? s.dim(i).dim_value() : int64_t(-1);
  };
  int64_t experts = value(fc1, 0), hidden = value(fc2, 1);
  int64_t rows1 = value(fc1, 1);
  int64_t k1 = value(fc1, 2) * 8 / bits, k2 = value(fc2, 2) * 8 / bits;
  if (hidden < 0 || rows1 < 0 || k1 <= 0 || k2 <= 0)
    return;
  if (k1 != hidden || k1 % block || k2 % block)
    fail_shape_inference("QMoE: the codes' inputs are not the hidden size "
                         "and intermediate size in whole blocks");
  expectDims(ctx, 5, {experts, hidden, k2 * bits / 8}, "fc2_experts_weights");
  expectDims(ctx, 3, {experts, rows1, k1 / block}, "fc1_scales");
  expectDims(ctx, 6, {experts, hidden, k2 / block}, "fc2_scales");
  auto zeroPoints = [&](size_t input, int64_t rows, int64_t k,
                        const char *what) {
    if (ctx.getNumInputs() > input && ctx.getInputType(input))
      expectDims(ctx, input, {experts, rows, (k / block * bits + 7) / 8}, what);
  };
  zeroPoints(11, rows1, k1, "fc1_zero_points");
  zeroPoints(12, hidden, k2, "fc2_zero_points");
}

void inferMatMulNBits(InferenceContext &ctx) {
  propagateElemTypeFromInputToOutput(ctx, 0, 0);
  int64_t K = intAttr(ctx, "K", 0), N = intAttr(ctx, "N", 0);
  int64_t bits = intAttr(ctx, "bits", 4), block = intAttr(ctx, "block_size", 0);
  if (K <= 0 || N <= 0 || block < 16 || (block & (block - 1)) ||
      (bits != 2 && bits != 4 && bits != 8))
    fail_shape_inference("MatMulNBits: invalid K, N, bits or block_size");
  int64_t nb = (K + block - 1) / block;
  expectDims(ctx, 1, {N, nb, block * bits / 8}, "MatMulNBits input B");
  expectDims(ctx, 2, {N, nb}, "MatMulNBits scales");
  if (ctx.getNumInputs() > 3 && ctx.getInputType(3))
    expectDims(ctx, 3, {N, (nb * bits + 7) / 8}, "MatMulNBits zero_points");
  if (!hasInputShape(ctx, 0))
    return;
  const TensorShapeProto &a = getInputShape(ctx, 0);
  if (a.dim_size() < 1)
    fail_shape_inference("MatMulNBits: A must have rank >= 1");
  const auto &last = a.dim(a.dim_size() - 1);
  if (last.has_dim_value() && last.dim_value() != K)
    fail_shape_inference("MatMulNBits: A's last dim is not K");
  TensorShapeProto out;
  for (int i = 0; i + 1 < a.dim_size(); ++i)
    *out.add_dim() = a.dim(i);
  out.add_dim()->set_dim_value(N);
  updateOutputShape(ctx, 0, out);
}

void inferGatherBlockQuantized(InferenceContext &ctx) {
  propagateElemTypeFromInputToOutput(ctx, 2, 0);
  int64_t bits = intAttr(ctx, "bits", 4);
  if (intAttr(ctx, "gather_axis", 0) != 0 ||
      intAttr(ctx, "quantize_axis", 1) != 1)
    fail_shape_inference("GatherBlockQuantized: archc emits gather_axis 0 "
                         "and quantize_axis 1 only");
  if (!hasInputShape(ctx, 0) || !hasInputShape(ctx, 1))
    return;
  const TensorShapeProto &data = getInputShape(ctx, 0);
  const TensorShapeProto &ids = getInputShape(ctx, 1);
  if (data.dim_size() != 2)
    fail_shape_inference("GatherBlockQuantized: data must be 2-D");
  TensorShapeProto out;
  for (int i = 0; i < ids.dim_size(); ++i)
    *out.add_dim() = ids.dim(i);
  const auto &width = data.dim(1);
  if (width.has_dim_value())
    out.add_dim()->set_dim_value(width.dim_value() * (8 / bits));
  else
    out.add_dim();
  updateOutputShape(ctx, 0, out);
}

/// The routing and activation attributes MoE and QMoE share.
OpSchema &&withMoeAttributes(OpSchema &&s) {
  return std::move(
      s.Attr("k", "experts per row", AttributeProto::INT,
             static_cast<int64_t>(1))
          .Attr("activation_type", "relu, gelu, silu, identity or swiglu",
                AttributeProto::STRING, std::string("relu"))
          .Attr("normalize_routing_weights", "renormalise the k weights",
                AttributeProto::INT, static_cast<int64_t>(0))
          .Attr("use_sparse_mixer", "sparse mixer routing (k = 2)",
                AttributeProto::INT, static_cast<int64_t>(0))
          .Attr("swiglu_fusion",
                "0: no fc1 fusion, 1: gate and up rows interleaved, 2: "
                "concatenated",
                AttributeProto::INT, static_cast<int64_t>(0))
          .Attr("swiglu_limit", "clamp of the SwiGLU inputs",
                AttributeProto::FLOAT, OPTIONAL_VALUE)
          .Attr("activation_alpha", "SwiGLU's sigmoid scale",
                AttributeProto::FLOAT, 1.0f)
          .Attr("activation_beta", "added to SwiGLU's linear half",
                AttributeProto::FLOAT, 0.0f));
}

void registerAll() {
  auto &domains = OpSchemaRegistry::DomainToVersionRange::Instance();
  if (!domains.Map().count(kContribDomain))
    domains.AddDomainToVersion(kContribDomain, kContribOpset, kContribOpset);
  static OpSchema matmul =
      OpSchema()
          .SetName("MatMulNBits")
          .SetDomain(kContribDomain)
          .SinceVersion(kContribOpset)
          .SetDoc("MatMul with a block-quantized right-hand side (ONNX "
                  "Runtime contrib op).")
          .Attr("K", "input features", AttributeProto::INT)
          .Attr("N", "output features", AttributeProto::INT)
          .Attr("bits", "bits per weight", AttributeProto::INT)
          .Attr("block_size", "inputs per block", AttributeProto::INT)
          .Attr("accuracy_level", "minimum accuracy of A", AttributeProto::INT,
                static_cast<int64_t>(0))
          .Input(0, "A", "input", "T1")
          .Input(1, "B", "packed codes [N, blocks, blob]", "T2")
          .Input(2, "scales", "[N, blocks]", "T1")
          .Input(3, "zero_points", "packed [N, ceil(blocks bits / 8)]", "T3",
                 OpSchema::Optional)
          .Input(4, "g_idx", "deprecated", "T4", OpSchema::Optional)
          .Input(5, "bias", "[N]", "T1", OpSchema::Optional)
          .Output(0, "Y", "A's shape with last dim N", "T1")
          .TypeConstraint(
              "T1", {"tensor(float)", "tensor(float16)", "tensor(bfloat16)"},
              "activations and scales")
          .TypeConstraint("T2", {"tensor(uint8)"}, "codes")
          .TypeConstraint("T3",
                          {"tensor(uint8)", "tensor(float)", "tensor(float16)",
                           "tensor(bfloat16)"},
                          "zero points")
          .TypeConstraint("T4", {"tensor(int32)"}, "group index")
          .TypeAndShapeInferenceFunction(inferMatMulNBits);
  OpSchemaRegistry::OpSchemaRegisterOnce registerMatMul(matmul);
  static OpSchema gather =
      OpSchema()
          .SetName("GatherBlockQuantized")
          .SetDomain(kContribDomain)
          .SinceVersion(kContribOpset)
          .SetDoc("Gather of block-quantized rows (ONNX Runtime contrib op).")
          .Attr("bits", "bits per weight", AttributeProto::INT,
                static_cast<int64_t>(4))
          .Attr("block_size", "elements per block", AttributeProto::INT,
                static_cast<int64_t>(128))
          .Attr("gather_axis", "gathered axis", AttributeProto::INT,
                static_cast<int64_t>(0))
          .Attr("quantize_axis", "quantized axis", AttributeProto::INT,
                static_cast<int64_t>(1))
          .Input(0, "data", "packed codes", "T1")
          .Input(1, "indices", "indices", "Tind")
          .Input(2, "scales", "scales", "T2")
          .Input(3, "zero_points", "zero points", "T1", OpSchema::Optional)
          .Output(0, "output", "dequantized rows", "T2")
          .TypeConstraint("T1", {"tensor(uint8)"}, "codes")
          .TypeConstraint(
              "T2", {"tensor(float)", "tensor(float16)", "tensor(bfloat16)"},
              "output and scales")
          .TypeConstraint("Tind", {"tensor(int32)", "tensor(int64)"}, "indices")
          .TypeAndShapeInferenceFunction(inferGatherBlockQuantized);
  OpSchemaRegistry::OpSchemaRegisterOnce registerGather(gather);
  // ONNX Runtime registers this one in the default domain, version 1.
  static OpSchema rmsNorm =
      OpSchema()
          .SetName("SimplifiedLayerNormalization")
          .SetDomain("")
          .SinceVersion(1)
          .SetDoc("x / sqrt(mean(x^2) + epsilon) * scale over the axes from "
                  "`axis` (ONNX Runtime contrib op).")
          .Attr("axis", "first normalized axis", AttributeProto::INT,
                static_cast<int64_t>(-1))
          .Attr("epsilon", "added to the mean square", AttributeProto::FLOAT,
                1e-5f)
          .Attr("stash_type", "compute type (1: float)", AttributeProto::INT,
                static_cast<int64_t>(1))
          .Input(0, "X", "input", "T")
          .Input(1, "scale", "normalized shape", "V")
          .Output(0, "Y", "X's shape", "V")
          .Output(1, "inv_std_var", "saved statistics", "U", OpSchema::Optional)
          .TypeConstraint("T", {"tensor(float)", "tensor(float16)"}, "input")
          .TypeConstraint("V", {"tensor(float)", "tensor(float16)"}, "scale")
          .TypeConstraint("U", {"tensor(float)"}, "statistics")
          .TypeAndShapeInferenceFunction([](InferenceContext &ctx) {
            propagateElemTypeFromInputToOutput(ctx, 1, 0);
            if (hasInputShape(ctx, 0))
              propagateShapeFromInputToOutput(ctx, 0, 0);
          });
  OpSchemaRegistry::OpSchemaRegisterOnce registerRmsNorm(rmsNorm);
  static OpSchema skipRmsNorm =
      OpSchema()
          .SetName("SkipSimplifiedLayerNormalization")
          .SetDomain(kContribDomain)
          .SinceVersion(kContribOpset)
          .SetDoc("RMS normalization of input + skip (+ bias), also returning "
                  "the sum (ONNX Runtime contrib op).")
          .Attr("epsilon", "added to the mean square", AttributeProto::FLOAT,
                1e-12f)
          .Input(0, "input", "[batch, seq, hidden]", "T")
          .Input(1, "skip", "input's shape", "T")
          .Input(2, "gamma", "[hidden]", "T")
          .Input(3, "bias", "[hidden]", "T", OpSchema::Optional)
          .Output(0, "output", "input's shape", "T")
          .Output(1, "mean", "unused", "U", OpSchema::Optional)
          .Output(2, "inv_std_var", "saved statistics", "U", OpSchema::Optional)
          .Output(3, "input_skip_bias_sum", "input + skip (+ bias)", "T",
                  OpSchema::Optional)
          .TypeConstraint("T", {"tensor(float)", "tensor(float16)"},
                          "activations")
          .TypeConstraint("U", {"tensor(float)"}, "statistics")
          .TypeAndShapeInferenceFunction([](InferenceContext &ctx) {
            propagateElemTypeFromInputToOutput(ctx, 0, 0);
            if (hasInputShape(ctx, 0))
              propagateShapeFromInputToOutput(ctx, 0, 0);
            if (ctx.getNumOutputs() > 3) {
              propagateElemTypeFromInputToOutput(ctx, 0, 3);
              if (hasInputShape(ctx, 0))
                propagateShapeFromInputToOutput(ctx, 0, 3);
            }
          });
  OpSchemaRegistry::OpSchemaRegisterOnce registerSkipRmsNorm(skipRmsNorm);
  static OpSchema moe =
      withMoeAttributes(OpSchema())
          .SetName("MoE")
          .SetDomain(kContribDomain)
          .SinceVersion(kContribOpset)
          .SetDoc("Mixture of experts: routes each row by the softmax of its "
                  "router logits to its top k experts and sums their FFN "
                  "outputs (ONNX Runtime contrib op).")
          .Input(0, "input", "[rows, hidden] or [batch, seq, hidden]", "T")
          .Input(1, "router_probs", "[rows, experts] logits", "T")
          .Input(2, "fc1_experts_weights",
                 "[experts, fc1 out (2 I for swiglu), hidden]", "T")
          .Input(3, "fc1_experts_bias", "[experts, fc1 out]", "T",
                 OpSchema::Optional)
          .Input(4, "fc2_experts_weights", "[experts, hidden, I]", "T")
          .Input(5, "fc2_experts_bias", "[experts, hidden]", "T",
                 OpSchema::Optional)
          .Input(6, "fc3_experts_weights", "[experts, I, hidden]", "T",
                 OpSchema::Optional)
          .Input(7, "fc3_experts_bias", "[experts, I]", "T", OpSchema::Optional)
          .Output(0, "output", "input's shape", "T")
          .TypeConstraint("T", {"tensor(float)", "tensor(float16)"},
                          "activations and weights")
          .TypeAndShapeInferenceFunction(inferMoe);
  OpSchemaRegistry::OpSchemaRegisterOnce registerMoe(moe);
  static OpSchema qmoe =
      withMoeAttributes(OpSchema())
          .SetName("QMoE")
          .SetDomain(kContribDomain)
          .SinceVersion(kContribOpset)
          .SetDoc("MoE over block-quantized expert weights (ONNX Runtime "
                  "contrib op): the routing and activations of MoE.")
          .Attr("expert_weight_bits", "4 or 8", AttributeProto::INT,
                static_cast<int64_t>(4))
          .Attr("block_size", "inputs per quantization block",
                AttributeProto::INT, OPTIONAL_VALUE)
          .Input(0, "input", "[rows, hidden] or [batch, seq, hidden]", "T")
          .Input(1, "router_probs", "[rows, experts] logits", "T")
          .Input(2, "fc1_experts_weights",
                 "[experts, fc1 out, hidden * bits / 8] codes", "T1")
          .Input(3, "fc1_scales", "[experts, fc1 out, hidden / block]", "T2")
          .Input(4, "fc1_experts_bias", "[experts, fc1 out]", "T",
                 OpSchema::Optional)
          .Input(5, "fc2_experts_weights",
                 "[experts, hidden, I * bits / 8] codes", "T1")
          .Input(6, "fc2_scales", "[experts, hidden, I / block]", "T2")
          .Input(7, "fc2_experts_bias", "[experts, hidden]", "T",
                 OpSchema::Optional)
          .Input(8, "fc3_experts_weights", "codes", "T1", OpSchema::Optional)
          .Input(9, "fc3_scales", "scales", "T2", OpSchema::Optional)
          .Input(10, "fc3_experts_bias", "[experts, I]", "T",
                 OpSchema::Optional)
          .Input(11, "fc1_zero_points", "[experts, fc1 out, zp bytes]", "T1",
                 OpSchema::Optional)
          .Input(12, "fc2_zero_points", "[experts, hidden, zp bytes]", "T1",
                 OpSchema::Optional)
          .Input(13, "fc3_zero_points", "zero points", "T1", OpSchema::Optional)
          .Output(0, "output", "input's shape", "T")
          .TypeConstraint("T", {"tensor(float)", "tensor(float16)"},
                          "activations")
          .TypeConstraint("T1", {"tensor(uint8)"}, "codes")
          .TypeConstraint("T2", {"tensor(float)", "tensor(float16)"}, "scales")
          .TypeAndShapeInferenceFunction(inferQMoe);
  OpSchemaRegistry::OpSchemaRegisterOnce registerQMoe(qmoe);
}
} // namespace

void registerContribSchemas() {
  static std::once_flag once;
  std::call_once(once, registerAll);
}

} // namespace archc
