//===- LowerExperts.cpp - ONNX lowering of the MoE expert dispatch --------===//
//
// This file lowers `experts`: each token's output is the routing-weighted
// sum of its selected experts' outputs. Only the selected (token, expert)
// pairs are computed (no capacity, nothing dropped).
//
// The dispatch is an ONNX Scan over the experts 0..E-1, so the graph holds
// the expert body once per layer whatever the number of experts. Its scan
// inputs are the rows of hits [E, P] (which of the P = N * k (token,
// expert) pairs chose the expert; one Equal against a constant shared by
// the layers) and the stacked [E, ...] expert weights: ONNX Runtime hands
// each iteration its expert's slice as a view (no copy). An iteration
// takes its pairs (NonZero; none for an expert nobody selected, whose body
// then runs on 0 rows) as index columns, gathers their tokens and routing
// weights (GatherND), runs the body, weights the output (or, with
// scale_input, the input) and adds it into the float32 accumulator (the
// Scan state) with the ScatterND add that is the body's output.
//
// A per-expert weight `...{e}...` of the body becomes the stacked
// initializer named with `{e}` replaced by `stacked`, streamed from every
// expert's checkpoint tensor (WeightPlan::useStacked); a weight the
// checkpoint already stacks (an expert_slice of it) is scanned as it is.
//
// A body whose matrices are only read by matmuls and whose other ops are
// elementwise (the SwiGLU/GeGLU/ReLU experts) runs columnar: on the tokens
// transposed, [D, n], with every matmul W [out, in] x. ONNX Runtime's sgemm
// packs its B operand on every call: here that is the expert's few tokens,
// not its weight matrix (measured: prefill 27% faster than x W, decode no
// slower). Such a body reads every Linear in its checkpoint layout; a
// matrix stored [in, out] is stacked transposed. Other bodies read [n, D]
// (or, if rank-dependent, the IR's rank) with matmuls x W on [in, out]
// matrices: a Linear is stacked transposed, an expert slice scanned from
// the Transpose of its stack (ONNX Runtime folds the Transpose of an
// initializer when the session is created).
//
// Bodies that read block-quantized weights scan the whole stacks of codes,
// scales and zero points ([E, N, blocks, blob] ...: each step's slice is
// MatMulNBits's B of its expert), and run on row tokens. When the graph
// holds at most --quant-unroll-experts such bodies in all (experts x
// layers, 256 by default) they are unrolled instead: one copy of the body
// per expert, each over the tokens that selected it, whose MatMulNBits
// reads the expert's codes through its own initializer (pre-packed by ONNX
// Runtime, which dequantizes a scanned slice on every call: ~1 ms per 768
// x 1024 matrix on 2 threads), in a graph still small enough to load.
//
// With --target=ort, a SwiGLU layer with a positive-weight route is offered to
// LowerFusedMoe.cpp (ONNX Runtime's MoE op for one token, this Scan on its
// interleaved gate/up stack for more).
//
//===----------------------------------------------------------------------===//
#include "emit/lowering/OnnxLowering.h"

#include <cstring>

