//===- GraphSubgraphs.h - Visiting the bodies of an ONNX graph --*- C++ -*-===//
//
// This file defines forEachSubgraph, the one walk over the Loop / Scan
// bodies and If branches of a graph's nodes that the graph clean-ups
// share.
//
//===----------------------------------------------------------------------===//
#ifndef ARCHC_EMIT_GRAPHSUBGRAPHS_H
#define ARCHC_EMIT_GRAPHSUBGRAPHS_H

#include <onnx/onnx_pb.h>

namespace archc {

/// Calls `fn(subgraph)` for every graph attribute of the nodes of `graph`
/// (one level: `fn` recurses if it needs to), in node order.
template <typename Fn> void forEachSubgraph(onnx::GraphProto &graph, Fn &&fn) {
  for (auto &node : *graph.mutable_node())
    for (auto &attr : *node.mutable_attribute()) {
      if (attr.has_g())
        fn(*attr.mutable_g());
      for (auto &g : *attr.mutable_graphs())
        fn(g);
    }
}

} // namespace archc

#endif // ARCHC_EMIT_GRAPHSUBGRAPHS_H
