//===- Recurrent.cpp - Rules for causal_conv1d, delta_rule, compress -----===//
//
// This file implements verification and type inference for the ops of
// linear-attention layers, which own a decode-time state of constant size:
//   causal_conv1d(x [b, s, C], weight [C, 1, K])      -> [b, s, C]
//       state [b, C, K - 1]: the last K - 1 inputs
//   delta_rule(q, k [b, s, Hk, dk], v [b, s, Hv, dv],
//              g, beta [b, s, Hv])                     -> [b, s, Hv, dv]
//       state [b, Hv, dk, dv] in float32
//   compress(kv, gate [b, s, C], ape [ratio, C])     -> entries [b, s, d],
//                                                      valid bool [b, keys]
//       d = C (C / 2 with overlap); state [b, W - 1, 2 C] in float32, the
//       kv | gate inputs of the last W - 1 tokens (W = ratio, 2 ratio with
//       overlap); `valid` flags the key positions (past and new, the length
//       of the padding mask) whose token closes a window
// The kv-cache pass adds the past state (operand `past`) and the present
// state (result `present`); the mask passes add the padding mask (operand
// `mask`).
//
//===----------------------------------------------------------------------===//
#include "ir/OpRules.h"
#include "ir/OpSchema.h"

#include <fmt/format.h>

