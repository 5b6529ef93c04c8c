//===- StateSpace.cpp - Rules for selective_scan and ssd_scan -------------===//
//
// This file defines the state-space ops of Mamba-1 and Mamba-2 layers, each
// owning a constant-size float32 decode state:
//   selective_scan(x, dt [b, s, C], A [C, N], B, C [b, s, N]) -> [b, s, C]
//       per token h <- exp(dt A) h + (dt x) B^T, y = h C (Mamba-1: a
//       diagonal A per channel and state element); state [b, C, N]
//   ssd_scan(x [b, s, H, P], dt [b, s, H], A [H], B, C [b, s, G, N])
//       -> [b, s, H, P]
//       per token and head h <- exp(dt A) h + dt x B^T, y = h C (Mamba-2: a
//       scalar A per head; head h reads group h / (H / G) of B and C);
//       state [b, H, P, N]
// dt is the step after the softplus (and any clamp); the D skip, the gate
// and the norms are ordinary .arch code around the ops. The kv-cache pass
// adds the past state (operand `past`) and the present state (result
// `present`); the mask passes add the padding mask (operand `mask`):
// padded tokens leave the state unchanged.
//
//===----------------------------------------------------------------------===//
#include "ir/OpRules.h"
#include "ir/OpSchema.h"

#include <fmt/format.h>

