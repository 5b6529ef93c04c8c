//===- Elementwise.cpp - Elementwise ops and softmax ----------------------===//
//
// This file defines the elementwise ops: binary ops with numpy
// broadcasting (add, sub, mul, div, pow, maximum, minimum), the comparison
// greater (a bool result) and where (choice by a bool condition), unary ops
// (neg, exp, ..., floor, clamp, cast) and softmax along one axis. Their cost
// is a fixed number of FLOPs per output element (transcendentals counted
// apart as well), every operand read and the result written.
//
//===----------------------------------------------------------------------===//
#include "ir/OpRules.h"
#include "ir/OpSchema.h"

#include <fmt/format.h>

namespace archc::ir {

namespace {
bool inferBinary(Op &op, DiagnosticEngine &d) {
  const TensorType &a = op.getOperand(0)->type;
  const TensorType &b = op.getOperand(1)->type;
  DType dt = a.dtype;
  // An integral constant may join an integer tensor (positions - 3), except
  // in a division or power (no integer semantics defined).
  bool integerOp = op.getKind() != OpKind::Div && op.getKind() != OpKind::Pow;
  auto integralConst = [integerOp](const Value *v) {
    const Op *c = v->getDefiningOp();
    if (!integerOp || !c || c->getKind() != OpKind::Const)
      return false;
    double x = c->attr<double>("value");
    return x == static_cast<double>(static_cast<int64_t>(x));
  };
  bool aInt = a.dtype == DType::I64 || a.dtype == DType::I32;
  bool bInt = b.dtype == DType::I64 || b.dtype == DType::I32;
  if (a.dtype != b.dtype) {
    if (b.rank() == 0 && isFloat(a.dtype) && isFloat(b.dtype))
      dt = a.dtype;
    else if (a.rank() == 0 && isFloat(a.dtype) && isFloat(b.dtype))
      dt = b.dtype;
    else if (b.rank() == 0 && aInt && integralConst(op.getOperand(1)))
      dt = a.dtype;
    else if (a.rank() == 0 && bInt && integralConst(op.getOperand(0)))
      dt = b.dtype;
    else {
      reportOpError(
          d, op,
          fmt::format("element types differ: {} and {}", a.str(), b.str()));
      return false;
    }
  }
  std::vector<SymExpr> dims;
  if (!broadcastShapes(a.dims, b.dims, dims)) {
    reportOpError(
        d, op,
        fmt::format("shapes {} and {} do not broadcast", a.str(), b.str()));
    return false;
  }
  op.getResult()->type = TensorType(dt, dims);
  return true;
}

bool inferGreater(Op &op, DiagnosticEngine &d) {
  if (!inferBinary(op, d))
    return false;
  op.getResult()->type.dtype = DType::Bool;
  return true;
}

/// where(cond, a, b): cond bool; a and b of one element type (a rank-0
/// float joins a float tensor), all three broadcast.
bool inferWhere(Op &op, DiagnosticEngine &d) {
  const TensorType &c = op.getOperand(0)->type;
  const TensorType &a = op.getOperand(1)->type;
  const TensorType &b = op.getOperand(2)->type;
  if (c.dtype != DType::Bool) {
    reportOpError(
        d, op,
        fmt::format("the condition must be a bool tensor, got {}", c.str()));
    return false;
  }
  DType dt = a.dtype;
  if (a.dtype != b.dtype) {
    if (b.rank() == 0 && isFloat(a.dtype) && isFloat(b.dtype))
      dt = a.dtype;
    else if (a.rank() == 0 && isFloat(a.dtype) && isFloat(b.dtype))
      dt = b.dtype;
    else {
      reportOpError(d, op,
                    fmt::format("the two branches' element types differ: {} "
                                "and {}",
                                a.str(), b.str()));
      return false;
    }
  }
  std::vector<SymExpr> ab, dims;
  if (!broadcastShapes(a.dims, b.dims, ab) ||
      !broadcastShapes(c.dims, ab, dims)) {
    reportOpError(d, op,
                  fmt::format("shapes {}, {} and {} do not broadcast", c.str(),
                              a.str(), b.str()));
    return false;
  }
  op.getResult()->type = TensorType(dt, dims);
  return true;
}

bool inferUnary(Op &op, DiagnosticEngine &d) {
  const TensorType &a = op.getOperand(0)->type;
  if (!isFloat(a.dtype)) {
    reportOpError(
        d, op, fmt::format("needs a floating-point tensor, got {}", a.str()));
    return false;
  }
  op.getResult()->type = a;
  return true;
}

bool inferCast(Op &op, DiagnosticEngine &) {
  TensorType r = op.getOperand(0)->type;
  r.dtype = parseDType(op.attr<std::string>("dtype"));
  op.getResult()->type = r;
  return true;
}

bool inferSoftmax(Op &op, DiagnosticEngine &d) {
  const TensorType &a = op.getOperand(0)->type;
  size_t axis;
  if (!normalizeAxis(op.attr<int64_t>("axis"), a.rank(), axis)) {
    reportOpError(d, op,
                  fmt::format("axis {} is out of range for {}",
                              op.attr<int64_t>("axis"), a.str()));
    return false;
  }
  return inferUnary(op, d);
}

/// `flops` FLOPs and `transcendentals` transcendental evaluations per
/// output element.
template <int flops, int transcendentals>
OpCost perElementCost(const Op &op, const CostContext &ctx) {
  OpCost c;
  double n = ctx.elements(op.getResult()->type);
  c.flops = n * flops;
  c.transcendentals = n * transcendentals;
  readOperandsWriteResults(op, ctx, c);
  return c;
}

OpCost geluCost(const Op &op, const CostContext &ctx) {
  return op.attr<std::string>("approximate") == "tanh"
             ? perElementCost<8, 1>(op, ctx)
             : perElementCost<5, 1>(op, ctx);
}

void addBinary(SchemaList &out, OpKind kind, std::string summary,
               CostRule cost) {
  out.push_back(SchemaBuilder(kind, std::move(summary))
                    .language()
                    .operand("a", "left operand")
                    .operand("b", "right operand (broadcast numpy-style)")
                    .result("result", "broadcast shape of a and b")
                    .infer(inferBinary)
                    .cost(cost)
                    .take());
}

void addUnary(SchemaList &out, OpKind kind, std::string summary,
              CostRule cost) {
  out.push_back(SchemaBuilder(kind, std::move(summary))
                    .language()
                    .operand("x", "floating-point tensor")
                    .result("result", "same type as x")
                    .infer(inferUnary)
                    .cost(cost)
                    .take());
}
} // namespace

void addElementwiseSchemas(SchemaList &out) {
  addBinary(out, OpKind::Add, "a + b", perElementCost<1, 0>);
  addBinary(out, OpKind::Sub, "a - b", perElementCost<1, 0>);
  addBinary(out, OpKind::Mul, "a * b", perElementCost<1, 0>);
  addBinary(out, OpKind::Div, "a / b", perElementCost<1, 0>);
  addBinary(out, OpKind::Pow, "a to the power b", perElementCost<1, 1>);
  addBinary(out, OpKind::Maximum, "elementwise max(a, b)",
            perElementCost<1, 0>);
  addBinary(out, OpKind::Minimum, "elementwise min(a, b)",
            perElementCost<1, 0>);
  out.push_back(SchemaBuilder(OpKind::Greater, "a > b, elementwise")
                    .language()
                    .operand("a", "left operand")
                    .operand("b", "right operand (broadcast numpy-style)")
                    .result("result", "bool, broadcast shape of a and b")
                    .infer(inferGreater)
                    .cost(perElementCost<1, 0>)
                    .take());
  out.push_back(SchemaBuilder(OpKind::Where, "elementwise choice: a where "
                                             "cond, else b")
                    .language()
                    .operand("cond", "bool tensor")
                    .operand("a", "the value where cond holds")
                    .operand("b", "the value elsewhere (a's element type)")
                    .result("result", "broadcast shape of cond, a and b")
                    .infer(inferWhere)
                    .cost(perElementCost<1, 0>)
                    .take());
  addUnary(out, OpKind::Neg, "-x", perElementCost<1, 0>);
  addUnary(out, OpKind::Exp, "e^x", perElementCost<1, 1>);
  addUnary(out, OpKind::Log, "natural logarithm", perElementCost<1, 1>);
  addUnary(out, OpKind::Sqrt, "square root", perElementCost<1, 1>);
  addUnary(out, OpKind::Rsqrt, "1 / sqrt(x)", perElementCost<2, 1>);
  addUnary(out, OpKind::Tanh, "hyperbolic tangent", perElementCost<1, 1>);
  addUnary(out, OpKind::Sigmoid, "1 / (1 + e^-x)", perElementCost<3, 1>);
  addUnary(out, OpKind::Silu, "x * sigmoid(x)", perElementCost<4, 1>);
  addUnary(out, OpKind::Relu, "max(x, 0)", perElementCost<1, 0>);
  addUnary(out, OpKind::Softplus, "log(1 + e^x)", perElementCost<3, 2>);
  addUnary(out, OpKind::Abs, "|x|", perElementCost<1, 0>);
  addUnary(out, OpKind::Floor, "the largest integer <= x",
           perElementCost<1, 0>);
  out.push_back(SchemaBuilder(OpKind::Gelu, "GELU, exact (erf) or the tanh "
                                            "approximation")
                    .language()
                    .operand("x", "floating-point tensor")
                    .attr("approximate", AttrType::Enum, std::string("none"),
                          "\"none\" (erf) or \"tanh\"")
                    .allowed({"none", "tanh"})
                    .result("result", "same type as x")
                    .infer(inferUnary)
                    .cost(geluCost)
                    .take());
  out.push_back(SchemaBuilder(OpKind::Clamp, "clamp to [min, max]")
                    .language()
                    .operand("x", "floating-point tensor")
                    .optAttr("min", AttrType::Float, "lower bound, or none")
                    .optAttr("max", AttrType::Float, "upper bound, or none")
                    .result("result", "same type as x")
                    .infer(inferUnary)
                    .cost(perElementCost<2, 0>)
                    .take());
  out.push_back(SchemaBuilder(OpKind::Cast, "convert the element type")
                    .language()
                    .operand("x", "any tensor")
                    .attr("dtype", AttrType::DType,
                          "target element type (f32, f16, bf16, i64, ...)")
                    .result("result", "x's shape, element type dtype")
                    .infer(inferCast)
                    .cost(perElementCost<0, 0>)
                    .take());
  out.push_back(SchemaBuilder(OpKind::Softmax, "softmax along an axis")
                    .language()
                    .operand("x", "floating-point tensor")
                    .attr("axis", AttrType::Int, int64_t(-1),
                          "the normalised axis (negative: from the end)")
                    .result("result", "same type as x")
                    .infer(inferSoftmax)
                    .cost(perElementCost<5, 1>)
                    .take());
}

} // namespace archc::ir
