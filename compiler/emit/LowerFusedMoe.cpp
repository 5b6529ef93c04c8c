//===- LowerFusedMoe.cpp - MoE layers as ONNX Runtime's MoE op ------------===//
//
// With --target=ort, an `experts` dispatch that ONNX Runtime's com.microsoft
// MoE op computes exactly is lowered to that op, for any number of tokens.
// Measured on 2 threads (docs/performance.md), the op with the parts below
// is as fast as the Scan dispatch or faster at every prompt length tried (8
// to 2,048 tokens) and for decode, and one op per layer is a much smaller
// graph than an If over both.
//
// The op's CPU kernel runs each expert's two GEMMs on one thread and gives
// each thread a contiguous range of experts. So that two threads share
// every token's work, each expert is cut into P = 2 parts along its
// intermediate dim (I / P gate and up rows, the matching I / P columns of
// the down matrix) and the stacks hold the parts part-major: the op sees
// P * E experts whose first E are every expert's first half.
//
// The kernel's own routing (softmax, top k) is not used: it is handed the
// route's choice as logits, log w at the k chosen experts (repeated for the
// parts) and -inf elsewhere, so any route with positive weights maps onto
// it (softmax, sigmoid, sqrt-softplus or sparsemixer scores, selection
// bias, groups, p-norms, floors, routed scale; not hash tables), with the
// route's own choice and ties.
//
// Matched: such a route; a body silu(x Wg^T) * (x Wu^T) then Wd^T of
// per-expert ({e}) float matrices, without biases, optionally with the gate
// clamped above and up on both sides at one limit (DeepSeek-V4; the op's
// swiglu_limit); f32 activations; no scale_input. The op reads the gate and
// up matrices as one [P * E, 2 I / P, D] stack whose rows alternate
// (swiglu_fusion = 1; WeightPlan::useInterleavedStack) and the down
// matrices as [P * E, D, I / P].
//
//===----------------------------------------------------------------------===//
#include "emit/OnnxContribSchemas.h"
#include "emit/OnnxLowering.h"

