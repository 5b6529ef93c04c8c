//===- Reduce.cpp - Rules for reductions and top-k selection --------------===//
//
// This file implements verification and type inference for
//   reduce_sum / reduce_mean(x, axes, keepdims)
//       sum or mean over the listed axes (float); the reduced axes are
//       dropped, or kept as 1 with keepdims;
//   sinkhorn(x [..., n, n], iters, eps)          -> [..., n, n]
//       x / (column sums + eps), then iters - 1 rounds of row and column
//       normalisation (a doubly-stochastic matrix, DeepSeek-V4's
//       hyper-connection mixing);
//   topk_mask(scores [b, s, T], valid? [b, T])    -> bool [b, s, T]
//       per query row, the k highest scores among the keys it may see
//       (causal: the s queries are the last s of the T key positions; valid:
//       per-key flags); all of them when fewer than k are visible.
//
//===----------------------------------------------------------------------===//
#include "ir/OpRules.h"
#include "ir/OpSchema.h"

#include <fmt/format.h>

#include <set>

namespace archc::ir {

namespace {
bool inferSinkhorn(Op &op, DiagnosticEngine &d) {
  const TensorType &x = op.getOperand(0)->type;
  if (x.rank() < 2 || !isFloat(x.dtype) ||
      x.dims[x.rank() - 1] != x.dims[x.rank() - 2]) {
    reportOpError(d, op,
                  fmt::format("expects float square matrices "
                              "[..., n, n], got {}",
                              x.str()));
    return false;
  }
  op.getResult()->type = x;
  return true;
}

bool inferTopkMask(Op &op, DiagnosticEngine &d) {
  const TensorType &x = op.getOperand(0)->type;
  if (x.rank() != 3 || !isFloat(x.dtype)) {
    reportOpError(d, op,
                  fmt::format("expects float scores [batch, seq, "
                              "keys], got {}",
                              x.str()));
    return false;
  }
  if (const Value *valid = op.operand("valid")) {
    const TensorType &v = valid->type;
    if (v.dtype != DType::Bool || v.rank() != 2 || v.dims[0] != x.dims[0] ||
        v.dims[1] != x.dims[2]) {
      reportOpError(d, op,
                    fmt::format("valid {} must be bool [batch, keys] "
                                "= [{}, {}]",
                                v.str(), x.dims[0].str(), x.dims[2].str()));
      return false;
    }
  }
  op.getResult()->type = TensorType(DType::Bool, x.dims);
  return true;
}

bool inferReduce(Op &op, DiagnosticEngine &d) {
  const TensorType &x = op.getOperand(0)->type;
  if (!isFloat(x.dtype)) {
    reportOpError(
        d, op, fmt::format("needs a floating-point tensor, got {}", x.str()));
    return false;
  }
  std::set<size_t> reduced;
  for (int64_t a : op.attr<std::vector<int64_t>>("axes")) {
    size_t axis;
    if (!normalizeAxis(a, x.rank(), axis)) {
      reportOpError(d, op,
                    fmt::format("axis {} is out of range for {}", a, x.str()));
      return false;
    }
    if (!reduced.insert(axis).second) {
      reportOpError(d, op, fmt::format("axis {} is listed twice", a));
      return false;
    }
  }
  bool keep = op.attr<bool>("keepdims");
  std::vector<SymExpr> dims;
  for (size_t i = 0; i < x.rank(); ++i) {
    if (!reduced.count(i))
      dims.push_back(x.dims[i]);
    else if (keep)
      dims.push_back(SymExpr(1));
  }
  op.getResult()->type = TensorType(x.dtype, dims);
  return true;
}

/// One add per input element (and one divide per output for the mean).
OpCost reduceCost(const Op &op, const CostContext &ctx) {
  OpCost c;
  c.flops = ctx.elements(op.getOperand(0)->type);
  if (op.getKind() == OpKind::ReduceMean)
    c.flops += ctx.elements(op.getResult()->type);
  readOperandsWriteResults(op, ctx, c);
  return c;
}

/// 2 iters - 1 steps, each a sum (1 add per element), an eps per
/// row/column and a divide per element.
OpCost sinkhornCost(const Op &op, const CostContext &ctx) {
  OpCost c;
  const TensorType &t = op.getOperand(0)->type;
  double n = ctx.elements(t);
  double steps = 2.0 * static_cast<double>(op.attr<int64_t>("iters")) - 1.0;
  c.flops = steps * (2 * n + n / ctx.dim(t.dims.back()));
  readOperandsWriteResults(op, ctx, c);
  return c;
}

/// Per score: the visibility select and the selection compare.
OpCost topkMaskCost(const Op &op, const CostContext &ctx) {
  OpCost c;
  c.flops = 2 * ctx.elements(op.getOperand(0)->type);
  readOperandsWriteResults(op, ctx, c);
  return c;
}

void addReduce(SchemaList &out, OpKind kind, std::string summary) {
  out.push_back(SchemaBuilder(kind, std::move(summary))
                    .language()
                    .operand("x", "floating-point tensor")
                    .attr("axes", AttrType::IntList, "the reduced axes")
                    .nonEmpty()
                    .attr("keepdims", AttrType::Bool, false,
                          "keep reduced axes as size 1")
                    .result("result", "x without (or with size-1) axes")
                    .infer(inferReduce)
                    .cost(reduceCost)
                    .take());
}
} // namespace

void addReduceSchemas(SchemaList &out) {
  addReduce(out, OpKind::ReduceSum, "sum over the listed axes");
  addReduce(out, OpKind::ReduceMean, "mean over the listed axes");
  out.push_back(
      SchemaBuilder(OpKind::TopkMask,
                    "bool mask of each query's k best visible keys")
          .describe("Per query row, the k highest scores among the keys it "
                    "may see (causal: the s queries are the last s of the T "
                    "key positions; valid: per-key flags); all of them when "
                    "fewer than k are visible.")
          .language()
          .operand("scores", "float [batch, seq, keys]")
          .attr("k", AttrType::Int, "keys kept per query")
          .atLeast(1)
          .optOperand("valid", "bool [batch, keys]: keys that may be chosen")
          .attr("causal", AttrType::Bool, true,
                "queries see only keys at or before their position")
          .result("mask", "bool [batch, seq, keys]")
          .infer(inferTopkMask)
          .cost(topkMaskCost)
          .take());
  out.push_back(
      SchemaBuilder(OpKind::Sinkhorn,
                    "Sinkhorn normalisation of [..., n, n] matrices")
          .describe("x / (column sums + eps), then iters - 1 rounds of row "
                    "and column normalisation: a doubly-stochastic matrix "
                    "(DeepSeek-V4's hyper-connection mixing).")
          .language()
          .operand("x", "float [..., n, n]")
          .attr("iters", AttrType::Int, "normalisation rounds")
          .atLeast(1)
          .attr("eps", AttrType::Float, 0.0, "added to every sum")
          .result("result", "same type as x")
          .infer(inferSinkhorn)
          .cost(sinkhornCost)
          .take());
}

} // namespace archc::ir
