//===- OnnxLowering.cpp - IR to ONNX graph: core --------------------------===//
//
// This file implements the driver of the lowering: graph inputs and outputs
// with named symbolic dims, symbolic-dim tensors computed from input shapes,
// parameters and state I/O, and dispatch to the op family lowerings.
//
//===----------------------------------------------------------------------===//
#include "emit/lowering/OnnxLowering.h"

#include "emit/onnx/GraphCse.h"
#include "emit/onnx/GraphOutputs.h"
#include "emit/onnx/GraphSimplify.h"

#include <fmt/format.h>

#include <algorithm>

namespace archc {

using ir::OpKind;

std::string onnxDimName(const ir::SymExpr &e) {
  static const std::map<std::string, std::string> names = {
      {"batch", "batch_size"},
      {"seq", "sequence_length"},
      {"past", "past_sequence_length"},
      {"(past + seq)", "total_sequence_length"},
      {"images", "num_images"},
      {"max_images", "max_num_images"},
      {"image_tokens", "num_image_tokens"},
      // An encoder-decoder's decoder: the encoder output's length, and the
      // length of the cross-attention state it carries (Optimum's names).
      {"enc_seq", "encoder_sequence_length"},
      {"enc_past", "encoder_sequence_length_out"}};
  std::string s = e.str();
  auto it = names.find(s);
  if (it != names.end())
    return it->second;
  // A vision-language package's multiples: k tokens per image are the
  // image tokens (fixed-size towers' image_features), k patches per image
  // token the flattened patches (Qwen-VL's pixel_values).
  auto terms = e.getTerms();
  if (terms.size() == 1 && terms.begin()->first.size() == 1 &&
      terms.begin()->first[0].second == 1 && terms.begin()->second > 1) {
    const std::string &sym = terms.begin()->first[0].first;
    if (sym == "images")
      return "num_image_tokens";
    if (sym == "image_tokens")
      return "num_patches";
  }
  return s;
}

OnnxLowering::OnnxLowering(const ir::Module &m, onnx::GraphProto &g,
                           WeightPlan &w, DiagnosticEngine &d,
                           const WeightStorage &storage, OnnxTarget target)
    : module(m), b(g), weights(w), diags(d),
      act(onnxDType(ir::dtypeName(m.activationDType))), target(target),
      weightStorage(storage), quant(storage.quant()),
      quantMatmuls(storage.quantizedMatmuls()),
      quantGathers(storage.quantizedGathers()),
      quantSlices(storage.quantizedSlices()),
      quantParams(storage.quantizedParams()) {
  if (storage.anyQuantized())
    planQuantization();
  findLinearWeights();
  findReshapedWeights();
  findFusedStacks();
  findOnceCones();
}

bool OnnxLowering::fail(const ir::Op &op, const std::string &msg) {
  Diagnostic &d = diags.error(
      op.getLoc().range,
      fmt::format("cannot lower '{}' to ONNX: {}", op.getMnemonic(), msg));
  for (const ir::InlineFrame *f = op.getLoc().inlinedAt.get(); f;
       f = f->parent.get())
    d.notes.push_back(
        {f->callSite, "in call to '" + f->callee + "' from here"});
  return false;
}

const std::string &OnnxLowering::in(const ir::Value *v) {
  static const std::string missing = "<missing>";
  auto it = names.find(v);
  if (it != names.end())
    return it->second;
  // Values with a deferred definition (e.g. the compute-layout view of a
  // cache) are materialised on first use.
  auto lazy = deferred.find(v);
  if (lazy != deferred.end()) {
    // Taken out first: making it may defer (and rehash) other values.
    std::function<std::string()> make = std::move(lazy->second);
    deferred.erase(lazy);
    std::string name = make();
    return names[v] = name;
  }
  return missing;
}

void OnnxLowering::declareValue(onnx::ValueInfoProto *vi,
                                const std::string &name,
                                const ir::TensorType &t) {
  vi->set_name(name);
  auto *tt = vi->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(onnxDType(ir::dtypeName(t.dtype)));
  auto *shape = tt->mutable_shape();
  for (const ir::SymExpr &d : t.dims) {
    auto *dim = shape->add_dim();
    if (auto c = d.getConstant())
      dim->set_dim_value(*c);
    else
      dim->set_dim_param(onnxDimName(d));
  }
}

void OnnxLowering::registerSymbols(const std::string &tensor,
                                   const ir::TensorType &t) {
  std::string shape;
  for (size_t i = 0; i < t.dims.size(); ++i) {
    const ir::SymExpr &d = t.dims[i];
    if (d.isConstant())
      continue;
    bool single =
        d.symbols().size() == 1 && ir::SymExpr::symbol(d.symbols()[0]) == d;
    std::string key = single ? d.symbols()[0] : d.str();
    auto &slot = single ? symbols[key] : exprSources[key];
    if (!slot.empty())
      continue;
    if (shape.empty())
      shape = b.node("Shape", {tensor});
    slot = b.node("Slice", {shape, b.i64({static_cast<int64_t>(i)}),
                            b.i64({static_cast<int64_t>(i + 1)})});
  }
}

std::string OnnxLowering::dimTensor(const ir::SymExpr &e) {
  if (auto c = e.getConstant())
    return b.i64({*c});
  auto src = exprSources.find(e.str());
  if (src != exprSources.end())
    return src->second;
  std::string sum;
  for (auto &[mono, coef] : e.getTerms()) {
    std::string term = coef == 1 && !mono.empty() ? "" : b.i64({coef});
    for (auto &[sym, pow] : mono) {
      std::string s;
      auto it = symbols.find(sym);
      if (it != symbols.end()) {
        s = it->second;
      } else if (sym == "past" && symbols.count("seq") &&
                 exprSources.count("(past + seq)")) {
        s = b.node("Sub", {exprSources["(past + seq)"], symbols["seq"]});
        symbols["past"] = s;
      } else {
        return "";
      }
      for (unsigned k = 0; k < pow; ++k)
        term = term.empty() ? s : b.node("Mul", {term, s});
    }
    sum = sum.empty() ? term : b.node("Add", {sum, term});
  }
  return sum;
}

std::string OnnxLowering::shapeTensor(const std::vector<ir::SymExpr> &dims) {
  std::vector<std::string> parts;
  for (const ir::SymExpr &d : dims) {
    std::string t = dimTensor(d);
    if (t.empty())
      return "";
    parts.push_back(t);
  }
  if (parts.size() == 1)
    return parts[0];
  return b.node("Concat", parts, {OnnxAttr::integer("axis", 0)});
}

std::string OnnxLowering::sharedShape(const std::vector<ir::SymExpr> &dims) {
  std::string key;
  for (const ir::SymExpr &d : dims)
    key += d.str() + ",";
  auto it = sharedShapes.find(key);
  if (it != sharedShapes.end())
    return it->second;
  std::string shape = shapeTensor(dims);
  if (!shape.empty())
    sharedShapes[key] = shape;
  return shape;
}

std::string OnnxLowering::castTo(const std::string &x, int32_t to) {
  return b.node("Cast", {x}, {OnnxAttr::integer("to", to)});
}

std::string OnnxLowering::widen(const std::string &x) {
  return act == onnx::TensorProto_DataType_FLOAT
             ? x
             : castTo(x, onnx::TensorProto_DataType_FLOAT);
}

std::string OnnxLowering::narrow(const std::string &x) {
  return act == onnx::TensorProto_DataType_FLOAT ? x : castTo(x, act);
}

std::string OnnxLowering::narrowTo(const std::string &x, ir::DType t) {
  return t == ir::DType::F32 ? x : castTo(x, onnxDType(ir::dtypeName(t)));
}

bool OnnxLowering::lowerBlock(const ir::Block &block) {
  for (const auto &op : block.getOps()) {
    // Computed inside the branch of the cache they feed (lowerOnceCache).
    if (inCone.count(op.get()))
      continue;
    if (op->getNumResults() == 1 && fusedStacks.count(op->getResult())) {
      // A checkpoint stack (or its reshape) that an ORT MoE op reads
      // through its own blocks: lowered, and its data written, only if
      // another reader asks for it.
      const ir::Op *stack = op.get();
      deferred[stack->getResult()] = [this, stack]() {
        if (!lowerOp(*stack))
          return std::string("<missing>");
        return names[stack->getResult()];
      };
      continue;
    }
    if (!lowerOp(*op))
      return false;
  }
  return true;
}

bool OnnxLowering::lowerOp(const ir::Op &op) {
  switch (op.getKind()) {
  case OpKind::Param: {
    std::string name = op.attr<std::string>("name");
    if (!expertIndex.empty() && name.find("{e}") != std::string::npos &&
        quantParams.count(&op)) {
      // Its quantized matmuls scan the stacked codes (LowerQuantized.cpp).
      names.erase(op.getResult());
      return true;
    }
    if (!expertIndex.empty() && name.find("{e}") != std::string::npos) {
      // A per-expert weight in a stacked dispatch: the iteration's slice of
      // the [E, ...] stack of every expert's checkpoint tensor.
      std::vector<std::string> members;
      for (int64_t e = 0; e < expertCount; ++e)
        members.push_back(ir::instantiatePattern(name, -1, e));
      // A matrix the body reads with its last two dims swapped (see
      // transposedWeights) is stacked so when it is written.
      bool transposed = transposedWeights.count(op.getResult()) > 0;
      std::string stacked = weights.useStacked(
          stackedWeightName(name), members, op.getResult()->type, transposed);
      def(op.getResult(), expertWeight(stacked, op.getResult()->type));
      return true;
    }
    if (expert >= 0)
      name = ir::instantiatePattern(name, -1, expert);
    if (name.find('{') != std::string::npos)
      return fail(op, "weight '" + name +
                          "' still has a placeholder (run "
                          "expand-repeat first)");
    if (quantParams.count(&op)) {
      // Read quantized; a float initializer only if a float reader asks.
      const ir::TensorType type = op.getResult()->type;
      names.erase(op.getResult());
      deferred[op.getResult()] = [this, name, type]() {
        return weights.use(name, type);
      };
      return true;
    }
    auto reshaped = reshapedWeights.find(op.getResult());
    def(op.getResult(),
        weights.use(
            name, op.getResult()->type, linearWeights.count(op.getResult()) > 0,
            reshaped == reshapedWeights.end() ? nullptr : &reshaped->second));
    return true;
  }
  case OpKind::Const: {
    // Emitted on first use: a binary op may take the constant in its own
    // element type instead (see lowerElementwise).
    double v = op.attr<double>("value");
    int32_t dt = onnxDType(ir::dtypeName(op.getResult()->type.dtype));
    deferred[op.getResult()] = [this, v, dt]() { return b.scalar(v, dt); };
    return true;
  }
  case OpKind::StateIn: {
    std::string name = op.attr<std::string>("name");
    if (name.find('{') != std::string::npos)
      return fail(op, "state '" + name + "' still has a placeholder");
    declareValue(b.proto().add_input(), name, op.getResult()->type);
    registerSymbols(name, op.getResult()->type);
    def(op.getResult(), name);
    return true;
  }
  case OpKind::StateOut: {
    std::string name = op.attr<std::string>("name");
    declareValue(b.proto().add_output(), name, op.getOperand(0)->type);
    b.nodeNamed("Identity", {in(op.getOperand(0))}, name);
    return true;
  }
  case OpKind::Return: {
    const auto &outs = module.graph.outputNames;
    for (size_t i = 0; i < op.getNumOperands(); ++i) {
      declareValue(b.proto().add_output(), outs[i], op.getOperand(i)->type);
      b.nodeNamed("Identity", {in(op.getOperand(i))}, outs[i]);
    }
    return true;
  }
  case OpKind::Yield:
    return true; // handled by the region's owner
  case OpKind::Repeat:
    return fail(op, "layer loops must be expanded first (expand-repeat)");
  default:
    break;
  }
  switch (op.getFamily()) {
  case ir::OpFamily::Binary:
  case ir::OpFamily::Select:
  case ir::OpFamily::Unary:
  case ir::OpFamily::Softmax:
    return lowerElementwise(op);
  case ir::OpFamily::Norm:
    return lowerNorm(op);
  case ir::OpFamily::MatMul:
  case ir::OpFamily::Gather:
    return lowerMatMul(op);
  case ir::OpFamily::Shape:
    return lowerShapeOp(op);
  case ir::OpFamily::Reduce:
    return lowerReduce(op);
  case ir::OpFamily::Rope:
    return lowerRope(op);
  case ir::OpFamily::Cache:
    return lowerCache(op);
  case ir::OpFamily::Attention:
    return op.getKind() == OpKind::MlaAttention ? lowerMlaAttention(op)
                                                : lowerAttention(op);
  case ir::OpFamily::Recurrent:
    return op.getKind() == OpKind::CausalConv ? lowerCausalConv(op)
           : op.getKind() == OpKind::Compress ? lowerCompress(op)
                                              : lowerDeltaRule(op);
  case ir::OpFamily::StateSpace:
    return lowerStateSpace(op);
  case ir::OpFamily::Route:
    return lowerRoute(op);
  case ir::OpFamily::Experts:
    return lowerExperts(op);
  case ir::OpFamily::Vision:
    return lowerVision(op);
  case ir::OpFamily::Sequence:
    return lowerSequence(op);
  default:
    return fail(op, "no lowering");
  }
}

bool OnnxLowering::run() {
  // Graph inputs in IR order; their dims define the symbol tensors.
  for (const auto &arg : module.graph.body.getArguments()) {
    declareValue(b.proto().add_input(), arg->name, arg->type);
    def(arg.get(), arg->name);
  }
  for (const auto &arg : module.graph.body.getArguments())
    registerSymbols(arg->name, arg->type);
  if (!lowerBlock(module.graph.body))
    return false;
  // Model outputs (logits) first, then the state outputs, as Optimum and
  // onnxruntime-genai order them.
  auto *outs = b.proto().mutable_output();
  std::stable_partition(
      outs->begin(), outs->end(), [&](const onnx::ValueInfoProto &v) {
        const auto &names = module.graph.outputNames;
        return std::find(names.begin(), names.end(), v.name()) != names.end();
      });
  // Outputs are written by their producers (no Identity copy of the cache).
  produceOutputsInPlace(b.proto());
  // Stacked views folded, per-layer copies of the same derived values
  // computed once, and what that leaves unread removed.
  foldViewChains(b.proto());
  hoistSubgraphConstants(b.proto());
  eliminateCommonSubexpressions(b.proto());
  removeDeadNodes(b.proto());
  // A graph fed a cache another graph computes (carry "input") does not
  // declare the inputs only the computation read (Whisper's
  // encoder_hidden_states in onnxruntime-genai's decoder).
  bool fed = false;
  ir::walk(module.graph.body, [&](const ir::Op &op) {
    const std::string *carry = op.getKind() == OpKind::Cache
                                   ? op.optAttr<std::string>("carry")
                                   : nullptr;
    fed |= carry && *carry == "input";
  });
  if (fed) {
    std::set<std::string> arguments;
    for (const auto &arg : module.graph.body.getArguments())
      arguments.insert(arg->name);
    removeUnreadInputs(b.proto(), arguments);
  }
  return true;
}

} // namespace archc
