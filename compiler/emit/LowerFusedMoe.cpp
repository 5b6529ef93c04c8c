//===- LowerFusedMoe.cpp - MoE layers as ONNX Runtime's MoE op ------------===//
//
// With --target=ort, an `experts` dispatch that ONNX Runtime's com.microsoft
// MoE op computes exactly is lowered to it for one token (decode), and to
// the Scan dispatch over the same weights for more (prefill):
//
//   If(N == 1, then: MoE(x, logits, fc1, -, fc2), else: Scan over experts)
//
// The op's CPU kernel routes by itself (softmax over all experts, top k,
// optionally renormalised over the k) and runs each expert's two GEMMs on
// one thread, the experts spread over the threads: measured on 2 threads,
// a 64-expert top-8 layer decodes about as fast as the dense MLP with the
// same activated parameters, where the Scan's per-expert GEMVs scale badly
// over threads, but prefill of 128 tokens is 3x slower than the Scan.
// Hence the If (docs/decisions.md).
//
// Matched: softmax routing with no selection bias, groups, hash table,
// p-norm or norm floor (any routed scale, applied to the op's output); a
// body silu(x Wg^T) * (x Wu^T) then Wd^T of per-expert ({e}) float
// matrices, without biases; f32 or f16 activations; no scale_input. The
// op reads the gate and up matrices as one [E, 2 I, D] stack whose rows
// alternate (swiglu_fusion = 1; WeightPlan::useInterleavedStack) and the
// down matrices as [E, D, I] (their checkpoint layout); the Scan body reads
// the same stacks (one matmul for gate and up, then its even and odd rows),
// so each weight is stored once.
//
//===----------------------------------------------------------------------===//
#include "emit/OnnxContribSchemas.h"
#include "emit/OnnxLowering.h"

#include <cstring>

