//===- Shape.cpp - Reshape, transpose, split, concat, slice ---------------===//
//
// This file defines the shape manipulation ops (and expert_slice, which
// selects one expert's row of a stacked weight). Element counts are
// compared symbolically. Split parts and concatenated operands may be
// empty (size 0 along the axis). They move no data in the profile (views,
// or copies a runtime fuses away).
//
//===----------------------------------------------------------------------===//
#include "ir/OpRules.h"
#include "ir/OpSchema.h"

#include <fmt/format.h>

#include <set>

namespace archc::ir {

namespace {
std::string dimsStr(const std::vector<SymExpr> &dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i)
    s += (i ? ", " : "") + dims[i].str();
  return s + "]";
}

bool verifyConcat(const Op &op, DiagnosticEngine &d) {
  if (op.getNumOperands() < 1) {
    reportOpError(d, op, "needs at least one tensor");
    return false;
  }
  return true;
}

bool inferReshape(Op &op, DiagnosticEngine &d) {
  const TensorType &x = op.getOperand(0)->type;
  const auto &shape = op.attr<std::vector<SymExpr>>("shape");
  TensorType r(x.dtype, shape);
  if (r.numElements() != x.numElements()) {
    reportOpError(d, op,
                  fmt::format("cannot reshape {} ({} elements) to {} ({} "
                              "elements)",
                              x.str(), x.numElements().str(), dimsStr(shape),
                              r.numElements().str()));
    return false;
  }
  op.getResult()->type = r;
  return true;
}

bool inferTranspose(Op &op, DiagnosticEngine &d) {
  const TensorType &x = op.getOperand(0)->type;
  const auto *perm = &op.attr<std::vector<int64_t>>("perm");
  std::set<int64_t> seen;
  if (perm)
    seen.insert(perm->begin(), perm->end());
  if (!perm || perm->size() != x.rank() || seen.size() != x.rank() ||
      *seen.begin() != 0 ||
      *seen.rbegin() != static_cast<int64_t>(x.rank()) - 1) {
    reportOpError(d, op,
                  fmt::format("perm is not a permutation of the {} "
                              "axes of {}",
                              x.rank(), x.str()));
    return false;
  }
  std::vector<SymExpr> dims;
  for (int64_t p : *perm)
    dims.push_back(x.dims[static_cast<size_t>(p)]);
  op.getResult()->type = TensorType(x.dtype, dims);
  return true;
}

bool inferSplit(Op &op, DiagnosticEngine &d) {
  const TensorType &x = op.getOperand(0)->type;
  size_t axis;
  if (!normalizeAxis(op.attr<int64_t>("axis"), x.rank(), axis)) {
    reportOpError(d, op,
                  fmt::format("axis {} is out of range for {}",
                              op.attr<int64_t>("axis"), x.str()));
    return false;
  }
  const auto &sizes = op.attr<std::vector<int64_t>>("sizes");
  int64_t total = 0;
  for (int64_t s : sizes) {
    // A part may be empty (size 0): DeepSeek-V4's rope split when the
    // indexer head is all rope dims.
    if (s < 0) {
      reportOpError(d, op,
                    fmt::format("split sizes must not be negative, got {}", s));
      return false;
    }
    total += s;
  }
  if (x.dims[axis] != SymExpr(total)) {
    reportOpError(d, op,
                  fmt::format("sizes add up to {} but axis {} of {} "
                              "has {}",
                              total, axis, x.str(), x.dims[axis].str()));
    return false;
  }
  for (size_t k = 0; k < sizes.size(); ++k) {
    TensorType r = x;
    r.dims[axis] = sizes[k];
    op.getResult(k)->type = r;
  }
  return true;
}

bool inferConcat(Op &op, DiagnosticEngine &d) {
  const TensorType &x = op.getOperand(0)->type;
  size_t axis;
  if (!normalizeAxis(op.attr<int64_t>("axis"), x.rank(), axis)) {
    reportOpError(d, op,
                  fmt::format("axis {} is out of range for {}",
                              op.attr<int64_t>("axis"), x.str()));
    return false;
  }
  TensorType r = x;
  for (size_t k = 1; k < op.getNumOperands(); ++k) {
    const TensorType &y = op.getOperand(k)->type;
    bool ok = y.rank() == x.rank() && y.dtype == x.dtype;
    for (size_t i = 0; ok && i < x.rank(); ++i)
      if (i != axis && y.dims[i] != x.dims[i])
        ok = false;
    if (!ok) {
      reportOpError(d, op,
                    fmt::format("operand {} ({}) does not match {} "
                                "outside axis {}",
                                k, y.str(), x.str(), axis));
      return false;
    }
    r.dims[axis] = r.dims[axis] + y.dims[axis];
  }
  op.getResult()->type = r;
  return true;
}

bool inferExpertSlice(Op &op, DiagnosticEngine &d) {
  const TensorType &x = op.getOperand(0)->type;
  if (x.rank() < 2) {
    reportOpError(d, op,
                  fmt::format("expects a stacked [experts, ...] "
                              "tensor, got {}",
                              x.str()));
    return false;
  }
  TensorType r = x;
  r.dims.erase(r.dims.begin());
  op.getResult()->type = r;
  return true;
}

bool inferSlice(Op &op, DiagnosticEngine &d) {
  const TensorType &x = op.getOperand(0)->type;
  size_t axis;
  if (!normalizeAxis(op.attr<int64_t>("axis"), x.rank(), axis)) {
    reportOpError(d, op,
                  fmt::format("axis {} is out of range for {}",
                              op.attr<int64_t>("axis"), x.str()));
    return false;
  }
  int64_t start = op.attr<int64_t>("start"), end = op.attr<int64_t>("end");
  auto dim = x.dims[axis].getConstant();
  if (start < 0 || end <= start || (dim && end > *dim)) {
    reportOpError(d, op,
                  fmt::format("range [{}, {}) is invalid for axis {} "
                              "of {}",
                              start, end, axis, x.str()));
    return false;
  }
  TensorType r = x;
  r.dims[axis] = end - start;
  op.getResult()->type = r;
  return true;
}

} // namespace

