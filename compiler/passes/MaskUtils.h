//===- MaskUtils.h - Shared attention-mask wiring ---------------*- C++ -*-===//
//
// This file declares addAttentionMask(), used by the kv-cache and
// attention-mask passes.
//
//===----------------------------------------------------------------------===//
#ifndef ARCHC_PASSES_MASKUTILS_H
#define ARCHC_PASSES_MASKUTILS_H

#include "ir/IR.h"
#include "support/Diagnostics.h"

namespace archc {

/// Adds graph input `attention_mask` [batch, `length`] (i64) and appends it
/// as the last operand of every attention op (attribute `masked`). Reports
/// and returns false when the graph already has one.
bool addAttentionMask(ir::Module &m, const ir::SymExpr &length,
                      DiagnosticEngine &diags);

} // namespace archc

#endif // ARCHC_PASSES_MASKUTILS_H