namespace archc::ir {

namespace {
bool selectiveScanState(const Op &op, TensorType &out) {
  const TensorType &x = op.getOperand(0)->type;
  const TensorType &a = op.getOperand(2)->type;
  out = TensorType(DType::F32, {x.dims[0], x.dims[2], a.dims[1]});
  return true;
}

bool ssdScanState(const Op &op, TensorType &out) {
  const TensorType &x = op.getOperand(0)->type;
  const TensorType &b = op.getOperand(3)->type;
  out = TensorType(DType::F32, {x.dims[0], x.dims[2], x.dims[3], b.dims[3]});
  return true;
}

/// The checks the two scans share once the op's own shapes are verified:
/// past state, padding mask, results.
bool finishScan(Op &op, const TensorType &x, DiagnosticEngine &d) {
  TensorType state;
  recurrentStateType(op, state);
  if (const Value *past = op.operand("past"); past && past->type != state) {
    reportOpError(d, op,
                  fmt::format("past state {} does not match the state {}",
                              past->type.str(), state.str()));
    return false;
  }
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

bool allFloat(std::initializer_list<const TensorType *> ts) {
  for (const TensorType *t : ts)
    if (!isFloat(t->dtype))
      return false;
  return true;
}

bool inferSelectiveScan(Op &op, DiagnosticEngine &d) {
  const TensorType &x = op.getOperand(0)->type;
  const TensorType &dt = op.getOperand(1)->type;
  const TensorType &a = op.getOperand(2)->type;
  const TensorType &b = op.getOperand(3)->type;
  const TensorType &c = op.getOperand(4)->type;
  if (x.rank() != 3 || x.dims != dt.dims || !allFloat({&x, &dt, &a, &b, &c})) {
    reportOpError(d, op,
                  fmt::format("expects x and dt as float [batch, seq, "
                              "channels] of one shape, got {} and {}",
                              x.str(), dt.str()));
    return false;
  }
  if (a.rank() != 2 || a.dims[0] != x.dims[2] ||
      !a.dims[1].getConstant().value_or(0)) {
    reportOpError(d, op,
                  fmt::format("A {} must be [channels, state] with channels "
                              "= {} and a constant state size",
                              a.str(), x.dims[2].str()));
    return false;
  }
  std::vector<SymExpr> bc = {x.dims[0], x.dims[1], a.dims[1]};
  if (b.dims != bc || c.dims != bc) {
    reportOpError(d, op,
                  fmt::format("B {} and C {} must be [batch, seq, state] = "
                              "[{}, {}, {}]",
                              b.str(), c.str(), x.dims[0].str(),
                              x.dims[1].str(), a.dims[1].str()));
    return false;
  }
  return finishScan(op, x, d);
}

bool inferSsdScan(Op &op, DiagnosticEngine &d) {
  const TensorType &x = op.getOperand(0)->type;
  const TensorType &dt = op.getOperand(1)->type;
  const TensorType &a = op.getOperand(2)->type;
  const TensorType &b = op.getOperand(3)->type;
  const TensorType &c = op.getOperand(4)->type;
  if (x.rank() != 4 || !allFloat({&x, &dt, &a, &b, &c})) {
    reportOpError(d, op,
                  fmt::format("expects x as float [batch, seq, heads, "
                              "head_dim], got {}",
                              x.str()));
    return false;
  }
  std::vector<SymExpr> perHead = {x.dims[0], x.dims[1], x.dims[2]};
  if (dt.dims != perHead) {
    reportOpError(d, op,
                  fmt::format("dt {} must be [batch, seq, heads] = [{}, {}, "
                              "{}]",
                              dt.str(), x.dims[0].str(), x.dims[1].str(),
                              x.dims[2].str()));
    return false;
  }
  if (a.rank() != 1 || a.dims[0] != x.dims[2]) {
    reportOpError(d, op,
                  fmt::format("A {} must be [heads] = [{}] (one scalar per "
                              "head)",
                              a.str(), x.dims[2].str()));
    return false;
  }
  auto heads = x.dims[2].getConstant();
  auto groups = b.rank() == 4 ? b.dims[2].getConstant() : std::nullopt;
  auto state = b.rank() == 4 ? b.dims[3].getConstant() : std::nullopt;
  if (b.rank() != 4 || b != c || b.dims[0] != x.dims[0] ||
      b.dims[1] != x.dims[1] || !heads || !groups || !state || *groups < 1 ||
      *state < 1 || *heads % *groups != 0) {
    reportOpError(d, op,
                  fmt::format("B {} and C {} must be one [batch, seq, "
                              "groups, state] type with constant groups "
                              "dividing the {} heads",
                              b.str(), c.str(), x.dims[2].str()));
    return false;
  }
  return finishScan(op, x, d);
}

/// Mamba-1: per token and (channel, state element) the decay exp(dt A)
/// (one multiply, one exp), the update (dt x) B (one MAC) and the readout
/// h C (one MAC); dt x once per channel. The float32 state is read and
/// written once per call (a fused kernel keeps it on chip).
OpCost selectiveScanCost(const Op &op, const CostContext &ctx) {
  OpCost c;
  for (const char *name : {"x", "dt", "A", "B", "C"})
    ctx.read(op.operand(name), c);
  if (const Value *mask = op.operand("mask"))
    ctx.read(mask, c);
  ctx.write(op.getResult(0), c);
  const TensorType &x = op.getOperand(0)->type;
  double tokens = ctx.dim(x.dims[0]) * ctx.dim(x.dims[1]);
  double channels = ctx.dim(x.dims[2]);
  double n = ctx.dim(op.getOperand(2)->type.dims[1]);
  double elems = tokens * channels * n;
  c.macs = 2 * elems;
  c.matmulFlops = 2 * c.macs;
  c.flops = c.matmulFlops + 3 * elems + tokens * channels;
  c.transcendentals = elems;
  TensorType state;
  recurrentStateType(op, state);
  c.kvReadBytes = ctx.elements(state) * 32 / 8;
  c.kvWriteBytes = c.kvReadBytes;
  return c;
}

/// Mamba-2, as a chunked SSD kernel computes it with chunks of q = min(seq,
/// chunk) tokens: per chunk and group C B^T over the causal half (q (q + 1)
/// / 2 N MACs), per head the masked scores times x (q (q + 1) / 2 P), the
/// chunk's state contribution x^T (decay B) (q P N) and the readout of the
/// carried state C h (q P N), plus the decays (exp of the per-head cumulative
/// sums, q^2 / 2 per head) and the state update (P N per head and chunk).
/// Linear in the tokens for a fixed chunk; a decode step (q = 1) is one
/// state update and readout.
OpCost ssdScanCost(const Op &op, const CostContext &ctx) {
  OpCost c;
  for (const char *name : {"x", "dt", "A", "B", "C"})
    ctx.read(op.operand(name), c);
  if (const Value *mask = op.operand("mask"))
    ctx.read(mask, c);
  ctx.write(op.getResult(0), c);
  const TensorType &x = op.getOperand(0)->type;
  const TensorType &b = op.getOperand(3)->type;
  double batch = ctx.dim(x.dims[0]), seq = ctx.dim(x.dims[1]);
  double heads = ctx.dim(x.dims[2]), p = ctx.dim(x.dims[3]);
  double groups = ctx.dim(b.dims[2]), n = ctx.dim(b.dims[3]);
  double q = std::min(seq, static_cast<double>(op.attr<int64_t>("chunk")));
  double tokens = batch * seq;
  double chunks = q > 0 ? tokens / q : 0;
  double tri = q * (q + 1) / 2;
  c.macs = chunks * (groups * tri * n + heads * (tri * p + 2 * q * p * n));
  c.matmulFlops = 2 * c.macs;
  c.flops = c.matmulFlops + chunks * heads * (tri * 2 + 2 * p * n) +
            tokens * heads * p * 2;
  c.transcendentals = chunks * heads * (tri + 2 * q);
  TensorType state;
  recurrentStateType(op, state);
  c.kvReadBytes = ctx.elements(state) * 32 / 8;
  c.kvWriteBytes = c.kvReadBytes;
  return c;
}

SchemaBuilder &withScanState(SchemaBuilder &b) {
  return b
      .attr("state", AttrType::Identifier, std::string("ssm_state"),
            "state name: graph I/O past_key_values.{i}.<state>")
      .passOperand("past", "the past state (kv-cache pass)")
      .passOperand("mask", "int64 [batch, keys] padding mask: padded tokens "
                           "leave the state unchanged")
      .perLayerState();
}
} // namespace

void addStateSpaceSchemas(SchemaList &out) {
  SchemaBuilder sel(OpKind::SelectiveScan,
                    "Mamba-1 selective scan (diagonal A per channel)");
  sel.describe("Per token, channel c and state element n: h[c, n] = exp(dt[c] "
               "A[c, n]) h[c, n] + dt[c] x[c] B[n]; y[c] = sum_n h[c, n] "
               "C[n]. dt is the step after the softplus; A = -exp(A_log). "
               "State [batch, channels, state] in float32.")
      .language()
      .operand("x", "[batch, seq, channels]")
      .operand("dt", "[batch, seq, channels]: step sizes (after softplus)")
      .operand("A", "[channels, state]: the (negative) diagonal")
      .operand("B", "[batch, seq, state]: input projection per token")
      .operand("C", "[batch, seq, state]: output projection per token");
  withScanState(sel)
      .result("result", "[batch, seq, channels]")
      .passResult("present", "the state after this call")
      .infer(inferSelectiveScan)
      .cost(selectiveScanCost)
      .costHandlesDensity()
      .denseResults()
      .constantState(selectiveScanState, /*float32=*/true);
  out.push_back(sel.take());

  SchemaBuilder ssd(OpKind::SsdScan,
                    "Mamba-2 state-space duality scan (scalar A per head)");
  ssd.describe("Per token and head h: S = exp(dt[h] A[h]) S + dt[h] x[h] "
               "B[g]^T, y[h] = S C[g], with g = h / (heads / groups) and S "
               "[head_dim, state]. dt is the step after the softplus (and "
               "clamp); A = -exp(A_log). Lowered as the chunked SSD form "
               "(exact; linear in the prompt, one state update per decode "
               "step). State [batch, heads, head_dim, state] in float32.")
      .language()
      .operand("x", "[batch, seq, heads, head_dim]")
      .operand("dt", "[batch, seq, heads]: step sizes (after softplus)")
      .operand("A", "[heads]: the (negative) scalar per head")
      .operand("B", "[batch, seq, groups, state]")
      .operand("C", "[batch, seq, groups, state]")
      .attr("chunk", AttrType::Int, int64_t{256},
            "tokens per chunk of the chunked form (config chunk_size)")
      .atLeast(1);
  withScanState(ssd)
      .result("result", "[batch, seq, heads, head_dim]")
      .passResult("present", "the state after this call")
      .infer(inferSsdScan)
      .cost(ssdScanCost)
      .costHandlesDensity()
      .denseResults()
      .constantState(ssdScanState, /*float32=*/true);
  out.push_back(ssd.take());
}

} // namespace archc::ir
