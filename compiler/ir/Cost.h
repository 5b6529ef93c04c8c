//===- Cost.h - Work and traffic of one op, and what cost rules see -*- C++
//-*-//
//
// This file declares OpCost (MACs, FLOPs, bytes moved by one op instance)
// and CostContext, the interface through which each op's cost rule (part of
// its schema, in compiler/ir/ops/*.cpp) asks the profile about the point it
// is evaluated at: concrete dims, the storage precision of what it reads
// and writes, the density of compressed entries, and the cost of nested
// regions. The profile analysis implements the context; the conventions
// are in docs/profile.md.
//
//===----------------------------------------------------------------------===//
#ifndef ARCHC_IR_COST_H
#define ARCHC_IR_COST_H

#include "ir/Types.h"

#include <cstdint>

namespace archc::ir {

class Value;
class Block;
class Op;

/// Work and traffic of one op instance (or a sum of them).
struct OpCost {
  double macs = 0;            ///< multiply-accumulates of matrix products
  double matmulFlops = 0;     ///< 2 * macs (runs on matrix units)
  double flops = 0;           ///< all FLOPs: matmulFlops + elementwise work
  double transcendentals = 0; ///< exp/tanh/sqrt/... (part of flops)
  double weightBytes = 0;     ///< weights read
  double activationBytes = 0; ///< activations read and written
  double kvReadBytes = 0;     ///< cache/state read
  double kvWriteBytes = 0;    ///< cache/state written

  double bytes() const {
    return weightBytes + activationBytes + kvReadBytes + kvWriteBytes;
  }
  OpCost &operator+=(const OpCost &o);
  OpCost scaled(double k) const;
};

/// The profile point as a cost rule sees it.
class CostContext {
public:
  virtual ~CostContext() = default;
  /// A dim's value at the point (batch, seq, past bound); 0 when unbound.
  virtual double dim(const SymExpr &d) const = 0;
  /// Product of the dims of `t` at the point.
  double elements(const TensorType &t) const;
  /// Adds the bytes of reading `v` as an operand: weights (params and
  /// expert slices of them) at the weight precision, float activations at
  /// the activation precision, integers at their own width.
  virtual void read(const Value *v, OpCost &c) const = 0;
  /// Adds the bytes of writing result `v` (activation precision for floats).
  virtual void write(const Value *v, OpCost &c) const = 0;
  /// Whether `v` is a weight (a param or an expert slice of one).
  virtual bool isWeight(const Value *v) const = 0;
  /// Storage bits of weights, activations and KV-cache / state elements.
  virtual double weightBits() const = 0;
  /// Storage bits of one element of weight `v` as the op being costed
  /// reads it (a quantized weight's codes, scales and zero points).
  virtual double weightBitsOf(const Value *v) const {
    (void)v;
    return weightBits();
  }
  virtual double activationBits() const = 0;
  virtual double kvBits() const = 0;
  /// Fraction of key positions holding data (1 / ratio for compressed
  /// entries and what is computed from them).
  virtual double density(const Value *v) const = 0;
  /// The summed cost of a region's ops (an expert body over all tokens).
  virtual OpCost regionCost(const Block &b) const = 0;
};

/// Expected number of distinct experts that T tokens touch when each picks k
/// of E uniformly: E (1 - (1 - k/E)^T).
double expectedDistinctExperts(int64_t experts, int64_t k, double tokens);

/// Reads of every operand from `first` on, and writes of every result.
void readOperandsWriteResults(const Op &op, const CostContext &ctx, OpCost &c,
                              size_t first = 0);

} // namespace archc::ir

#endif // ARCHC_IR_COST_H
