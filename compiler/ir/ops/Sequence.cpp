//===- Sequence.cpp - Ops of encoders, encoder-decoders and speech --------===//
//
// This file defines the ops that encoder and encoder-decoder families need
// beyond the decoder families:
//   positions  the index of every new token in its sequence, counted past
//              the tokens a decode cache already holds (learned, sinusoidal
//              and offset positions of BART, Marian and Whisper decoders)
//   cumsum     running sum along an axis (RoBERTa's positions from the
//              non-padding tokens)
//   conv1d     1-D convolution with zero padding and a stride (Whisper's
//              convolutional front end)
//   sinusoidal fixed sinusoidal position embeddings [sin | cos] of a table
//              built at init and not stored (Marian)
//   relative_gather
//              scores against a table of relative positions, read at each
//              (query, key) pair's relative position (DeBERTa's
//              disentangled attention)
//
//===----------------------------------------------------------------------===//
#include "ir/OpRules.h"
#include "ir/OpSchema.h"

#include <fmt/format.h>

namespace archc::ir {

namespace {
bool isIntegerType(DType t) {
  return t == DType::I64 || t == DType::I32 || t == DType::I8 || t == DType::U8;
}

bool inferPositions(Op &op, DiagnosticEngine &d) {
  const TensorType &x = op.getOperand(0)->type;
  if (x.rank() < 2) {
    reportOpError(d, op,
                  fmt::format("expects x as [batch, seq, ...] (the new "
                              "tokens), got {}",
                              x.str()));
    return false;
  }
  op.getResult()->type = TensorType(DType::I64, {x.dims[0], x.dims[1]});
  return true;
}

bool inferCumsum(Op &op, DiagnosticEngine &d) {
  const TensorType &x = op.getOperand(0)->type;
  size_t axis = 0;
  if (!normalizeAxis(op.attr<int64_t>("axis"), x.rank(), axis)) {
    reportOpError(d, op,
                  fmt::format("axis {} is out of range for {}",
                              op.attr<int64_t>("axis"), x.str()));
    return false;
  }
  if (!isIntegerType(x.dtype) && !isFloat(x.dtype)) {
    reportOpError(d, op,
                  fmt::format("expects a numeric tensor, got {}", x.str()));
    return false;
  }
  op.getResult()->type = x;
  return true;
}

bool inferConv1d(Op &op, DiagnosticEngine &d) {
  const TensorType &x = op.getOperand(0)->type;
  const TensorType &w = op.getOperand(1)->type;
  int64_t stride = op.attr<int64_t>("stride");
  int64_t pad = op.attr<int64_t>("padding");
  if (x.rank() != 3 || w.rank() != 3) {
    reportOpError(d, op,
                  fmt::format("expects x [batch, channels, length] and "
                              "weight [out, channels, kernel], got {} and {}",
                              x.str(), w.str()));
    return false;
  }
  if (!isFloat(x.dtype) || x.dtype != w.dtype) {
    reportOpError(d, op,
                  fmt::format("x {} and weight {} must be floating-point "
                              "tensors of one element type",
                              x.str(), w.str()));
    return false;
  }
  const int64_t *groupsAttr = op.optAttr<int64_t>("groups");
  int64_t groups = groupsAttr ? *groupsAttr : 1;
  if (x.dims[1] != w.dims[1] * SymExpr(groups)) {
    reportOpError(d, op,
                  fmt::format("x {} has {} channels, the weight {} expects {} "
                              "({} per group, {} groups)",
                              x.str(), x.dims[1].str(), w.str(),
                              (w.dims[1] * SymExpr(groups)).str(),
                              w.dims[1].str(), groups));
    return false;
  }
  if (auto out = w.dims[0].getConstant(); !out || *out % groups != 0) {
    reportOpError(d, op,
                  fmt::format("the weight {} must have a known number of "
                              "outputs divisible by the {} groups",
                              w.str(), groups));
    return false;
  }
  auto k = w.dims[2].getConstant();
  if (!k) {
    reportOpError(d, op,
                  fmt::format("the kernel size of {} must be known", w.str()));
    return false;
  }
  // (L + 2 pad - k) / stride + 1: polynomial for stride 1, else the
  // length must be known.
  SymExpr span = x.dims[2] + SymExpr(2 * pad - *k);
  SymExpr length;
  if (stride == 1) {
    length = span + SymExpr(1);
  } else if (auto c = span.getConstant()) {
    length = SymExpr(*c < 0 ? 0 : *c / stride + 1);
  } else {
    reportOpError(d, op,
                  fmt::format("a stride of {} needs a known input length, "
                              "got {}",
                              stride, x.str()));
    return false;
  }
  if (auto c = length.getConstant(); c && *c < 1) {
    reportOpError(d, op,
                  fmt::format("input {} is shorter than the kernel {} with "
                              "padding {}",
                              x.str(), w.str(), pad));
    return false;
  }
  if (const Value *bias = op.operand("bias")) {
    if (bias->type.rank() != 1 || bias->type.dims[0] != w.dims[0] ||
        bias->type.dtype != x.dtype) {
      reportOpError(d, op,
                    fmt::format("bias {} must be [{}] of the weight's type",
                                bias->type.str(), w.dims[0].str()));
      return false;
    }
  }
  op.getResult()->type = TensorType(x.dtype, {x.dims[0], w.dims[0], length});
  return true;
}

bool inferSinusoidal(Op &op, DiagnosticEngine &d) {
  const TensorType &p = op.getOperand(0)->type;
  if (p.dtype != DType::I64 && p.dtype != DType::I32) {
    reportOpError(d, op,
                  fmt::format("positions must be integers, got {}", p.str()));
    return false;
  }
  std::vector<SymExpr> dims = p.dims;
  dims.push_back(SymExpr(op.attr<int64_t>("dim")));
  op.getResult()->type = TensorType(DType::F32, dims);
  return true;
}

bool inferRelativeGather(Op &op, DiagnosticEngine &d) {
  const TensorType &x = op.getOperand(0)->type;
  int64_t span = op.attr<int64_t>("span");
  if (x.rank() < 2 || !isFloat(x.dtype) || x.dims.back() != SymExpr(2 * span)) {
    reportOpError(d, op,
                  fmt::format("expects float x [..., len, 2 span = {}], got {}",
                              2 * span, x.str()));
    return false;
  }
  std::vector<SymExpr> dims = x.dims;
  dims.back() = x.dims[x.rank() - 2];
  op.getResult()->type = TensorType(x.dtype, dims);
  return true;
}

bool verifyRelativeGather(const Op &op, DiagnosticEngine &d) {
  const int64_t *maxPosition = op.optAttr<int64_t>("max_position");
  int64_t mid = op.attr<int64_t>("span") / 2;
  if (maxPosition && (mid < 1 || *maxPosition - 1 <= mid)) {
    reportOpError(d, op,
                  fmt::format("log buckets need span >= 2 and max_position - "
                              "1 > span / 2, got span {} and max_position {}",
                              op.attr<int64_t>("span"), *maxPosition));
    return false;
  }
  return true;
}

OpCost sinusoidalCost(const Op &op, const CostContext &ctx) {
  OpCost c;
  readOperandsWriteResults(op, ctx, c);
  return c;
}

// A gather: x read, the result written; the indices are computed once per
// graph.
OpCost relativeGatherCost(const Op &op, const CostContext &ctx) {
  OpCost c;
  readOperandsWriteResults(op, ctx, c);
  return c;
}

OpCost positionsCost(const Op &op, const CostContext &ctx) {
  OpCost c;
  ctx.write(op.getResult(), c);
  return c;
}

OpCost cumsumCost(const Op &op, const CostContext &ctx) {
  OpCost c;
  c.flops = ctx.elements(op.getResult()->type);
  readOperandsWriteResults(op, ctx, c);
  return c;
}

OpCost conv1dCost(const Op &op, const CostContext &ctx) {
  OpCost c;
  const TensorType &w = op.getOperand(1)->type;
  const TensorType &y = op.getResult()->type;
  c.macs = ctx.elements(y) * ctx.dim(w.dims[1]) * ctx.dim(w.dims[2]);
  c.matmulFlops = 2 * c.macs;
  c.flops = c.matmulFlops + (op.hasOperand("bias") ? ctx.elements(y) : 0);
  readOperandsWriteResults(op, ctx, c);
  return c;
}
} // namespace

void addSequenceSchemas(SchemaList &out) {
  out.push_back(
      SchemaBuilder(OpKind::Positions, "positions of the new tokens")
          .describe("int64 [batch, seq]: past + j for the j-th new token of "
                    "x [batch, seq, ...], past the tokens the graph's decode "
                    "cache already holds (0 in a graph without one, and at "
                    "the first decode call). The positions of an "
                    "encoder-decoder's decoder, which takes no position "
                    "input.")
          .language()
          .operand("x", "[batch, seq, ...]: the new tokens (only its shape "
                        "is read)")
          .result("result", "int64 [batch, seq]")
          .infer(inferPositions)
          .cost(positionsCost)
          .take());
  out.push_back(
      SchemaBuilder(OpKind::Cumsum, "running sum along an axis")
          .describe("y[.., i, ..] = x[.., 0, ..] + ... + x[.., i, ..] "
                    "(RoBERTa's positions: the count of non-padding tokens "
                    "up to each token).")
          .language()
          .operand("x", "integer or float tensor")
          .attr("axis", AttrType::Int, int64_t(-1),
                "the summed axis (negative: from the end)")
          .result("result", "same type as x")
          .infer(inferCumsum)
          .cost(cumsumCost)
          .take());
  out.push_back(
      SchemaBuilder(OpKind::Sinusoidal, "fixed sinusoidal position embeddings")
          .describe("float32 [..., dim]: row p of the table [sin(p w_k) | "
                    "cos(p w_k)], w_k = base^(-2k / dim), the sine half "
                    "ceil(dim / 2) wide (Marian's table, built at init and "
                    "not stored); positions index a table of `rows` rows "
                    "computed in double precision and rounded to float32. "
                    "Cast it to the model's dtype.")
          .language()
          .operand("positions", "integer [...]")
          .attr("dim", AttrType::Int, "embedding width")
          .atLeast(1)
          .attr("rows", AttrType::Int, "table rows (max_position_embeddings)")
          .atLeast(1)
          .attr("base", AttrType::Float, 10000.0, "the frequency base")
          .above(0)
          .result("result", "float32 [..., dim]")
          .infer(inferSinusoidal)
          .cost(sinusoidalCost)
          .take());
  out.push_back(
      SchemaBuilder(OpKind::RelativeGather, "scores read at relative positions")
          .describe("x [..., len, 2 span] holds each of `len` rows' scores "
                    "against 2 span relative positions; y [..., len, len] "
                    "reads them at idx(i - j) = clamp(bucket(i - j) + span, "
                    "0, 2 span - 1) for query i and key j: y[.., i, j] = "
                    "x[.., i, idx(i - j)], or with by_key x[.., j, span - "
                    "bucket(j - i)] (clamped likewise: the rows are the "
                    "keys'). bucket(r) = r, or with max_position DeBERTa's "
                    "log buckets: r where |r| <= span / 2, else sign(r) "
                    "(ceil(log(|r| / m) / log((max_position - 1) / m) (m - "
                    "1)) + m) with m = span / 2, in float32 (DeBERTa-v2's "
                    "content-to-position and position-to-content terms).")
          .language()
          .operand("x", "float [..., len, 2 span]")
          .attr("span", AttrType::Int,
                "relative positions on each side (the table has 2 span rows)")
          .atLeast(1)
          .optAttr("max_position", AttrType::Int,
                   "log buckets up to this distance (DeBERTa's "
                   "max_relative_positions); absent: the distances as they "
                   "are")
          .atLeast(2)
          .attr("by_key", AttrType::Bool, false,
                "the rows of x are the keys' (position to content)")
          .result("result", "[..., len, len]")
          .verify(verifyRelativeGather)
          .infer(inferRelativeGather)
          .cost(relativeGatherCost)
          .take());
  out.push_back(
      SchemaBuilder(OpKind::Conv1d, "1-D convolution with zero padding")
          .describe("x [batch, channels, length] with weight [out, channels, "
                    "kernel] (PyTorch's Conv1d layout; channels / groups "
                    "with groups), `padding` zeros on "
                    "both sides, at a stride: [batch, out, (length + 2 "
                    "padding - kernel) / stride + 1] (Whisper's front end).")
          .language()
          .operand("x", "float [batch, channels, length]")
          .operand("weight", "[out, channels / groups, kernel]")
          .optOperand("bias", "[out]")
          .attr("stride", AttrType::Int, int64_t(1), "the step")
          .atLeast(1)
          .attr("padding", AttrType::Int, int64_t(0), "zeros added at each end")
          .atLeast(0)
          .optAttr("groups", AttrType::Int,
                   "channel groups: output group g reads input group g only "
                   "(the weight holds channels / groups inputs per output); "
                   "absent: 1")
          .atLeast(1)
          .result("result", "[batch, out, length']")
          .infer(inferConv1d)
          .cost(conv1dCost)
          .take());
}

} // namespace archc::ir
