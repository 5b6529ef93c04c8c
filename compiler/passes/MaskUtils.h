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

/// Adds graph input `attention_mask` [batch, `length`] (i64) and makes it
/// the `mask` operand of every op that reads the padding mask (attention
/// ops without `padding_mask: false`, MLA, ops with decode state); nothing
/// when no op reads it. Reports and returns false when the graph already has
/// an input of that name and some op would read the mask.
bool addAttentionMask(ir::Module &m, const ir::SymExpr &length,
                      DiagnosticEngine &diags);

} // namespace archc

#endif // ARCHC_PASSES_MASKUTILS_H