#include <limits>
#include <optional>

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
  // Float32 activations only: ONNX Runtime 1.30 has no float16 CPU kernel
  // for the op and runs it between Casts it inserts (every expert's weights
  // cast on every call), and on the Cast of the tokens the op's in-place
  // hazard below is not avoided (tests/ort f16-ort cases; docs/decisions.md).
  if (target != OnnxTarget::Ort || act != onnx::TensorProto_DataType_FLOAT)
    return false;
  const bool *scaleInput = op.optAttr<bool>("scale_input");
  if ((scaleInput && *scaleInput) || op.getNumOperands() != 3)
    return false;
  // The router: both results of one route whose weights are positive
  // (the op reads their logarithms), whose k experts are distinct (no hash
  // table) and whose scale is positive.
  const ir::Op *route = op.getOperand(1)->getDefiningOp();
  if (!route || route->getKind() != OpKind::Route ||
      op.getOperand(2)->getDefiningOp() != route ||
      op.getOperand(1) != route->getResult(0) ||
      op.getOperand(2) != route->getResult(1))
    return false;
  const std::string &scoring = route->attr<std::string>("scoring");
  if ((scoring != "softmax" && scoring != "sigmoid" &&
       scoring != "sqrtsoftplus" && scoring != "sparsemixer") ||
      route->operand("table") || !(route->attr<double>("scale") > 0.0))
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
  // Each side may be clamped at one limit L, as ORT's swiglu_limit does:
  // the gate from above, up on both sides (DeepSeek-V4).
  size_t clamps = 0;
  for (int order = 0; order < 2 && !f.gateParam; ++order) {
    const ir::Op *silu = mul->getOperand(order)->getDefiningOp();
    const ir::Op *up = mul->getOperand(1 - order)->getDefiningOp();
    if (!silu || silu->getKind() != OpKind::Silu || !up)
      continue;
    const ir::Op *gate = silu->getOperand(0)->getDefiningOp();
    if (!gate)
      continue;
    std::optional<double> gateMax, upMin, upMax;
    if (gate->getKind() == OpKind::Clamp) {
      if (gate->optAttr<double>("min") || !gate->optAttr<double>("max"))
        continue;
      gateMax = *gate->optAttr<double>("max");
      gate = gate->getOperand(0)->getDefiningOp();
    }
    if (up->getKind() == OpKind::Clamp) {
      const double *lo = up->optAttr<double>("min");
      const double *hi = up->optAttr<double>("max");
      if (!lo || !hi)
        continue;
      upMin = *lo;
      upMax = *hi;
      up = up->getOperand(0)->getDefiningOp();
    }
    bool clamped = gateMax.has_value();
    if (clamped != upMax.has_value() ||
        (clamped &&
         (*upMax != *gateMax || *upMin != -*gateMax || !(*gateMax > 0.0))))
      continue;
    if (!isTokenMatmul(gate, t) || !isTokenMatmul(up, t) || gate == up)
      continue;
    f.gateParam = gate->getOperand(1)->getDefiningOp();
    f.upParam = up->getOperand(1)->getDefiningOp();
    f.downParam = down->getOperand(1)->getDefiningOp();
    if (clamped) {
      f.limit = static_cast<float>(*gateMax);
      clamps = 2;
    }
  }
  if (!f.gateParam ||
      f.gateParam->getResult()->type != f.upParam->getResult()->type)
    return false;
  // Nothing else in the body (its three params, three matmuls, silu, mul
  // and the clamps), so no other op reads an intermediate value.
  size_t ops = 0;
  for (const auto &o : body.getOps())
    if (o->getKind() != OpKind::Yield)
      ++ops;
  return ops == 8 + clamps && yield->getNumOperands() == 1;
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
  // Two parts per expert when its intermediate size allows: the kernel
  // gives each thread a contiguous range of its experts, so with the parts
  // stored part-major each of two threads holds one half of every expert
  // (docs/decisions.md).
  int64_t inter =
      f.gateParam->getResult()->type.dims[0].getConstant().value_or(0);
  f.parts = inter % 2 == 0 ? 2 : 1;
  std::string suffix = f.parts > 1 ? "@" + std::to_string(f.parts) : "";
  f.fc1 = weights.useInterleavedStack(
      stackedWeightName(gateName) + "+up" + suffix, members, 2,
      f.gateParam->getResult()->type, f.parts, 0);
  std::vector<std::string> downMembers;
  const std::string &downName = f.downParam->attr<std::string>("name");
  for (int64_t e = 0; e < count; ++e)
    downMembers.push_back(ir::instantiatePattern(downName, -1, e));
  f.fc2 = weights.useInterleavedStack(
      stackedWeightName(downName) + suffix, downMembers, 1,
      f.downParam->getResult()->type, f.parts, 1);

  // The MoE op routes by itself (softmax over its experts' logits, top k),
  // so it is handed the route's own choice: the logarithms of the k
  // weights at their experts, -inf elsewhere, repeated for the P parts; it
  // then weights each of the P * k blocks w / (P * sum w), which the
  // output's scale by P * sum w undoes.
  std::string noExpert;
  {
    std::vector<float> inf(static_cast<size_t>(count),
                           -std::numeric_limits<float>::infinity());
    std::string bytes(reinterpret_cast<const char *>(inf.data()),
                      inf.size() * sizeof(float));
    noExpert =
        b.raw(bytes, onnx::TensorProto_DataType_FLOAT, {1, count}, "no_expert");
  }
  // [N, E] of -inf, N the token count.
  std::string gridShape = tokenRowsShape(op, x, count);
  std::string grid = b.node("Expand", {noExpert, gridShape});
  std::string w = b.node("Reshape", {in(op.getOperand(1)), b.i64({-1, k})});
  std::string chosen =
      b.node("ScatterElements",
             {grid, b.node("Reshape", {in(op.getOperand(2)), b.i64({-1, k})}),
              b.node("Log", {w})},
             {OnnxAttr::integer("axis", 1)});
  if (f.parts > 1)
    chosen = b.node("Tile", {chosen, b.i64({1, f.parts})});
  // The op is the only node of an If's branch, so that every input it
  // reads is a value of the enclosing graph: ONNX Runtime 1.30 lets the
  // op's output take the buffer of an input 0 it may overwrite in place,
  // and its result is then wrong (f32 and f16 alike; docs/decisions.md).
  // Values of an enclosing graph are never reused so. The other branch is
  // the empty token set, which the kernel is not asked to handle.
  std::string nonEmpty =
      b.node("Greater", {b.node("Shape", {grid}, {OnnxAttr::integer("end", 1)}),
                         b.i64({0})});
  SavedCaches saved = saveCaches();
  onnx::GraphProto thenBranch, elseBranch;
  thenBranch.set_name(b.fresh("moe_op"));
  elseBranch.set_name(b.fresh("moe_no_tokens"));
  GraphBuilder::Target outer = b.retarget(thenBranch, thenBranch.name() + "_");
  std::vector<OnnxAttr> attrs = {
      OnnxAttr::integer("k", k * f.parts),
      OnnxAttr::str("activation_type", "swiglu"),
      OnnxAttr::integer("normalize_routing_weights", 0),
      OnnxAttr::integer("swiglu_fusion", 1),
      OnnxAttr::real("activation_alpha", 1.0f),
      OnnxAttr::real("activation_beta", 0.0f)};
  if (f.limit)
    attrs.push_back(OnnxAttr::real("swiglu_limit", *f.limit));
  std::string y = b.nodeInDomain(kContribDomain, "MoE",
                                 {x, chosen, f.fc1, "", f.fc2}, attrs);
  addGraphOutput(thenBranch, y, act);
  b.restore(std::move(outer));
  outer = b.retarget(elseBranch, elseBranch.name() + "_");
  addGraphOutput(elseBranch, b.node("Identity", {x}), act);
  b.restore(std::move(outer));
  restoreCaches(std::move(saved));
  y = b.nodeN("If", {nonEmpty},
              {OnnxAttr::graph("then_branch", std::move(thenBranch)),
               OnnxAttr::graph("else_branch", std::move(elseBranch))},
              1, "moe")[0];
  std::string total =
      b.node("ReduceSum", {w, b.i64({1})}, {OnnxAttr::integer("keepdims", 1)});
  if (f.parts > 1)
    total = b.node("Mul", {total, b.f32Scalar(static_cast<float>(f.parts))});
  out = b.node("Mul", {y, total});
  return true;
}

} // namespace archc