namespace archc {

namespace {
/// The elementwise ops of expert bodies (activations, gating, clamps),
/// whose lowering neither depends on the tokens' rank nor on their layout.
bool isExpertElementwise(ir::OpKind kind) {
  switch (kind) {
  case ir::OpKind::Add:
  case ir::OpKind::Sub:
  case ir::OpKind::Mul:
  case ir::OpKind::Silu:
  case ir::OpKind::Relu:
  case ir::OpKind::Gelu:
  case ir::OpKind::Sigmoid:
  case ir::OpKind::Clamp:
    return true;
  default:
    return false;
  }
}
} // namespace

OnnxLowering::SavedCaches OnnxLowering::saveCaches() const {
  return {names,     deferred,     storage,      symbols,   exprSources,
          maskCache, leadingShape, sharedShapes, ropeCache, permuted};
}

void OnnxLowering::restoreCaches(SavedCaches &&s) {
  names = std::move(s.names);
  deferred = std::move(s.deferred);
  storage = std::move(s.storage);
  symbols = std::move(s.symbols);
  exprSources = std::move(s.exprSources);
  ropeCache = std::move(s.ropeCache);
  maskCache = std::move(s.maskCache);
  leadingShape = std::move(s.leadingShape);
  sharedShapes = std::move(s.sharedShapes);
  permuted = std::move(s.permuted);
}

std::string OnnxLowering::stackedWeightName(const std::string &pattern) {
  std::string out = pattern;
  for (size_t at = out.find("{e}"); at != std::string::npos;
       at = out.find("{e}", at))
    out.replace(at, 3, "stacked");
  return out;
}

bool OnnxLowering::expertBodyQuantized(const ir::Block &body) const {
  for (const auto &op : body.getOps())
    if (quantMatmuls.count(op.get()))
      return true;
  return false;
}

bool OnnxLowering::expertBodyStackable(const ir::Block &body,
                                       int64_t experts) const {
  bool quantized = false;
  for (const auto &op : body.getOps()) {
    if (quantGathers.count(op.get()))
      return false;
    auto q = quantMatmuls.find(op.get());
    if (q == quantMatmuls.end())
      continue;
    quantized = true;
    // The Scan reads the whole stack of codes: a checkpoint stack of this
    // dispatch's experts, or the per-expert [out, in] tensors stacked.
    const ir::LinearWeightUse &u = q->second;
    bool perExpert =
        u.param->attr<std::string>("name").find("{e}") != std::string::npos;
    if (u.slice ? u.experts != experts : !perExpert || u.inOut)
      return false;
    // The checkpoint's codes stack only in one layout, in input order.
    if (weightStorage.kindOf(u.matmul) ==
            WeightStorage::Kind::CheckpointCodes &&
        !samePackedLayouts(u, experts))
      return false;
  }
  // A quantized weight that a float op also reads has no float slice in
  // the Scan (its float form is a per-expert initializer when unrolled).
  for (const auto &op : body.getOps()) {
    if (quantSlices.count(op.get())) // the slice of a quantized stack
      continue;
    for (size_t i = 0; i < op->getNumOperands(); ++i) {
      const ir::Op *def = op->getOperand(i)->getDefiningOp();
      if (def && (quantParams.count(def) || quantSlices.count(def)) &&
          !(quantMatmuls.count(op.get()) && i == 1))
        return false;
    }
  }
  // Few expert bodies in all unroll: each expert's MatMulNBits then has
  // its own initializer codes, which ONNX Runtime pre-packs (a scanned
  // slice of codes is dequantized on every call), and the graph stays
  // small enough to load.
  return !quantized || quantExpertBodies > quant.unrollExperts;
}

std::string OnnxLowering::expertContribution(const ir::Op &op,
                                             const std::string &xe,
                                             const std::string &wsel,
                                             ExpertTokens tokens) {
  const ir::Block &body = *op.getRegions()[0];
  const ir::TensorType &xt = op.getOperand(0)->type;
  int64_t dOut = op.getResult()->type.dims.back().getConstant().value_or(0);
  const bool *scaleInputAttr = op.optAttr<bool>("scale_input");
  bool scaleInput = scaleInputAttr && *scaleInputAttr;
  std::string input = xe;
  if (scaleInput) // Llama 4: the routing weight scales the expert's input
    input = narrow(b.node("Mul", {widen(xe), widen(wsel)}));
  // A ranked body sees its tokens with the rank the IR gave it ([..., n,
  // D]: leading dims of 1), so rank-dependent lowerings stay valid; a flat
  // one reads [n, D]; a columnar one [D, n] (its matmuls are W x).
  std::vector<int64_t> lead;
  for (size_t i = 2; tokens == ExpertTokens::Ranked && i < xt.rank(); ++i)
    lead.push_back(static_cast<int64_t>(i - 2));
  if (!lead.empty())
    input = b.node("Unsqueeze", {input, b.i64(lead)});
  bool columnar = tokens == ExpertTokens::Columnar;
  if (columnar)
    input = b.node("Transpose", {input}, {OnnxAttr::list("perm", {1, 0})});
  def(body.getArgument(0), input);
  expertColumnar = columnar;
  bool ok = lowerBlock(body);
  expertColumnar = false;
  if (!ok)
    return "";
  std::string ye = in(body.getTerminator()->getOperand(0));
  if (!lead.empty())
    ye = b.node("Reshape", {ye, b.i64({-1, dOut})});
  if (columnar)
    ye = b.node("Transpose", {ye}, {OnnxAttr::list("perm", {1, 0})});
  return scaleInput ? widen(ye) : b.node("Mul", {widen(ye), widen(wsel)});
}

std::string OnnxLowering::tokenRowsShape(const ir::Op &op, const std::string &x,
                                         int64_t width) {
  const ir::TensorType &xt = op.getOperand(0)->type;
  ir::SymExpr tokens(1);
  for (size_t i = 0; i + 1 < xt.rank(); ++i)
    tokens = tokens * xt.dims[i];
  std::string shape = sharedShape({tokens, ir::SymExpr(width)});
  if (!shape.empty())
    return shape;
  if (width == xt.dims.back().getConstant().value_or(-1))
    return b.node("Shape", {x});
  return b.node(
      "Concat",
      {b.node("Shape", {x}, {OnnxAttr::integer("end", 1)}), b.i64({width})},
      {OnnxAttr::integer("axis", 0)});
}

bool OnnxLowering::lowerExperts(const ir::Op &op) {
  if (expert >= 0 || !expertIndex.empty())
    return fail(op, "nested expert dispatch");
  const ir::TensorType &xt = op.getOperand(0)->type;
  const ir::TensorType &rt = op.getResult()->type;
  int64_t dIn = xt.dims.back().getConstant().value_or(0);
  int64_t dOut = rt.dims.back().getConstant().value_or(0);
  // Tokens flattened to [N, D].
  std::string x = b.node("Reshape", {in(op.getOperand(0)), b.i64({-1, dIn})});
  FusedExperts fused;
  std::string out;
  bool ok;
  if (matchFusedExperts(op, fused)) {
    ok = dispatchFused(op, x, out, fused);
  } else {
    // The weighted sum accumulates in float32 (more accurate, and ONNX
    // Runtime's CPU ScatterND has no float16 add), from zeros of [N, dOut].
    std::string accShape = tokenRowsShape(op, x, dOut);
    out = b.node("ConstantOfShape", {accShape});
    ok = expertBodyStackable(*op.getRegions()[0], op.attr<int64_t>("count"))
             ? dispatchScan(op, x, out)
             : dispatchUnrolled(op, x, out);
  }
  if (!ok)
    return false;
  std::string shape = sharedShape(rt.dims);
  if (shape.empty())
    return fail(op, "cannot compute the output shape");
  def(op.getResult(), narrow(b.node("Reshape", {out, shape},
                                    {OnnxAttr::integer("allowzero", 1)})));
  return true;
}

std::string OnnxLowering::expertWeight(const std::string &stacked,
                                       const ir::TensorType &slice,
                                       bool transposedIn) {
  return expertScanInput(stacked, onnxDType(ir::dtypeName(slice.dtype)),
                         transposedIn);
}

std::string OnnxLowering::expertScanInput(const std::string &stacked,
                                          int32_t onnxType, bool transposedIn) {
  // A scan input: Scan hands the body each expert's slice in turn (the
  // transposed stack's when transposedIn).
  for (const ScanInput &si : scanInputs)
    if (si.outer == stacked && si.transposed == transposedIn)
      return si.inner;
  std::string inner = b.fresh("expert_w");
  addGraphInput(b.proto(), inner, onnxType);
  scanInputs.push_back({stacked, transposedIn, inner});
  return inner;
}

void OnnxLowering::findTransposedWeights(const ir::Block &body, bool columnar) {
  // Values read as the 2-D matrix B of every matmul that reads them, and by
  // nothing else: with transpose_b (a [out, in] matrix) for a flat or
  // ranked body, which then reads it as [in, out]; without (a [in, out]
  // matrix) for a columnar body, which reads every matrix as [out, in].
  std::map<const ir::Value *, bool> only;
  for (const auto &op : body.getOps())
    for (size_t i = 0; i < op->getNumOperands(); ++i) {
      const ir::Value *v = op->getOperand(i);
      bool transposedB = op->getKind() == ir::OpKind::MatMul && i == 1 &&
                         op->attr<bool>("transpose_b") != columnar &&
                         v->type.rank() == 2;
      auto [it, fresh] = only.emplace(v, transposedB);
      if (!fresh)
        it->second = it->second && transposedB;
    }
  // Only the expert's slices (per-expert params, expert_slice) are handed
  // over by expertWeight, so only they can come transposed.
  transposedWeights.clear();
  for (const auto &op : body.getOps()) {
    bool slice =
        op->getKind() == ir::OpKind::ExpertSlice ||
        (op->getKind() == ir::OpKind::Param &&
         op->attr<std::string>("name").find("{e}") != std::string::npos);
    if (!slice)
      continue;
    auto it = only.find(op->getResult());
    if (it != only.end() && it->second)
      transposedWeights.insert(op->getResult());
  }
}

bool OnnxLowering::expertBodyColumnar(const ir::Block &body) const {
  // Every matrix is a 2-D expert weight that only matmuls read (as B, all
  // with the same transpose_b), every other op elementwise on the tokens'
  // values (or a scalar constant): then the body computes the same on [D, n]
  // with W [out, in] x for every matmul.
  auto isWeight = [](const ir::Value *v) {
    const ir::Op *def = v->getDefiningOp();
    return def && (def->getKind() == ir::OpKind::Param ||
                   def->getKind() == ir::OpKind::ExpertSlice);
  };
  std::map<const ir::Value *, int> flag; // transpose_b of its matmuls
  for (const auto &op : body.getOps()) {
    if (isExpertElementwise(op->getKind())) {
      for (size_t i = 0; i < op->getNumOperands(); ++i)
        if (isWeight(op->getOperand(i)))
          return false;
      continue;
    }
    switch (op->getKind()) {
    case ir::OpKind::Param:
    case ir::OpKind::ExpertSlice:
    case ir::OpKind::Yield:
      continue;
    case ir::OpKind::Const:
      if (op->getResult()->type.rank() != 0)
        return false;
      continue;
    case ir::OpKind::MatMul: {
      const ir::Value *w = op->getOperand(1);
      if (isWeight(op->getOperand(0)) || !isWeight(w) || w->type.rank() != 2 ||
          op->getOperand(0)->type.rank() < 2)
        return false;
      int t = op->attr<bool>("transpose_b") ? 1 : 0;
      auto [it, fresh] = flag.emplace(w, t);
      if (!fresh && it->second != t)
        return false;
      continue;
    }
    default:
      return false;
    }
  }
  // Weights read by anything but a matmul's B.
  for (const auto &op : body.getOps())
    for (size_t i = 0; i < op->getNumOperands(); ++i)
      if (isWeight(op->getOperand(i)) &&
          !(op->getKind() == ir::OpKind::MatMul && i == 1))
        return false;
  return true;
}

bool OnnxLowering::expertBodyRankFree(const ir::Block &body) const {
  // Ops whose lowering does not depend on the rank of the tokens: matmuls
  // on the [in, out] slices the Scan hands over (or on untransposed ones),
  // elementwise ops and the weights themselves.
  for (const auto &op : body.getOps()) {
    if (isExpertElementwise(op->getKind()))
      continue;
    switch (op->getKind()) {
    case ir::OpKind::Param:
    case ir::OpKind::ExpertSlice:
    case ir::OpKind::Yield:
      break;
    case ir::OpKind::MatMul:
      if (quantMatmuls.count(op.get())) // MatMulNBits: A of any rank
        break;
      if (op->getOperand(0)->type.rank() < 2 ||
          op->getOperand(1)->type.rank() != 2 ||
          (op->attr<bool>("transpose_b") &&
           !transposedWeights.count(op->getOperand(1))))
        return false;
      break;
    default:
      return false;
    }
  }
  return true;
}

bool OnnxLowering::dispatchScan(const ir::Op &op, const std::string &x,
                                std::string &out) {
  int64_t count = op.attr<int64_t>("count");
  int64_t k = op.getOperand(1)->type.dims.back().getConstant().value_or(0);
  // The (token, expert) pairs, flattened: pair p is token p / k's choice
  // p % k. Its routing weight as a column [P, 1]; which pairs chose each
  // step's expert as the rows of hits [E, P] (one row per Scan step).
  std::string pairWeight =
      b.node("Reshape", {in(op.getOperand(1)), b.i64({-1, 1})});
  std::string pairExpert =
      b.node("Reshape", {in(op.getOperand(2)), b.i64({1, -1})});
  std::string idBytes(static_cast<size_t>(count) * 8, '\0');
  for (int64_t e = 0; e < count; ++e)
    std::memcpy(idBytes.data() + e * 8, &e, 8);
  std::string ids =
      b.raw(idBytes, onnx::TensorProto_DataType_INT64, {count, 1}, "experts");
  std::string hits = b.node("Equal", {ids, pairExpert});
  // Outer constants the body reads (a constant first made inside the body
  // would be a node of every step).
  std::string kScalar = b.i64Scalar(k), column = b.i64({-1, 1});

  // The body, built in a subgraph; the lowering's caches are restored
  // afterwards (what the body defined is not visible outside it).
  onnx::GraphProto scanBody;
  scanBody.set_name(b.fresh("experts_step"));
  SavedCaches saved = saveCaches();
  GraphBuilder::Target outer = b.retarget(scanBody, scanBody.name() + "_");
  // Body inputs: the accumulator (state), then the scan inputs in order:
  // the expert's row of hits, then the weights as the body asks for them.
  std::string accIn = b.fresh("acc"), hit = b.fresh("hits");
  addGraphInput(scanBody, accIn, onnx::TensorProto_DataType_FLOAT);
  addGraphInput(scanBody, hit, onnx::TensorProto_DataType_BOOL);
  scanInputs.clear();
  scanInputs.push_back({hits, false, hit});
  // The expert's pairs and their tokens as index columns [n, 1]: GatherND
  // reads the tokens [n, D] and the weights [n, 1], ScatterND adds back.
  std::string pairs = b.node("Reshape", {b.node("NonZero", {hit}), column});
  std::string tok = b.node("Div", {pairs, kScalar});
  std::string xe = b.node("GatherND", {x, tok});
  std::string wsel = b.node("GatherND", {pairWeight, pairs});
  expertIndex = hit;
  expertCount = count;
  const ir::Block &body = *op.getRegions()[0];
  // MatMulNBits computes x W^T on row tokens: a quantized body is not
  // columnar.
  ExpertTokens tokens = ExpertTokens::Columnar;
  if (expertBodyQuantized(body) || !expertBodyColumnar(body)) {
    findTransposedWeights(body, false);
    tokens =
        expertBodyRankFree(body) ? ExpertTokens::Flat : ExpertTokens::Ranked;
  } else {
    findTransposedWeights(body, true);
  }
  std::string contrib = expertContribution(op, xe, wsel, tokens);
  expertIndex.clear();
  transposedWeights.clear();
  bool ok = !contrib.empty();
  if (ok) {
    // The ScatterND's output is the body's output (no Identity).
    std::string accOut = b.fresh("acc_out");
    b.nodeNamed("ScatterND", {accIn, tok, contrib}, accOut,
                {OnnxAttr::str("reduction", "add")});
    addGraphOutput(scanBody, accOut, onnx::TensorProto_DataType_FLOAT);
  }
  b.restore(std::move(outer));
  restoreCaches(std::move(saved));
  if (ok) {
    std::vector<std::string> ins = {out};
    for (const ScanInput &si : scanInputs)
      ins.push_back(si.transposed ? b.node("Transpose", {si.outer},
                                           {OnnxAttr::list("perm", {0, 2, 1})})
                                  : si.outer);
    int64_t m = static_cast<int64_t>(scanInputs.size());
    out = b.nodeN("Scan", ins,
                  {OnnxAttr::graph("body", std::move(scanBody)),
                   OnnxAttr::integer("num_scan_inputs", m)},
                  1, "experts")[0];
  }
  scanInputs.clear();
  return ok;
}

bool OnnxLowering::dispatchUnrolled(const ir::Op &op, const std::string &x,
                                    std::string &out) {
  int64_t count = op.attr<int64_t>("count");
  int64_t k = op.getOperand(1)->type.dims.back().getConstant().value_or(0);
  // Routing as [N, k].
  std::string w = b.node("Reshape", {in(op.getOperand(1)), b.i64({-1, k})});
  std::string idx = b.node("Reshape", {in(op.getOperand(2)), b.i64({-1, k})});
  std::string zero = actScalar(0.0);
  for (int64_t e = 0; e < count; ++e) {
    std::string hit = b.node("Equal", {idx, b.i64Scalar(e)}); // [N, k]
    std::string we =
        b.node("ReduceSum", {b.node("Where", {hit, w, zero}), b.i64({1})},
               {OnnxAttr::integer("keepdims", 0)}); // [N]
    std::string any = b.node(
        "ReduceMax",
        {b.node("Cast", {hit},
                {OnnxAttr::integer("to", onnx::TensorProto_DataType_INT32)})},
        {OnnxAttr::list("axes", {1}), OnnxAttr::integer("keepdims", 0)});
    std::string tok =
        b.node("Reshape", {b.node("NonZero", {any}), b.i64({-1})});
    std::string xe = b.node("Gather", {x, tok}, {OnnxAttr::integer("axis", 0)});
    std::string wsel =
        b.node("Unsqueeze",
               {b.node("Gather", {we, tok}, {OnnxAttr::integer("axis", 0)}),
                b.i64({1})});
    expert = e;
    std::string contrib =
        expertContribution(op, xe, wsel, ExpertTokens::Ranked);
    expert = -1;
    if (contrib.empty())
      return false;
    out = b.node("ScatterND",
                 {out, b.node("Unsqueeze", {tok, b.i64({1})}), contrib},
                 {OnnxAttr::str("reduction", "add")});
  }
  return true;
}

} // namespace archc
