//===- Clone.h - Copying ops with value remapping ---------------*- C++ -*-===//
//
// This file declares cloneOp(), which deep-copies an op (and its regions),
// rewriting operands through a value map and recording the new results.
//
//===----------------------------------------------------------------------===//
#ifndef ARCHC_IR_CLONE_H
#define ARCHC_IR_CLONE_H

#include "ir/IR.h"

#include <unordered_map>

namespace archc::ir {

using ValueMap = std::unordered_map<const Value *, Value *>;

/// Copies `op`. Operands found in `map` are replaced; others are kept (outer
/// values). New results and region arguments are added to `map`.
std::unique_ptr<Op> cloneOp(const Op &op, ValueMap &map);

} // namespace archc::ir

#endif // ARCHC_IR_CLONE_H