void addShapeSchemas(SchemaList &out) {
  out.push_back(SchemaBuilder(OpKind::Reshape, "reshape to the given dims")
                    .language()
                    .operand("x", "any tensor")
                    .attr("shape", AttrType::DimList,
                          "ints and symbolic dims; the element count is kept")
                    .result("result", "x's elements in the new shape")
                    .infer(inferReshape)
                    .take());
  out.push_back(
      SchemaBuilder(OpKind::Transpose, "permute axes")
          .language()
          .operand("x", "any tensor")
          .attr("perm", AttrType::IntList, "result axis i is x's axis perm[i]")
          .result("result", "x with permuted axes")
          .infer(inferTranspose)
          .take());
  out.push_back(SchemaBuilder(OpKind::Split,
                              "split into parts of the given sizes (a tuple)")
                    .language()
                    .operand("x", "any tensor")
                    .attr("sizes", AttrType::IntList,
                          "part sizes along the axis (0: an empty part), "
                          "adding up to its size")
                    .nonEmpty()
                    .attr("axis", AttrType::Int, int64_t(-1), "the split axis")
                    .variadicResults("parts", "sizes", "one per size")
                    .infer(inferSplit)
                    .take());
  out.push_back(
      SchemaBuilder(OpKind::Concat, "concatenate tensors along an axis")
          .language()
          .variadicOperand("xs", "a list of tensors agreeing "
                                 "outside the axis")
          .attr("axis", AttrType::Int, int64_t(-1), "the concatenated axis")
          .result("result", "the operands joined along the axis")
          .verify(verifyConcat)
          .infer(inferConcat)
          .take());
  out.push_back(
      SchemaBuilder(OpKind::Slice, "static slice [start, end) along an axis")
          .language()
          .operand("x", "any tensor")
          .attr("axis", AttrType::Int, "the sliced axis")
          .attr("start", AttrType::Int, "first index kept")
          .attr("end", AttrType::Int, "one past the last index kept")
          .result("result", "x with axis of size end - start")
          .infer(inferSlice)
          .take());
  out.push_back(SchemaBuilder(OpKind::ExpertSlice,
                              "one expert's slice w[e] of a stacked weight")
                    .describe("Created for `w[e]` inside an expert body, w a "
                              "checkpoint weight stacking every routed expert "
                              "along its first axis; the profile counts the "
                              "slice as the expert's weights.")
                    .operand("stacked", "weight [experts, ...]")
                    .result("result", "the weight without its first axis")
                    .infer(inferExpertSlice)
                    .take());
}

} // namespace archc::ir
