//===- GraphOutputs.h - Graph outputs produced in place ---------*- C++ -*-===//
//
// This file declares the clean-up that lets the node computing a graph
// output write it under the output's name, instead of an Identity copying
// it there (a decode step would otherwise copy the whole KV cache twice:
// once by the Concat, once by the Identity).
//
//===----------------------------------------------------------------------===//
#ifndef ARCHC_EMIT_GRAPHOUTPUTS_H
#define ARCHC_EMIT_GRAPHOUTPUTS_H

#include <onnx/onnx_pb.h>

#include <map>
#include <string>

namespace archc {

/// Renames every use and definition of the names in `to` in `graph` and
/// the subgraphs of its nodes (outer-scope references included), and the
/// value_info entries.
void renameValues(onnx::GraphProto &graph,
                  const std::map<std::string, std::string> &to);

/// Removes each `output = Identity(x)` of `graph` whose output is a graph
/// output and whose `x` is computed by a node of `graph` and is neither a
/// graph input, an initializer nor itself a graph output: `x` is renamed to
/// the output's name everywhere (nodes of nested subgraphs included), so
/// the producer writes the output directly. The same in every subgraph
/// (Loop, Scan, If bodies) against its own outputs. Returns the number
/// removed.
int produceOutputsInPlace(onnx::GraphProto &graph);

} // namespace archc

#endif // ARCHC_EMIT_GRAPHOUTPUTS_H
