//===- OpRules.h - Helpers shared by the op definitions ---------*- C++ -*-===//
//
// This file declares what the op families (compiler/ir/ops/*.cpp, each
// defining its ops' schemas, shape rules and cost rules) and the passes
// share: verification and type inference through the schemas, located op
// errors, broadcasting, axes, and the cache and recurrent state layouts.
//   Elementwise.cpp  binary/unary elementwise ops, softmax
//   Linear.cpp       matmul, gather, norms
//   Reduce.cpp       reduce_sum, reduce_mean, topk_mask, sinkhorn
//   Shape.cpp        reshape, transpose, split, concat, slice, expert_slice
//   Attention.cpp    rope, attention, mla_attention
//   Cache.cpp        cache (growing, or computed once and carried)
//   Sequence.cpp     positions, cumsum, conv1d, sinusoidal, relative_gather
//                    (encoders, speech)
//   Recurrent.cpp    causal_conv1d, delta_rule, compress (constant-size
//                    state)
//   StateSpace.cpp   selective_scan, ssd_scan (Mamba-1 / Mamba-2 scans,
//                    constant-size float32 state)
//   Moe.cpp          route, experts
//   Vision.cpp       conv2d, equal, scatter_rows, nonzero_rows,
//                    select_rows, patch grids and positions
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

/// Checks an op against its schema (structure, attribute values, the op's
/// semantic rule). Reports and returns false on error.
bool verifyOp(const Op &op, DiagnosticEngine &diags);

/// Computes result types from operand types (all known) with the op's
/// shape rule. Reports and returns false on error. Region ops are handled
/// by the pass itself.
bool inferOpTypes(Op &op, DiagnosticEngine &diags);

/// Reports an error at the op, with inlining notes.
void reportOpError(DiagnosticEngine &diags, const Op &op,
                   const std::string &message);

/// The constant-size decode state of an op that owns one (its schema's
/// stateType: causal_conv1d, delta_rule, compress, selective_scan,
/// ssd_scan): its type, constant in the sequence length. False for other
/// ops and when the operand types are not known yet.
bool recurrentStateType(const Op &op, TensorType &out);

/// Broadcasts two shapes numpy-style; false when incompatible.
bool broadcastShapes(const std::vector<SymExpr> &a,
                     const std::vector<SymExpr> &b, std::vector<SymExpr> &out);

/// Normalises a possibly negative axis; false when out of range.
bool normalizeAxis(int64_t axis, size_t rank, size_t &out);

/// M-RoPE of a rope op: the scaling dict's `mrope_section` (frequencies
/// per position axis; empty when absent) and `mrope_interleaved`.
std::vector<int64_t> mropeSections(const Op &op);
bool mropeInterleaved(const Op &op);

/// The keys of a rope scaling dict (Hugging Face's rope_parameters) that
/// op.rope honours for the dict's rope type (`rope_type`, else the legacy
/// `type`): the type, the M-RoPE sections, and the parameters of that type
/// (linear, dynamic: factor; llama3: factor, low/high_freq_factor,
/// original_max_position_embeddings; yarn: those of HF's yarn; longrope:
/// short/long_factor, factor, attention_factor, the original context).
/// rope_theta and partial_rotary_factor are the family's to read.
std::vector<std::string> ropeScalingKeys(const AttrDict &scaling);

/// Storage layout of a cache state for a value of the given rank:
/// [b, s, h, d] is stored [b, h, s, d]; other ranks as they are.
std::vector<int64_t> cacheLayout(size_t rank);

} // namespace archc::ir

#endif // ARCHC_IR_OPRULES_H
