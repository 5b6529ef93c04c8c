//===- Linear.cpp - Matrix products, lookups and normalisations -----------===//
//
// This file defines matmul, gather, rms_norm and layer_norm.
//   matmul(a [..., K], b [K, N] or [N, K] with transpose_b)  -> [..., N]
//       (batched when b has rank > 2: leading dims broadcast)
//   gather(table [V, ...], indices [...])            -> [indices..., ...]
//   rms_norm / layer_norm(x [..., D], weight? [D], bias? [D]) -> x's type
//
//===----------------------------------------------------------------------===//
#include "ir/OpRules.h"
#include "ir/OpSchema.h"

#include <fmt/format.h>

namespace archc::ir {

namespace {
bool inferMatMul(Op &op, DiagnosticEngine &d) {
  const TensorType &a = op.getOperand(0)->type;
  const TensorType &b = op.getOperand(1)->type;
  bool transB = op.attr<bool>("transpose_b");
  if (a.dtype != b.dtype) {
    reportOpError(
        d, op,
        fmt::format("element types differ: {} and {}", a.str(), b.str()));
    return false;
  }
  if (a.rank() < 1 || b.rank() < 2) {
    reportOpError(d, op,
                  fmt::format("needs a tensor of rank >= 1 and a "
                              "matrix, got {} and {}",
                              a.str(), b.str()));
    return false;
  }
  const SymExpr &k = a.dims.back();
  const SymExpr &kb = transB ? b.dims[b.rank() - 1] : b.dims[b.rank() - 2];
  const SymExpr &n = transB ? b.dims[b.rank() - 2] : b.dims[b.rank() - 1];
  if (k != kb) {
    reportOpError(
        d, op,
        fmt::format("inner dimensions differ: the input's last dim is {} but "
                    "the {} matrix {} expects {} ({})",
                    k.str(), transB ? "[out, in]" : "[in, out]", b.str(),
                    kb.str(),
                    transB ? "transpose_b = true" : "transpose_b = false"));
    return false;
  }
  std::vector<SymExpr> dims;
  if (b.rank() == 2) {
    dims.assign(a.dims.begin(), a.dims.end() - 1);
    dims.push_back(n);
  } else {
    if (a.rank() < 2) {
      reportOpError(d, op, "batched matmul needs rank >= 2 on both sides");
      return false;
    }
    std::vector<SymExpr> ba(a.dims.begin(), a.dims.end() - 2),
        bb(b.dims.begin(), b.dims.end() - 2);
    if (!broadcastShapes(ba, bb, dims)) {
      reportOpError(d, op,
                    fmt::format("batch dims of {} and {} do not "
                                "broadcast",
                                a.str(), b.str()));
      return false;
    }
    dims.push_back(a.dims[a.rank() - 2]);
    dims.push_back(n);
  }
  op.getResult()->type = TensorType(a.dtype, dims);
  return true;
}

bool inferGather(Op &op, DiagnosticEngine &d) {
  const TensorType &t = op.getOperand(0)->type;
  const TensorType &i = op.getOperand(1)->type;
  if (i.dtype != DType::I64 && i.dtype != DType::I32) {
    reportOpError(d, op,
                  fmt::format("indices must be integers, got {}", i.str()));
    return false;
  }
  if (t.rank() < 1) {
    reportOpError(d, op, "table must have rank >= 1");
    return false;
  }
  std::vector<SymExpr> dims = i.dims;
  dims.insert(dims.end(), t.dims.begin() + 1, t.dims.end());
  op.getResult()->type = TensorType(t.dtype, dims);
  return true;
}

bool inferNorm(Op &op, DiagnosticEngine &d) {
  const TensorType &x = op.getOperand(0)->type;
  if (x.rank() < 1 || !isFloat(x.dtype)) {
    reportOpError(
        d, op, fmt::format("needs a floating-point tensor, got {}", x.str()));
    return false;
  }
  for (size_t k = 1; k < op.getNumOperands(); ++k) {
    const TensorType &w = op.getOperand(k)->type;
    if (w.rank() != 1 || w.dims[0] != x.dims.back()) {
      reportOpError(d, op,
                    fmt::format("{} {} does not match the normalised dim {} "
                                "of {}",
                                k == 1 ? "weight" : "bias", w.str(),
                                x.dims.back().str(), x.str()));
      return false;
    }
  }
  op.getResult()->type = x;
  return true;
}

OpCost matmulCost(const Op &op, const CostContext &ctx) {
  OpCost c;
  const TensorType &b = op.getOperand(1)->type;
  bool transB = op.attr<bool>("transpose_b");
  double k = ctx.dim(transB ? b.dims[b.rank() - 1] : b.dims[b.rank() - 2]);
  c.macs = ctx.elements(op.getResult()->type) * k;
  c.matmulFlops = c.flops = 2 * c.macs;
  readOperandsWriteResults(op, ctx, c);
  return c;
}

/// Only the selected rows of the table are read.
OpCost gatherCost(const Op &op, const CostContext &ctx) {
  OpCost c;
  const Value *table = op.getOperand(0);
  double rows = ctx.elements(op.getOperand(1)->type);
  double rowElems = ctx.elements(table->type) / ctx.dim(table->type.dims[0]);
  double rowBits =
      ctx.isWeight(table) ? ctx.weightBitsOf(table) : ctx.activationBits();
  c.weightBytes += rows * rowElems * rowBits / 8;
  readOperandsWriteResults(op, ctx, c, 1);
  return c;
}

/// Per element: the square (and mean subtraction for layer_norm), the
/// scale, the weight and the bias; per row the reduction's mean and eps
/// and one rsqrt.
OpCost normCost(const Op &op, const CostContext &ctx) {
  OpCost c;
  double n = ctx.elements(op.getResult()->type);
  const TensorType &x = op.getOperand(0)->type;
  double rows = n / ctx.dim(x.dims.back());
  double perElem = op.getKind() == OpKind::RmsNorm ? 3 : 5;
  perElem += op.hasOperand("weight") ? 1 : 0;
  if (op.getKind() == OpKind::LayerNorm)
    perElem += op.hasOperand("bias") ? 1 : 0;
  c.flops = n * perElem + rows * 2;
  c.transcendentals = rows;
  readOperandsWriteResults(op, ctx, c);
  return c;
}
} // namespace

void addLinearSchemas(SchemaList &out) {
  out.push_back(
      SchemaBuilder(OpKind::MatMul, "matrix product")
          .describe("b is [in, out], or [out, in] (the PyTorch Linear "
                    "layout) with transpose_b; a b of rank > 2 makes a "
                    "batched product whose leading dims broadcast.")
          .language()
          .operand("a", "[..., K]")
          .operand("b", "[K, N], or [N, K] with transpose_b")
          .attr("transpose_b", AttrType::Bool, false, "b is stored [out, in]")
          .result("result", "[..., N]")
          .infer(inferMatMul)
          .cost(matmulCost)
          .take());
  out.push_back(
      SchemaBuilder(OpKind::Gather,
                    "rows of a table selected by integer indices")
          .language()
          .operand("table", "[V, ...]")
          .operand("indices", "integer tensor")
          .result("result", "[indices..., table dims after the first]")
          .infer(inferGather)
          .cost(gatherCost)
          .denseResults()
          .take());
  out.push_back(
      SchemaBuilder(OpKind::RmsNorm,
                    "x / rms(x) * (offset + weight) over the last axis")
          .language()
          .operand("x", "floating-point [..., D]")
          .optOperand("weight", "[D], or none (no scale)")
          .attr("eps", AttrType::Float, "added to the mean square")
          .above(0)
          .attr("offset", AttrType::Float, 0.0,
                "1.0 for (1 + w) checkpoints (Gemma)")
          .result("result", "same type as x")
          .infer(inferNorm)
          .cost(normCost)
          .take());
  out.push_back(
      SchemaBuilder(OpKind::LayerNorm, "layer normalisation over the last axis")
          .language()
          .operand("x", "floating-point [..., D]")
          .optOperand("weight", "[D], or none (no scale)")
          .optOperand("bias", "[D], or none", "weight")
          .attr("eps", AttrType::Float, "added to the variance")
          .above(0)
          .result("result", "same type as x")
          .infer(inferNorm)
          .cost(normCost)
          .take());
}

} // namespace archc::ir
