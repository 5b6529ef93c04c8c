//===- GraphCse.h - Common subexpressions of an ONNX graph ------*- C++ -*-===//
//
// This file declares the clean-up that merges nodes computing the same
// value: the same operator on the same inputs with the same attributes
// (per-layer copies of position arithmetic, masks, shapes and rope tables
// that the layers of a model all derive from the graph inputs).
//
//===----------------------------------------------------------------------===//
#ifndef ARCHC_EMIT_GRAPHCSE_H
#define ARCHC_EMIT_GRAPHCSE_H

#include <onnx/onnx_pb.h>

namespace archc {

/// Removes every node of `graph` that repeats an earlier node (same domain,
/// operator, inputs, attributes and number of outputs), its uses renamed to
/// the earlier node's outputs; then does the same inside each subgraph. Nodes
/// with subgraph attributes, random generators and nodes that write a graph
/// output are kept. Nodes are in topological order, so the earlier node is
/// defined before every use. Returns the number of nodes removed.
int eliminateCommonSubexpressions(onnx::GraphProto &graph);

} // namespace archc

#endif // ARCHC_EMIT_GRAPHCSE_H
