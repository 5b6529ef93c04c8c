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
// bias, groups, p-norms, floors, routed scale, hash tables), with the
// route's own choice and ties. An expert chosen twice (a hash table may
// repeat one) gets the sum of its weights.
//
// Matched: such a route; a body silu(x Wg^T) * (x Wu^T) then Wd^T of
// per-expert ({e}) float matrices, without biases, optionally with the gate
// clamped above and up on both sides at one limit (DeepSeek-V4; the op's
// swiglu_limit); f32 activations (f16 with --quant: QMoE); scale_input only
// with k = 1 (Llama 4: the op runs on the tokens scaled by their weight).
// The op reads the gate and
// up matrices as one [P * E, 2 I / P, D] stack whose rows alternate
// (swiglu_fusion = 1; WeightPlan::useInterleavedStack) and the down
// matrices as [P * E, D, I / P].
//
// Or the same over the checkpoint's own stacks, read through expert_slice
// (matchStackedBody; a stack may be a reshape of its param): gate and up
// one [E, 2I, D] matrix ([E, D, 2I] input-major) split in halves or,
// gpt-oss, alternating, or two [E, I, D] stacks (DBRX); optional biases; the
// gate's activation gate * sigmoid(alpha * gate), up + beta (the op's
// activation_alpha / activation_beta); the clamps as above. Its blocks are made
// from the stacks expert by expert (WeightPlan::useExpertBlocks), and the
// stacks themselves are no initializers (fusedStacks).
//
//===----------------------------------------------------------------------===//
#include "emit/lowering/OnnxLowering.h"
#include "emit/onnx/OnnxContribSchemas.h"

#include <fmt/format.h>

#include <functional>
#include <limits>
#include <optional>
#include <set>

