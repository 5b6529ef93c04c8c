//===- GraphSimplify.h - Chain folding and dead nodes -----------*- C++ -*-===//
//
// This file declares three clean-ups of an emitted ONNX graph: folding
// chains of Reshapes and of Transposes into one node (the views the
// lowering stacks up between a matmul and the next op), moving subgraph
// constants out of their bodies, and removing nodes whose outputs nothing
// reads and named inputs nothing reads.
//
//===----------------------------------------------------------------------===//
#ifndef ARCHC_EMIT_GRAPHSIMPLIFY_H
#define ARCHC_EMIT_GRAPHSIMPLIFY_H

#include <onnx/onnx_pb.h>

#include <set>
#include <string>

namespace archc {

/// Makes each Reshape of a Reshape's output reshape the first one's input
/// instead, where that gives the same result: the outer shape is literal
/// (allowzero, or no 0 entry), or its 0 entries resolve through a constant
/// inner shape (a fresh Constant holds the merged shape). Makes each
/// Transpose of a Transpose's output one Transpose of the first one's input
/// (composed permutations; an identity permutation becomes a direct use).
/// The inner nodes are left for removeDeadNodes. Applies to subgraphs too.
/// Returns the number of nodes rewired.
int foldViewChains(onnx::GraphProto &graph);

/// Moves the Constant nodes of every subgraph (Loop, Scan and If bodies,
/// nested ones included) into the graph that holds the subgraph's node,
/// where a subgraph still sees them as outer-scope values and the graph's
/// common-subexpression pass can merge the copies each layer's body makes.
/// A constant that is itself a subgraph output stays. Returns the number
/// of nodes moved.
int hoistSubgraphConstants(onnx::GraphProto &graph);

/// Removes the nodes of `graph` none of whose outputs is a graph output or
/// read by a later node (subgraph references included), and the same in
/// every subgraph against its own outputs. Returns the number removed.
int removeDeadNodes(onnx::GraphProto &graph);

/// Removes the inputs of `graph` named in `candidates` that no node reads
/// (subgraph references included) and no output passes on. Returns the
/// number removed.
int removeUnreadInputs(onnx::GraphProto &graph,
                       const std::set<std::string> &candidates);

} // namespace archc

#endif // ARCHC_EMIT_GRAPHSIMPLIFY_H
