//===- Cost.cpp - OpCost arithmetic and shared cost helpers ---------------===//
//
// This file implements OpCost's arithmetic and the helpers the ops' cost
// rules share.
//
//===----------------------------------------------------------------------===//
#include "ir/Cost.h"

#include "ir/IR.h"

#include <cmath>

namespace archc::ir {

OpCost &OpCost::operator+=(const OpCost &o) {
  macs += o.macs;
  matmulFlops += o.matmulFlops;
  flops += o.flops;
  transcendentals += o.transcendentals;
  weightBytes += o.weightBytes;
  activationBytes += o.activationBytes;
  kvReadBytes += o.kvReadBytes;
  kvWriteBytes += o.kvWriteBytes;
  return *this;
}

OpCost OpCost::scaled(double k) const {
  OpCost c = *this;
  c.macs *= k;
  c.matmulFlops *= k;
  c.flops *= k;
  c.transcendentals *= k;
  c.weightBytes *= k;
  c.activationBytes *= k;
  c.kvReadBytes *= k;
  c.kvWriteBytes *= k;
  return c;
}

double CostContext::elements(const TensorType &t) const {
  double n = 1;
  for (const SymExpr &d : t.dims)
    n *= dim(d);
  return n;
}

double expectedDistinctExperts(int64_t experts, int64_t k, double tokens) {
  if (experts <= 0)
    return 0;
  double e = static_cast<double>(experts);
  return e * (1.0 - std::pow(1.0 - static_cast<double>(k) / e, tokens));
}

void readOperandsWriteResults(const Op &op, const CostContext &ctx, OpCost &c,
                              size_t first) {
  for (size_t i = first; i < op.getNumOperands(); ++i)
    ctx.read(op.getOperand(i), c);
  for (const auto &r : op.getResults())
    ctx.write(r.get(), c);
}

} // namespace archc::ir
