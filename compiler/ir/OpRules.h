//===- OpRules.h - Per-op verification and type inference -------*- C++ -*-===//
//
// This file declares the per-op rules that the verifier and the shape
// inference pass call. Each op family implements its rules in its own file
// under ir/ops/ (onnx-mlir's ShapeHelper layout):
//   Elementwise.cpp  binary/unary elementwise ops, softmax
//   Linear.cpp       matmul, gather, norms
//   Reduce.cpp       reduce_sum, reduce_mean, topk_mask
//   Shape.cpp        reshape, transpose, split, concat, slice
//   Attention.cpp    rope, attention, mla_attention, cache
//   Recurrent.cpp    causal_conv1d, delta_rule, compress (constant-size
//                    state)
//   Moe.cpp          route, experts
//   Structure.cpp    leaves and control ops
// Errors point at the op's .arch location, with notes for the composite
// calls it was inlined through.
//
//===----------------------------------------------------------------------===//
#ifndef ARCHC_IR_OPRULES_H
#define ARCHC_IR_OPRULES_H

#include "ir/IR.h"
#include "support/Diagnostics.h"

namespace archc::ir {

/// Checks operand counts and attributes. Reports and returns false on error.
bool verifyOp(const Op &op, DiagnosticEngine &diags);

/// Computes result types from operand types (all known). Reports and
/// returns false on error. Region ops are handled by the pass itself.
bool inferOpTypes(Op &op, DiagnosticEngine &diags);

/// Reports an error at the op, with inlining notes.
void reportOpError(DiagnosticEngine &diags, const Op &op,
                   const std::string &message);

/// The decode-time state of a Recurrent-family op (causal_conv1d,
/// delta_rule, compress): its type, constant in the sequence length. False when
/// the operand types are not known yet.
bool recurrentStateType(const Op &op, TensorType &out);

/// Number of operands a Recurrent or attention-family op has before the
/// optional past state and padding mask the passes append.
size_t baseOperandCount(const Op &op);

/// Broadcasts two shapes numpy-style; false when incompatible.
bool broadcastShapes(const std::vector<SymExpr> &a,
                     const std::vector<SymExpr> &b, std::vector<SymExpr> &out);

/// Normalises a possibly negative axis; false when out of range.
bool normalizeAxis(int64_t axis, size_t rank, size_t &out);

/// Storage layout of a cache state for a value of the given rank:
/// [b, s, h, d] is stored [b, h, s, d]; other ranks as they are.
std::vector<int64_t> cacheLayout(size_t rank);

// Family rules (implemented in ir/ops/*.cpp).
bool verifyElementwise(const Op &op, DiagnosticEngine &d);
bool inferElementwise(Op &op, DiagnosticEngine &d);
bool verifyLinear(const Op &op, DiagnosticEngine &d);
bool inferLinear(Op &op, DiagnosticEngine &d);
bool verifyReduce(const Op &op, DiagnosticEngine &d);
bool inferReduce(Op &op, DiagnosticEngine &d);
bool verifyShapeOp(const Op &op, DiagnosticEngine &d);
bool inferShapeOp(Op &op, DiagnosticEngine &d);
bool verifyAttention(const Op &op, DiagnosticEngine &d);
bool inferAttention(Op &op, DiagnosticEngine &d);
bool verifyRecurrent(const Op &op, DiagnosticEngine &d);
bool inferRecurrent(Op &op, DiagnosticEngine &d);
bool verifyMoe(const Op &op, DiagnosticEngine &d);
bool inferMoe(Op &op, DiagnosticEngine &d);
bool verifyStructure(const Op &op, DiagnosticEngine &d);
bool inferStructure(Op &op, DiagnosticEngine &d);

} // namespace archc::ir

#endif // ARCHC_IR_OPRULES_H
