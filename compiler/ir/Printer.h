//===- Printer.h - Deterministic textual IR dump ----------------*- C++ -*-===//
//
// This file declares the IR printer behind `-emit=ir`. Output is one op per
// line, attributes sorted by name, values numbered in print order, and is
// byte-identical across runs (no pointer or hash order).
//
//===----------------------------------------------------------------------===//
#ifndef ARCHC_IR_PRINTER_H
#define ARCHC_IR_PRINTER_H

#include "ir/IR.h"

#include <ostream>

namespace archc::ir {

struct PrintOptions {
  /// Append ` loc("file":line:col)` to every op.
  bool printLocations = false;
  /// Print the weight declarations before the graph.
  bool printWeights = true;
  const SourceMgr *sourceMgr = nullptr;
};

/// Prints the whole module.
void printModule(const Module &m, std::ostream &os, const PrintOptions &opts);

/// Prints one op and its regions (for diagnostics and tests); operands are
/// named by their block-argument names or `%?`.
std::string printOp(const Op &op);

/// Prints the expanded weight list: one `name shape dtype` line per tensor
/// and a total (the `-emit=weights` output).
void printWeightList(const Module &m, std::ostream &os);

} // namespace archc::ir

#endif // ARCHC_IR_PRINTER_H