namespace archc::ir {

namespace {
/// With a past state (after kv-cache), it must have the state's type.
bool checkPastState(const Op &op, const TensorType &state,
                    DiagnosticEngine &d) {
  const Value *past = op.operand("past");
  if (!past || past->type == state)
    return true;
  reportOpError(d, op,
                fmt::format("past state {} does not match the state {}",
                            past->type.str(), state.str()));
  return false;
}

int64_t convKernel(const TensorType &w) {
  return w.dims.back().getConstant().value_or(0);
}
} // namespace

namespace {
/// State types (the schemas' stateType rules).
bool convStateType(const Op &op, TensorType &out) {
  const TensorType &x = op.getOperand(0)->type;
  out = TensorType(x.dtype, {x.dims[0], x.dims[2],
                             SymExpr(convKernel(op.getOperand(1)->type) - 1)});
  return true;
}
bool compressStateType(const Op &op, TensorType &out) {
  const TensorType &kv = op.getOperand(0)->type;
  int64_t ratio = op.attr<int64_t>("ratio");
  int64_t window = op.attr<bool>("overlap") ? 2 * ratio : ratio;
  out = TensorType(DType::F32,
                   {kv.dims[0], SymExpr(window - 1), kv.dims[2] * SymExpr(2)});
  return true;
}
bool deltaRuleStateType(const Op &op, TensorType &out) {
  const TensorType &k = op.getOperand(1)->type;
  const TensorType &v = op.getOperand(2)->type;
  out = TensorType(DType::F32, {v.dims[0], v.dims[2], k.dims[3], v.dims[3]});
  return true;
}
} // namespace

namespace {
bool inferCompress(Op &op, DiagnosticEngine &d) {
  const TensorType &kv = op.getOperand(0)->type;
  const TensorType &gate = op.getOperand(1)->type;
  const TensorType &ape = op.getOperand(2)->type;
  int64_t ratio = op.attr<int64_t>("ratio");
  bool overlap = op.attr<bool>("overlap");
  if (kv.rank() != 3 || kv != gate || !isFloat(kv.dtype)) {
    reportOpError(d, op,
                  fmt::format("expects kv and gate as float [batch, "
                              "seq, channels] of one type, got {} "
                              "and {}",
                              kv.str(), gate.str()));
    return false;
  }
  auto channels = kv.dims[2].getConstant();
  if (!channels || (overlap && *channels % 2 != 0)) {
    reportOpError(d, op,
                  fmt::format("channels {} must be a constant{}",
                              kv.dims[2].str(),
                              overlap ? ", even with overlap (two "
                                        "halves)"
                                      : ""));
    return false;
  }
  if (ape.rank() != 2 || !isFloat(ape.dtype) || ape.dims[0] != SymExpr(ratio) ||
      ape.dims[1] != kv.dims[2]) {
    reportOpError(d, op,
                  fmt::format("ape {} must be [ratio, channels] = "
                              "[{}, {}]",
                              ape.str(), ratio, kv.dims[2].str()));
    return false;
  }
  TensorType state;
  recurrentStateType(op, state);
  if (!checkPastState(op, state, d))
    return false;
  SymExpr keys = kv.dims[1];
  if (const Value *mask = op.operand("mask")) {
    const TensorType &m = mask->type;
    if (m.rank() != 2 || m.dims[0] != kv.dims[0]) {
      reportOpError(d, op,
                    fmt::format("mask {} must be [batch, keys]", m.str()));
      return false;
    }
    keys = m.dims[1];
  }
  int64_t out = overlap ? *channels / 2 : *channels;
  op.getResult(0)->type = TensorType(kv.dtype, {kv.dims[0], kv.dims[1], out});
  op.getResult(1)->type = TensorType(DType::Bool, {kv.dims[0], keys});
  if (Value *present = op.result("present"))
    present->type = state;
  return true;
}
bool inferStateOp(Op &op, DiagnosticEngine &d) {
  if (op.getKind() == OpKind::CausalConv) {
    const TensorType &x = op.getOperand(0)->type;
    const TensorType &w = op.getOperand(1)->type;
    if (x.rank() != 3) {
      reportOpError(d, op,
                    fmt::format("expects x as [batch, seq, channels], "
                                "got {}",
                                x.str()));
      return false;
    }
    bool shapeOk = (w.rank() == 3 && w.dims[1] == SymExpr(1)) || w.rank() == 2;
    if (!shapeOk || w.dims[0] != x.dims[2] || convKernel(w) < 1) {
      reportOpError(d, op,
                    fmt::format("weight {} must be [channels, 1, "
                                "kernel] with channels = {}",
                                w.str(), x.dims[2].str()));
      return false;
    }
  } else {
    const TensorType &q = op.getOperand(0)->type;
    const TensorType &k = op.getOperand(1)->type;
    const TensorType &v = op.getOperand(2)->type;
    const TensorType &g = op.getOperand(3)->type;
    const TensorType &beta = op.getOperand(4)->type;
    if (q.rank() != 4 || k.rank() != 4 || v.rank() != 4 || q != k) {
      reportOpError(d, op,
                    fmt::format("expects q, k [batch, seq, key_heads, "
                                "dk] of one type and v [batch, seq, "
                                "value_heads, dv], got {}, {}, {}",
                                q.str(), k.str(), v.str()));
      return false;
    }
    auto hk = k.dims[2].getConstant(), hv = v.dims[2].getConstant();
    if (v.dims[0] != k.dims[0] || v.dims[1] != k.dims[1] || !hk || !hv ||
        *hk <= 0 || *hv % *hk != 0) {
      reportOpError(d, op,
                    fmt::format("v {} must share batch and seq with k "
                                "{}, with value heads a multiple of "
                                "key heads",
                                v.str(), k.str()));
      return false;
    }
    std::vector<SymExpr> gate = {v.dims[0], v.dims[1], v.dims[2]};
    if (g.dims != gate || beta.dims != gate) {
      reportOpError(d, op,
                    fmt::format("g {} and beta {} must be [batch, "
                                "seq, value_heads] = [{}, {}, {}]",
                                g.str(), beta.str(), v.dims[0].str(),
                                v.dims[1].str(), v.dims[2].str()));
      return false;
    }
  }
  TensorType state;
  recurrentStateType(op, state);
  if (!checkPastState(op, state, d))
    return false;
  const TensorType &x =
      op.getOperand(op.getKind() == OpKind::CausalConv ? 0 : 2)->type;
  if (const Value *mask = op.operand("mask")) {
    const TensorType &m = mask->type;
    if (m.rank() != 2 || m.dims[0] != x.dims[0]) {
      reportOpError(d, op,
                    fmt::format("mask {} must be [batch, keys]", m.str()));
      return false;
    }
  }
  op.getResult(0)->type = x;
  if (Value *present = op.result("present"))
    present->type = state;
  return true;
}

/// Linear-attention state ops: work per token is constant; the state is
/// read and written once per call (a fused kernel keeps it on chip).
OpCost stateOpCost(const Op &op, const CostContext &ctx) {
  OpCost c;
  const OpSchema &s = opSchema(op.getKind());
  for (const OperandSpec &o : s.operands)
    if (o.origin != Origin::Pass)
      ctx.read(op.operand(o.name), c);
  ctx.write(op.getResult(0), c);
  if (const Value *mask = op.operand("mask"))
    ctx.read(mask, c);
  TensorType state;
  recurrentStateType(op, state);
  double stateElems = ctx.elements(state);
  if (op.getKind() == OpKind::CausalConv) {
    const TensorType &x = op.getOperand(0)->type;
    double kernel = ctx.dim(op.getOperand(1)->type.dims.back());
    c.macs = ctx.elements(x) * kernel;
    c.matmulFlops = c.flops = 2 * c.macs;
    c.kvReadBytes = stateElems * ctx.kvBits() / 8;
    c.kvWriteBytes = stateElems * ctx.kvBits() / 8;
    return c;
  }
  const TensorType &k = op.getOperand(1)->type;
  const TensorType &v = op.getOperand(2)->type;
  double b = ctx.dim(v.dims[0]), sq = ctx.dim(v.dims[1]),
         hv = ctx.dim(v.dims[2]);
  double dk = ctx.dim(k.dims[3]), dv = ctx.dim(v.dims[3]);
  // Per token and value head: S^T k, k d^T and S^T q (3 dk dv MACs), the
  // decay of S (dk dv), the delta (2 dv), one exp.
  c.macs = 3 * b * sq * hv * dk * dv;
  c.matmulFlops = 2 * c.macs;
  c.flops = c.matmulFlops + b * sq * hv * (dk * dv + 2 * dv);
  c.transcendentals = b * sq * hv;
  c.kvReadBytes = stateElems * 32 / 8; // float32 state
  c.kvWriteBytes = stateElems * 32 / 8;
  return c;
}

/// op.compress: one entry per window of `ratio` tokens (amortised over the
/// tokens of the call): per slot and output channel of the window (W =
/// ratio, 2 ratio with overlap) the gate + ape add, the softmax and the
/// weighted sum; every token's kv and gate inputs are read once, the
/// float32 state read and written once per call.
OpCost compressCost(const Op &op, const CostContext &ctx) {
  OpCost c;
  const TensorType &kv = op.getOperand(0)->type;
  double ratio = static_cast<double>(op.attr<int64_t>("ratio"));
  bool overlap = op.attr<bool>("overlap");
  double window = overlap ? 2 * ratio : ratio;
  double out = ctx.dim(kv.dims[2]) / (overlap ? 2 : 1);
  double entries = ctx.dim(kv.dims[0]) * ctx.dim(kv.dims[1]) / ratio;
  double slots = entries * window * out;
  c.flops = slots * (1 + 5 + 2);
  c.transcendentals = slots;
  for (const char *name : {"kv", "gate", "ape"})
    ctx.read(op.operand(name), c);
  if (const Value *mask = op.operand("mask"))
    ctx.read(mask, c);
  c.activationBytes += entries * out * ctx.activationBits() / 8;
  ctx.write(op.getResult(1), c);
  TensorType state;
  recurrentStateType(op, state);
  c.kvReadBytes = ctx.elements(state) * 32 / 8;
  c.kvWriteBytes = ctx.elements(state) * 32 / 8;
  return c;
}

/// Entries and their flags hold one position in `ratio`; the present state
/// is dense.
double compressDensity(const Op &op, unsigned r, const std::vector<double> &) {
  return r < 2 ? 1.0 / static_cast<double>(
                           std::max<int64_t>(op.attr<int64_t>("ratio"), 1))
               : 1.0;
}

SchemaBuilder &withState(SchemaBuilder &b, const char *defaultName) {
  return b
      .attr("state", AttrType::Identifier, std::string(defaultName),
            "state name: graph I/O past_key_values.{i}.<state>")
      .passOperand("past", "the past state (kv-cache pass)")
      .passOperand("mask", "int64 [batch, keys] padding mask: padded tokens "
                           "leave the state unchanged")
      .perLayerState();
}
} // namespace

void addRecurrentSchemas(SchemaList &out) {
  SchemaBuilder conv(OpKind::CausalConv,
                     "depthwise causal convolution over the sequence");
  conv.describe("Each channel convolved with its own kernel over the current "
                "and the kernel - 1 previous tokens; state: the last kernel - "
                "1 inputs [batch, channels, kernel - 1].")
      .language()
      .operand("x", "[batch, seq, channels]")
      .operand("weight", "[channels, 1, kernel] (or [channels, kernel])");
  withState(conv, "conv_state")
      .result("result", "[batch, seq, channels]")
      .passResult("present", "the state after this call")
      .infer(inferStateOp)
      .cost(stateOpCost)
      .costHandlesDensity()
      .denseResults()
      .constantState(convStateType, /*float32=*/false);
  out.push_back(conv.take());

  SchemaBuilder delta(OpKind::DeltaRule, "gated delta-rule recurrence");
  delta
      .describe("Gated DeltaNet: per value head, S = exp(g) S + beta k (v - "
                "S^T k)^T, o = S^T q; state [batch, value_heads, dk, dv] in "
                "float32.")
      .language()
      .operand("q", "[batch, seq, key_heads, dk]")
      .operand("k", "[batch, seq, key_heads, dk]")
      .operand("v", "[batch, seq, value_heads, dv]")
      .operand("g", "[batch, seq, value_heads]: log decay")
      .operand("beta", "[batch, seq, value_heads]: write strength");
  withState(delta, "recurrent_state")
      .result("result", "[batch, seq, value_heads, dv]")
      .passResult("present", "the state after this call")
      .infer(inferStateOp)
      .cost(stateOpCost)
      .costHandlesDensity()
      .denseResults()
      .constantState(deltaRuleStateType, /*float32=*/true);
  out.push_back(delta.take());

  SchemaBuilder comp(OpKind::Compress,
                     "softmax-gated pooling of every `ratio` tokens into one "
                     "entry: (entries, valid)");
  comp.describe("DeepSeek-V4's compressor: entries [batch, seq, d] (d = "
                "channels, channels / 2 with overlap) hold one pooled entry "
                "at each token that closes a window; `valid` flags the key "
                "positions (past and new, the length of the padding mask) "
                "whose token closes a window. State [batch, W - 1, 2 "
                "channels] in float32: the kv | gate inputs of the last W - 1 "
                "tokens (W = ratio, 2 ratio with overlap).")
      .language()
      .operand("kv", "[batch, seq, channels]")
      .operand("gate", "[batch, seq, channels]")
      .operand("ape", "[ratio, channels]: position bias within the window")
      .attr("ratio", AttrType::Int, "tokens per entry")
      .atLeast(2)
      .attr("overlap", AttrType::Bool, false,
            "windows of 2 ratio tokens, two halves of the channels");
  withState(comp, "compress_state")
      .result("entries", "[batch, seq, d]")
      .result("valid", "bool [batch, keys]")
      .passResult("present", "the state after this call")
      .infer(inferCompress)
      .cost(compressCost)
      .costHandlesDensity()
      .density(compressDensity)
      .constantState(compressStateType, /*float32=*/true);
  out.push_back(comp.take());
}

} // namespace archc::ir
