//===- BlockEquality.h - Structural equality of IR blocks ------*- C++ -*-===//
#ifndef ARCHC_IR_BLOCKEQUALITY_H
#define ARCHC_IR_BLOCKEQUALITY_H

#include "ir/IR.h"

namespace archc::ir {

/// Whether two blocks compute the same thing: the same ops with the same
/// attributes, result types, operands and regions, where values defined
/// inside the blocks (arguments, results) are matched by position and values
/// from outside must be the same value. The evaluator uses it to share one
/// body among layers that evaluated to identical IR.
bool structurallyEqual(const Block &a, const Block &b);

} // namespace archc::ir

#endif // ARCHC_IR_BLOCKEQUALITY_H