namespace archc {

namespace {
using ir::OpKind;

bool isExpertMatrix(const ir::Value *v) {
  const ir::Op *d = v->getDefiningOp();
  return d && d->getKind() == OpKind::Param && v->type.rank() == 2 &&
         d->attr<std::string>("name").find("{e}") != std::string::npos;
}

/// A matmul of the body's tokens by a per-expert [out, in] matrix.
bool isTokenMatmul(const ir::Op *op, const ir::Value *tokens) {
  return op && op->getKind() == OpKind::MatMul && op->getOperand(0) == tokens &&
         op->attr<bool>("transpose_b") && isExpertMatrix(op->getOperand(1));
}
} // namespace

bool OnnxLowering::matchFusedExperts(const ir::Op &op, FusedExperts &f) const {
  if (target != OnnxTarget::Ort || (act != onnx::TensorProto_DataType_FLOAT &&
                                    act != onnx::TensorProto_DataType_FLOAT16))
    return false;
  const bool *scaleInput = op.optAttr<bool>("scale_input");
  if ((scaleInput && *scaleInput) || op.getNumOperands() != 3)
    return false;
  // The router: both results of one softmax route.
  const ir::Op *route = op.getOperand(1)->getDefiningOp();
  if (!route || route->getKind() != OpKind::Route ||
      op.getOperand(2)->getDefiningOp() != route ||
      op.getOperand(1) != route->getResult(0) ||
      op.getOperand(2) != route->getResult(1))
    return false;
  const double *normP = route->optAttr<double>("norm_p");
  if (route->attr<std::string>("scoring") != "softmax" ||
      route->operand("bias") || route->operand("table") ||
      route->attr<int64_t>("groups") > 1 || (normP && *normP != 1.0) ||
      route->optAttr<double>("norm_min"))
    return false;
  // The body: yield(silu(t Wg^T) * (t Wu^T) Wd^T), nothing else.
  const ir::Block &body = *op.getRegions()[0];
  if (!expertBodyStackable(body) || body.getArguments().empty())
    return false;
  const ir::Value *t = body.getArgument(0);
  const ir::Op *yield = body.getTerminator();
  const ir::Op *down = yield ? yield->getOperand(0)->getDefiningOp() : nullptr;
  if (!down || down->getKind() != OpKind::MatMul ||
      !down->attr<bool>("transpose_b") || !isExpertMatrix(down->getOperand(1)))
    return false;
  const ir::Op *mul = down->getOperand(0)->getDefiningOp();
  if (!mul || mul->getKind() != OpKind::Mul)
    return false;
  for (int order = 0; order < 2; ++order) {
    const ir::Op *silu = mul->getOperand(order)->getDefiningOp();
    const ir::Op *up = mul->getOperand(1 - order)->getDefiningOp();
    if (!silu || silu->getKind() != OpKind::Silu || !isTokenMatmul(up, t))
      continue;
    const ir::Op *gate = silu->getOperand(0)->getDefiningOp();
    if (!isTokenMatmul(gate, t) || gate == up)
      continue;
    f.route = route;
    f.gate = gate;
    f.up = up;
    f.gateParam = gate->getOperand(1)->getDefiningOp();
    f.upParam = up->getOperand(1)->getDefiningOp();
    f.downParam = down->getOperand(1)->getDefiningOp();
    break;
  }
  if (!f.gate || f.gateParam->getResult()->type != f.upParam->getResult()->type)
    return false;
  // Nothing else in the body (its three params, three matmuls, silu and
  // mul), so no other op reads an intermediate value.
  size_t ops = 0;
  for (const auto &o : body.getOps())
    if (o->getKind() != OpKind::Yield)
      ++ops;
  return ops == 8 && yield->getNumOperands() == 1;
}

bool OnnxLowering::dispatchFused(const ir::Op &op, const std::string &x,
                                 std::string &out, FusedExperts &f) {
  contribOps = true;
  int64_t count = op.attr<int64_t>("count");
  int64_t k = op.getOperand(1)->type.dims.back().getConstant().value_or(0);
  // The interleaved gate/up stack: expert e's gate then up, for every e.
  const std::string &gateName = f.gateParam->attr<std::string>("name");
  const std::string &upName = f.upParam->attr<std::string>("name");
  std::vector<std::string> members;
  for (int64_t e = 0; e < count; ++e) {
    members.push_back(ir::instantiatePattern(gateName, -1, e));
    members.push_back(ir::instantiatePattern(upName, -1, e));
  }
  f.fc1 =
      weights.useInterleavedStack(stackedWeightName(gateName) + "+up", members,
                                  2, f.gateParam->getResult()->type);
  // The rows of fc1's product that are the gate's (even) and the up's
  // (odd): outer constants, shared by the layers.
  int64_t inter =
      f.gateParam->getResult()->type.dims[0].getConstant().value_or(0);
  std::string rows[2];
  for (int j = 0; j < 2; ++j) {
    std::string bytes(static_cast<size_t>(inter) * 8, '\0');
    for (int64_t r = 0; r < inter; ++r) {
      int64_t v = 2 * r + j;
      std::memcpy(bytes.data() + r * 8, &v, 8);
    }
    rows[j] = b.raw(bytes, onnx::TensorProto_DataType_INT64, {inter},
                    j ? "up_rows" : "gate_rows");
  }
  f.gateRows = rows[0];
  f.upRows = rows[1];
  std::vector<std::string> downMembers;
  const std::string &downName = f.downParam->attr<std::string>("name");
  for (int64_t e = 0; e < count; ++e)
    downMembers.push_back(ir::instantiatePattern(downName, -1, e));
  std::string fc2 =
      weights.useStacked(stackedWeightName(downName), downMembers,
                         f.downParam->getResult()->type, /*transposed=*/false);

  // One token: the MoE op, on the router's logits [N, E] in the
  // activations' type.
  int64_t experts =
      f.route->getOperand(0)->type.dims.back().getConstant().value_or(0);
  std::string logits =
      b.node("Reshape", {in(f.route->getOperand(0)), b.i64({-1, experts})});
  if (f.route->getOperand(0)->type.dtype != op.getOperand(0)->type.dtype)
    logits = castTo(logits, act);
  std::string cond =
      b.node("Equal",
             {b.node("Shape", {x}, {OnnxAttr::integer("end", 1)}), b.i64({1})});
  bool normalize = f.route->attr<bool>("normalize") ||
                   f.route->attr<std::string>("order") == "topk_score";
  double scale = f.route->attr<double>("scale");

  SavedCaches saved = saveCaches();
  onnx::GraphProto thenBranch, elseBranch;
  thenBranch.set_name(b.fresh("moe_one_token"));
  elseBranch.set_name(b.fresh("moe_tokens"));
  GraphBuilder::Target outer = b.retarget(thenBranch, thenBranch.name() + "_");
  std::string y = b.nodeInDomain(
      kContribDomain, "MoE", {x, logits, f.fc1, "", fc2},
      {OnnxAttr::integer("k", k), OnnxAttr::str("activation_type", "swiglu"),
       OnnxAttr::integer("normalize_routing_weights", normalize ? 1 : 0),
       OnnxAttr::integer("swiglu_fusion", 1),
       OnnxAttr::real("activation_alpha", 1.0f),
       OnnxAttr::real("activation_beta", 0.0f)});
  y = widen(y);
  if (scale != 1.0)
    y = b.node("Mul", {y, b.f32Scalar(static_cast<float>(scale))});
  addGraphOutput(thenBranch, y, onnx::TensorProto_DataType_FLOAT);
  b.restore(std::move(outer));

  // More tokens: the Scan over the same stacks.
  outer = b.retarget(elseBranch, elseBranch.name() + "_");
  fusedBody = &f;
  std::string acc = out;
  bool ok = dispatchScan(op, x, acc);
  fusedBody = nullptr;
  if (ok)
    addGraphOutput(elseBranch, acc, onnx::TensorProto_DataType_FLOAT);
  b.restore(std::move(outer));
  restoreCaches(std::move(saved));
  if (!ok)
    return false;
  out = b.nodeN("If", {cond},
                {OnnxAttr::graph("then_branch", std::move(thenBranch)),
                 OnnxAttr::graph("else_branch", std::move(elseBranch))},
                1, "moe")[0];
  return true;
}

} // namespace archc