namespace archc {

namespace {
using ir::OpKind;

bool isExpertMatrix(const ir::Value *v) {
  const ir::Op *d = v->getDefiningOp();
  return d && d->getKind() == OpKind::Param && v->type.rank() == 2 &&
         d->attr<std::string>("name").find("{e}") != std::string::npos;
}

const ir::Op *definer(const ir::Value *v) {
  return v ? v->getDefiningOp() : nullptr;
}

/// The float checkpoint param a stack is: the value itself or a Reshape
/// of it (DBRX's [E * I, D] read as [E, I, D]: the same elements in order).
const ir::Op *stackParam(const ir::Value *stack) {
  const ir::Op *p = definer(stack);
  if (p && p->getKind() == OpKind::Reshape)
    p = definer(p->getOperand(0));
  return p && p->getKind() == OpKind::Param &&
                 ir::isFloat(p->getResult()->type.dtype)
             ? p
             : nullptr;
}

/// The stack (a checkpoint param or its reshape) whose expert slice of
/// rank `rank` is `v`.
const ir::Value *slicedStack(const ir::Value *v, size_t rank) {
  const ir::Op *slice = definer(v);
  if (!slice || slice->getKind() != OpKind::ExpertSlice ||
      v->type.rank() != rank)
    return nullptr;
  const ir::Value *stack = slice->getOperand(0);
  return stackParam(stack) && stack->type.rank() == rank + 1 ? stack : nullptr;
}

/// The value of a scalar constant.
std::optional<double> scalarConst(const ir::Value *v) {
  const ir::Op *c = definer(v);
  if (!c || c->getKind() != OpKind::Const || v->type.rank() != 0)
    return std::nullopt;
  return c->attr<double>("value");
}

int64_t lastDim(const ir::Value *v) {
  return v->type.rank() ? v->type.dims.back().getConstant().value_or(-1) : -1;
}

/// A split of the last axis into the given sizes.
bool splitsLast(const ir::Op *op, const std::vector<int64_t> &sizes) {
  if (!op || op->getKind() != OpKind::Split || op->getNumResults() != 2)
    return false;
  int64_t axis = op->attr<int64_t>("axis");
  int64_t rank = static_cast<int64_t>(op->getOperand(0)->type.rank());
  return (axis == -1 || axis == rank - 1) &&
         op->attr<std::vector<int64_t>>("sizes") == sizes;
}

/// The initializer-name suffix of a stack cut in `parts` parts ("@2").
std::string partsSuffix(int64_t parts) {
  return parts > 1 ? fmt::format("@{}", parts) : std::string();
}

/// A matmul of the body's tokens by a per-expert [out, in] matrix.
bool isTokenMatmul(const ir::Op *op, const ir::Value *tokens) {
  return op && op->getKind() == OpKind::MatMul && op->getOperand(0) == tokens &&
         op->attr<bool>("transpose_b") && isExpertMatrix(op->getOperand(1));
}
} // namespace

bool OnnxLowering::matchFusedExperts(const ir::Op &op, FusedExperts &f) const {
  // Float32 activations, or float16 with quantized experts: ONNX Runtime
  // 1.30 has no float16 CPU kernel for MoE and runs it between Casts it
  // inserts (every expert's weights cast on every call), and on the Cast of
  // the tokens the op's in-place hazard below is not avoided (tests/ort
  // f16-ort cases; docs/decisions.md); its QMoE has one.
  if (target != OnnxTarget::Ort || (act != onnx::TensorProto_DataType_FLOAT &&
                                    act != onnx::TensorProto_DataType_FLOAT16))
    return false;
  // scale_input (Llama 4: the routing weight scales the expert's input,
  // not its output) only with one expert per token: the op then runs on
  // the scaled tokens with weight 1.
  const bool *scaleInput = op.optAttr<bool>("scale_input");
  bool scaled = scaleInput && *scaleInput;
  if (op.getNumOperands() != 3 ||
      (scaled && op.getOperand(1)->type.dims.back().getConstant() !=
                     std::optional<int64_t>(1)))
    return false;
  // The router: both results of one route whose weights are positive
  // (the op reads their logarithms) and whose scale is positive.
  const ir::Op *route = op.getOperand(1)->getDefiningOp();
  if (!route || route->getKind() != OpKind::Route ||
      op.getOperand(2)->getDefiningOp() != route ||
      op.getOperand(1) != route->getResult(0) ||
      op.getOperand(2) != route->getResult(1))
    return false;
  const std::string &scoring = route->attr<std::string>("scoring");
  if ((scoring != "softmax" && scoring != "sigmoid" &&
       scoring != "sqrtsoftplus" && scoring != "sparsemixer") ||
      !(route->attr<double>("scale") > 0.0))
    return false;
  // The body: yield(silu(t Wg^T) * (t Wu^T) Wd^T), nothing else; or the
  // same over the checkpoint's own stacks.
  const ir::Block &body = *op.getRegions()[0];
  if (body.getArguments().empty())
    return false;
  // Quantized matrices (--quant) run on QMoE: every matrix of the body
  // quantized, nothing else. 4-bit ones only with --quant-qmoe: ONNX
  // Runtime 1.30's CPU kernel pre-packs 4-bit stacks at session creation
  // for minutes (20 s for two Qwen3-30B-A3B layers) and runs no faster than
  // the scanned or unrolled MatMulNBits (docs/decisions.md).
  bool quantized = expertBodyQuantized(body);
  if (!quantized && act != onnx::TensorProto_DataType_FLOAT)
    return false;
  // The codes: the checkpoint's own (GPTQ, AWQ, ...: one layout for every
  // expert matrix, no act-order), or --quant's.
  bool codes = false;
  for (const auto &o : body.getOps())
    codes |=
        weightStorage.kindOf(o.get()) == WeightStorage::Kind::CheckpointCodes;
  if (quantized && !codes && quant.bits == 4 && !quant.qmoeInt4)
    return false;
  if (quantized)
    for (const auto &o : body.getOps())
      if (quantGathers.count(o.get()) ||
          (o->getKind() == OpKind::MatMul && !quantMatmuls.count(o.get())))
        return false;
  // The parts each expert is cut into, once the intermediate size is
  // known; none fit: no match.
  auto sized = [&](int64_t inter) {
    f.quantized = quantized;
    f.codes = codes;
    f.scaleInput = scaled;
    f.hidden = lastDim(op.getOperand(0));
    f.inter = inter;
    f.qbits = quant.bits;
    f.qblock = quant.block;
    f.qsym = quant.symmetric;
    if (codes) {
      // Every expert's gate, up and down codes in one layout.
      int64_t count = op.attr<int64_t>("count");
      const PackedWeight *p = nullptr;
      for (const ir::Op *param : {f.gateParam, f.upParam, f.downParam}) {
        const PackedWeight *q =
            param ? commonPacked(param->attr<std::string>("name"), count)
                  : nullptr;
        if (!q ||
            (p && (q->containerBits != p->containerBits ||
                   q->block != p->block || q->storeZeros != p->storeZeros)))
          return false;
        p = p ? p : q;
      }
      f.qbits = p->containerBits;
      f.qblock = p->block;
      f.qsym = !p->storeZeros;
      if (f.qbits == 4 && !quant.qmoeInt4)
        return false;
    }
    f.parts = fusedParts(f.hidden, inter, f);
    return f.parts > 0;
  };
  if (matchStackedBody(body, f)) {
    int64_t count = op.attr<int64_t>("count");
    for (const ir::Value *v :
         {f.fc1Stack, f.fc1UpStack, f.fc2Stack, f.fc1BiasStack,
          f.fc1UpBiasStack, f.fc2BiasStack})
      if (v && v->type.dims[0].getConstant() != std::optional<int64_t>(count))
        return false;
    return sized(
        f.fc2Stack->type.dims[f.fc2InputMajor ? 1 : 2].getConstant().value_or(
            0));
  }
  f = FusedExperts();
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
  if (ops != 8 + clamps || yield->getNumOperands() != 1)
    return false;
  return sized(
      f.gateParam->getResult()->type.dims[0].getConstant().value_or(0));
}

int64_t OnnxLowering::fusedParts(int64_t hidden, int64_t inter,
                                 const FusedExperts &f) const {
  if (!f.quantized)
    return inter % 2 == 0 ? 2 : 1;
  // QMoE reads whole blocks; ONNX Runtime 1.30 reads a zero point of one
  // block per row as a per-row zero point of another layout (checked on
  // its CPU kernel), so asymmetric rows have two blocks or more.
  auto whole = [&](int64_t k) {
    return k > 0 && k % f.qblock == 0 && (f.qsym || k / f.qblock >= 2);
  };
  if (!whole(hidden))
    return 0;
  // Halves only when they keep the bytes of the whole rows (the profile's
  // count): packed 4-bit zero points of an odd block count per half would
  // round up twice. The checkpoint's codes are copied whole (one part).
  bool packedZeroPoints = !f.qsym && f.qbits < 8;
  if (!f.codes && inter % 2 == 0 && whole(inter / 2) &&
      (!packedZeroPoints || (inter / 2 / f.qblock) % 2 == 0))
    return 2;
  return whole(inter) ? 1 : 0;
}

bool OnnxLowering::matchStackedBody(const ir::Block &body,
                                    FusedExperts &f) const {
  // Walked back from the yield; every op of the body must be matched.
  std::set<const ir::Op *> seen;
  auto take = [&seen](const ir::Value *v, OpKind kind) -> const ir::Op * {
    const ir::Op *d = definer(v);
    if (!d || d->getKind() != kind)
      return nullptr;
    seen.insert(d);
    return d;
  };
  // A value plus a bias stack's slice (either order): the other operand.
  auto biased = [&](const ir::Value *v,
                    const ir::Value *&bias) -> const ir::Value * {
    const ir::Op *add = definer(v);
    if (!add || add->getKind() != OpKind::Add)
      return v;
    for (size_t i = 0; i < 2; ++i)
      if (const ir::Value *stack = slicedStack(add->getOperand(i), 1)) {
        bias = stack;
        seen.insert(add);
        seen.insert(definer(add->getOperand(i)));
        return add->getOperand(1 - i);
      }
    return v;
  };
  const ir::Value *t = body.getArgument(0);
  const ir::Op *yield = body.getTerminator();
  if (!yield || yield->getNumOperands() != 1)
    return false;
  const ir::Op *down =
      take(biased(yield->getOperand(0), f.fc2BiasStack), OpKind::MatMul);
  if (!down || !(f.fc2Stack = slicedStack(down->getOperand(1), 2)))
    return false;
  seen.insert(definer(down->getOperand(1)));
  f.fc2InputMajor = !down->attr<bool>("transpose_b");
  const ir::Op *mul = take(down->getOperand(0), OpKind::Mul);
  if (!mul)
    return false;
  // gate * sigmoid(alpha * gate) (or silu(gate)) times up (+ beta).
  const ir::Value *g = nullptr, *u = nullptr;
  for (size_t order = 0; order < 2 && !g; ++order) {
    std::set<const ir::Op *> mine;
    const ir::Value *gate = nullptr;
    double alpha = 1.0, beta = 0.0;
    const ir::Op *act = definer(mul->getOperand(order));
    if (act && act->getKind() == OpKind::Silu) {
      gate = act->getOperand(0);
      mine.insert(act);
    } else if (act && act->getKind() == OpKind::Mul) {
      for (size_t i = 0; i < 2 && !gate; ++i) {
        const ir::Op *sig = definer(act->getOperand(1 - i));
        if (!sig || sig->getKind() != OpKind::Sigmoid)
          continue;
        const ir::Value *cand = act->getOperand(i);
        const ir::Value *arg = sig->getOperand(0);
        const ir::Op *scale = definer(arg);
        if (arg == cand) {
          gate = cand;
        } else if (scale && scale->getKind() == OpKind::Mul) {
          for (size_t j = 0; j < 2 && !gate; ++j)
            if (scale->getOperand(j) == cand)
              if (auto a = scalarConst(scale->getOperand(1 - j))) {
                gate = cand;
                alpha = *a;
                mine.insert({scale, definer(scale->getOperand(1 - j))});
              }
        }
        if (gate)
          mine.insert({act, sig});
      }
    }
    if (!gate)
      continue;
    const ir::Value *up = mul->getOperand(1 - order);
    const ir::Op *shift = definer(up);
    if (shift && shift->getKind() == OpKind::Add)
      for (size_t i = 0; i < 2; ++i)
        if (auto c = scalarConst(shift->getOperand(1 - i))) {
          beta = *c;
          mine.insert({shift, definer(shift->getOperand(1 - i))});
          up = shift->getOperand(i);
          break;
        }
    g = gate;
    u = up;
    f.alpha = static_cast<float>(alpha);
    f.beta = static_cast<float>(beta);
    seen.insert(mine.begin(), mine.end());
  }
  if (!g)
    return false;
  // Optional clamps at one limit L: the gate from above, up on both sides.
  const ir::Op *gc = definer(g), *uc = definer(u);
  bool gClamped = gc && gc->getKind() == OpKind::Clamp;
  bool uClamped = uc && uc->getKind() == OpKind::Clamp;
  if (gClamped != uClamped)
    return false;
  if (gClamped) {
    const double *gMax = gc->optAttr<double>("max");
    const double *uMin = uc->optAttr<double>("min");
    const double *uMax = uc->optAttr<double>("max");
    if (gc->optAttr<double>("min") || !gMax || !uMin || !uMax ||
        *uMax != *gMax || *uMin != -*gMax || !(*gMax > 0.0))
      return false;
    f.limit = static_cast<float>(*gMax);
    seen.insert({gc, uc});
    g = gc->getOperand(0);
    u = uc->getOperand(0);
  }
  // gate and up from fc1's output: split in halves, or (interleaved) its
  // [..., I, 2] view split in pairs and each reshaped back to [..., I].
  int64_t inter = lastDim(g);
  if (inter <= 0 || lastDim(u) != inter)
    return false;
  // A token matmul by a stack's slice (plus a bias): its stack.
  auto tokenMatmul = [&](const ir::Value *v, const ir::Value *&stack,
                         const ir::Value *&bias) {
    const ir::Op *mm = take(biased(v, bias), OpKind::MatMul);
    if (!mm || mm->getOperand(0) != body.getArgument(0) ||
        !(stack = slicedStack(mm->getOperand(1), 2)))
      return false;
    seen.insert(definer(mm->getOperand(1)));
    f.fc1InputMajor = !mm->attr<bool>("transpose_b");
    return true;
  };
  const ir::Op *split = definer(g);
  const ir::Value *fc1Out = nullptr;
  const ir::Op *gm = definer(g), *um = definer(u);
  if (gm && um && gm->getKind() != OpKind::Split &&
      gm->getKind() != OpKind::Reshape && gm != um) {
    // Separate gate and up stacks (DBRX's w1 and v1), in the same
    // orientation, both with a bias or neither.
    if (!tokenMatmul(g, f.fc1Stack, f.fc1BiasStack))
      return false;
    bool gateMajor = f.fc1InputMajor;
    if (!tokenMatmul(u, f.fc1UpStack, f.fc1UpBiasStack) ||
        f.fc1InputMajor != gateMajor ||
        f.fc1Stack->type != f.fc1UpStack->type ||
        !f.fc1BiasStack != !f.fc1UpBiasStack)
      return false;
  } else if (splitsLast(split, {inter, inter}) && definer(u) == split &&
             g == split->getResult(0) && u == split->getResult(1)) {
    seen.insert(split);
    fc1Out = split->getOperand(0);
  } else {
    const ir::Op *gr = definer(g), *ur = definer(u);
    if (!gr || !ur || gr->getKind() != OpKind::Reshape ||
        ur->getKind() != OpKind::Reshape)
      return false;
    split = definer(gr->getOperand(0));
    if (!splitsLast(split, {1, 1}) || definer(ur->getOperand(0)) != split ||
        gr->getOperand(0) != split->getResult(0) ||
        ur->getOperand(0) != split->getResult(1))
      return false;
    const ir::Op *pairs = definer(split->getOperand(0));
    if (!pairs || pairs->getKind() != OpKind::Reshape)
      return false;
    const ir::TensorType &pt = pairs->getResult()->type;
    if (pt.rank() < 2 || lastDim(pairs->getResult()) != 2 ||
        pt.dims[pt.rank() - 2].getConstant() != std::optional<int64_t>(inter))
      return false;
    seen.insert({gr, ur, split, pairs});
    fc1Out = pairs->getOperand(0);
    f.interleaved = true;
  }
  if (fc1Out && !tokenMatmul(fc1Out, f.fc1Stack, f.fc1BiasStack))
    return false;
  // The stacks' shapes: fc1 [E, 2I, D] ([E, I, D] each when separate),
  // fc2 [E, D, I], input-major [E, D, 2I] / [E, I, D]; biases [E, 2I] ([E,
  // I]) / [E, D].
  auto dim = [](const ir::Value *v, size_t i) {
    return v->type.dims[i].getConstant().value_or(-1);
  };
  const int64_t fc1Rows = f.fc1UpStack ? inter : 2 * inter;
  const size_t o1 = f.fc1InputMajor ? 2 : 1, i1 = f.fc1InputMajor ? 1 : 2;
  const size_t o2 = f.fc2InputMajor ? 2 : 1, i2 = f.fc2InputMajor ? 1 : 2;
  int64_t hidden = dim(f.fc1Stack, i1);
  if (dim(f.fc1Stack, o1) != fc1Rows || dim(f.fc2Stack, o2) != hidden ||
      dim(f.fc2Stack, i2) != inter || lastDim(t) != hidden ||
      (f.fc1BiasStack && dim(f.fc1BiasStack, 1) != fc1Rows) ||
      (f.fc1UpBiasStack && dim(f.fc1UpBiasStack, 1) != fc1Rows) ||
      (f.fc2BiasStack && dim(f.fc2BiasStack, 1) != hidden))
    return false;
  for (const auto &o : body.getOps())
    if (o->getKind() != OpKind::Yield && !seen.count(o.get()))
      return false;
  return true;
}

void OnnxLowering::findFusedStacks() {
  if (target != OnnxTarget::Ort)
    return;
  std::vector<const ir::Op *> dispatches;
  std::function<void(const ir::Block &)> visit = [&](const ir::Block &blk) {
    for (const auto &op : blk.getOps()) {
      if (op->getKind() == OpKind::Experts)
        dispatches.push_back(op.get());
      for (const auto &r : op->getRegions())
        visit(*r);
    }
  };
  visit(module.graph.body);
  for (const ir::Op *op : dispatches) {
    FusedExperts f;
    if (!matchFusedExperts(*op, f) || !f.fc1Stack)
      continue;
    // The stacks and the params they reshape.
    for (const ir::Value *v :
         {f.fc1Stack, f.fc1UpStack, f.fc2Stack, f.fc1BiasStack,
          f.fc1UpBiasStack, f.fc2BiasStack})
      if (v) {
        fusedStacks.insert(v);
        fusedStacks.insert(stackParam(v)->getResult());
      }
  }
}

void OnnxLowering::perExpertFusedWeights(const ir::Op &op, FusedExperts &f) {
  int64_t count = op.attr<int64_t>("count");
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
  std::string suffix = partsSuffix(f.parts);
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
  if (f.quantized)
    quantizeFusedStacks(f, count);
}

void OnnxLowering::quantizeFusedStacks(FusedExperts &f, int64_t count) {
  // fc1 [P * E, 2 I / P, D] and fc2 [P * E, D, I / P], each row quantized
  // along its inputs: the rows of the float stacks, so the interleave and
  // the parts are the float path's.
  int64_t blocks = f.parts * count;
  // The checkpoint's codes: the layout of its (common) gate and down codes.
  auto first = [&](const ir::Op *param) {
    return f.codes
               ? ir::instantiatePattern(param->attr<std::string>("name"), -1, 0)
               : std::string();
  };
  f.fc1Q =
      weights.quantizeStack(f.fc1, quantLayout(2 * f.inter / f.parts, f.hidden,
                                               blocks, first(f.gateParam)));
  f.fc2Q =
      weights.quantizeStack(f.fc2, quantLayout(f.hidden, f.inter / f.parts,
                                               blocks, first(f.downParam)));
}

void OnnxLowering::stackedFusedWeights(FusedExperts &f) {
  // The checkpoint's stacks, expert by expert: fc1 [2I, D] with gate and up
  // rows alternating, fc2 [D, I], both cut in P parts along I (rows of
  // fc1, columns of fc2), the biases likewise; fc2's bias is added once,
  // with part 0 (docs/onnx.md).
  std::string suffix = ".moe" + partsSuffix(f.parts);
  // Gate and up: one stack whose halves alternate ([gate | up]) or whose
  // rows already do (gpt-oss), or two stacks whose rows alternate.
  bool halves = !f.interleaved && !f.fc1UpStack;
  auto blocks = [&](std::vector<const ir::Value *> stacks, bool transposed,
                    int axis, bool once) {
    WeightPlan::ExpertBlocks l;
    l.transposed = transposed;
    l.interleaveHalves = halves && stacks.size() == 1 && axis == 0 && !once;
    l.parts = f.parts;
    l.axis = axis;
    l.firstPartOnly = once;
    std::vector<WeightPlan::StackSource> sources;
    for (const ir::Value *v : stacks) {
      const ir::Op *p = stackParam(v);
      sources.push_back({p->attr<std::string>("name"), p->getResult()->type});
    }
    return weights.useExpertBlocks(sources[0].name + suffix, sources,
                                   stacks[0]->type, l);
  };
  auto fc1Pair = [&](const ir::Value *gate, const ir::Value *up) {
    std::vector<const ir::Value *> v = {gate};
    if (up)
      v.push_back(up);
    return v;
  };
  f.fc1 = blocks(fc1Pair(f.fc1Stack, f.fc1UpStack), f.fc1InputMajor, 0, false);
  f.fc2 = blocks({f.fc2Stack}, f.fc2InputMajor, 1, false);
  if (f.fc1BiasStack)
    f.fc1Bias =
        blocks(fc1Pair(f.fc1BiasStack, f.fc1UpBiasStack), false, 0, false);
  if (f.fc2BiasStack)
    f.fc2Bias = blocks({f.fc2BiasStack}, false, 0, true);
  if (f.quantized)
    quantizeFusedStacks(f, f.fc2Stack->type.dims[0].getConstant().value_or(0));
}

bool OnnxLowering::dispatchFused(const ir::Op &op, const std::string &x,
                                 std::string &out, FusedExperts &f) {
  contribOps = true;
  int64_t count = op.attr<int64_t>("count");
  int64_t k = op.getOperand(1)->type.dims.back().getConstant().value_or(0);
  if (f.fc1Stack)
    stackedFusedWeights(f);
  else
    perExpertFusedWeights(op, f);

  // The MoE op routes by itself (softmax over its experts' logits, top k),
  // so it is handed the route's own choice: the logarithm of each expert's
  // weight (the sum of the weights of its picks; log 0 = -inf where it
  // has none), repeated for the P parts; it then weights each of the P * k
  // blocks w / (P * sum w), which the output's scale by P * sum w undoes.
  // An expert picked twice is one finite logit: the kernel's k-th choice
  // is then an expert of weight 0.
  // [N, E] zeros, N the token count.
  std::string gridShape = tokenRowsShape(op, x, count);
  std::string grid = b.node("ConstantOfShape", {gridShape});
  // The routing in float32 (a float16 model's QMoE reads its logits in
  // float16; log w and -inf are exact there to its rounding).
  std::string wAct = b.node("Reshape", {in(op.getOperand(1)), b.i64({-1, k})});
  std::string w = widen(wAct);
  // scale_input (k = 1): the tokens scaled by their weight, the expert
  // weighted 1.
  std::string opWeights = w, tokens = x;
  if (f.scaleInput) {
    tokens = b.node("Mul", {x, wAct});
    opWeights = b.node("Expand", {b.f32Scalar(1.0f), b.node("Shape", {w})});
  }
  std::string chosen = b.node(
      "Log",
      {b.node(
          "ScatterElements",
          {grid, b.node("Reshape", {in(op.getOperand(2)), b.i64({-1, k})}),
           opWeights},
          {OnnxAttr::integer("axis", 1), OnnxAttr::str("reduction", "add")})});
  if (f.parts > 1)
    chosen = b.node("Tile", {chosen, b.i64({1, f.parts})});
  chosen = narrow(chosen);
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
      OnnxAttr::real("activation_alpha", f.alpha),
      OnnxAttr::real("activation_beta", f.beta)};
  if (f.limit)
    attrs.push_back(OnnxAttr::real("swiglu_limit", *f.limit));
  std::string y;
  if (f.quantized) {
    attrs.push_back(OnnxAttr::integer("expert_weight_bits", f.qbits));
    attrs.push_back(OnnxAttr::integer("block_size", f.qblock));
    std::vector<std::string> ins = {tokens,        chosen,    f.fc1Q.codes,
                                    f.fc1Q.scales, f.fc1Bias, f.fc2Q.codes,
                                    f.fc2Q.scales, f.fc2Bias};
    if (!f.qsym)
      ins.insert(ins.end(), {"", "", "", f.fc1Q.zeroPoints, f.fc2Q.zeroPoints});
    y = b.nodeInDomain(kContribDomain, "QMoE", ins, attrs);
  } else {
    y = b.nodeInDomain(kContribDomain, "MoE",
                       {tokens, chosen, f.fc1, f.fc1Bias, f.fc2, f.fc2Bias},
                       attrs);
  }
  addGraphOutput(thenBranch, y, act);
  b.restore(std::move(outer));
  outer = b.retarget(elseBranch, elseBranch.name() + "_");
  addGraphOutput(elseBranch, b.node("Identity", {tokens}), act);
  b.restore(std::move(outer));
  restoreCaches(std::move(saved));
  y = b.nodeN("If", {nonEmpty},
              {OnnxAttr::graph("then_branch", std::move(thenBranch)),
               OnnxAttr::graph("else_branch", std::move(elseBranch))},
              1, "moe")[0];
  y = widen(y);
  if (f.scaleInput && f.parts == 1) {
    out = y;
    return true;
  }
  std::string total = f.scaleInput ? b.f32Scalar(static_cast<float>(f.parts))
                                   : b.node("ReduceSum", {w, b.i64({1})},
                                            {OnnxAttr::integer("keepdims", 1)});
  if (f.parts > 1 && !f.scaleInput)
    total = b.node("Mul", {total, b.f32Scalar(static_cast<float>(f.parts))});
  out = b.node("Mul", {y, total});
  return true;
}

} // namespace archc
