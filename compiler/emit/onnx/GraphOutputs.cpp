//===- GraphOutputs.cpp - Graph outputs produced in place -----------------===//
//
// This file implements produceOutputsInPlace: graph outputs written by the
// node that computes them rather than copied by an Identity.
//
//===----------------------------------------------------------------------===//
#include "emit/onnx/GraphOutputs.h"

#include "emit/onnx/GraphSubgraphs.h"

#include <map>
#include <set>
#include <string>

namespace archc {

void renameValues(onnx::GraphProto &graph,
                  const std::map<std::string, std::string> &to) {
  auto renamed = [&](std::string &n) {
    auto it = to.find(n);
    if (it != to.end())
      n = it->second;
  };
  for (auto &node : *graph.mutable_node()) {
    for (auto &in : *node.mutable_input())
      renamed(in);
    for (auto &out : *node.mutable_output())
      renamed(out);
    for (auto &attr : *node.mutable_attribute()) {
      if (attr.has_g())
        renameValues(*attr.mutable_g(), to);
      for (auto &g : *attr.mutable_graphs())
        renameValues(g, to);
    }
  }
  for (auto &vi : *graph.mutable_value_info())
    renamed(*vi.mutable_name());
}

int produceOutputsInPlace(onnx::GraphProto &graph) {
  std::set<std::string> outputs, fixed;
  for (const auto &vi : graph.output())
    outputs.insert(vi.name());
  for (const auto &vi : graph.input())
    fixed.insert(vi.name());
  for (const auto &t : graph.initializer())
    fixed.insert(t.name());
  std::set<std::string> produced;
  for (const auto &node : graph.node())
    for (const auto &out : node.output())
      produced.insert(out);
  // x -> output, once per x (a second output of the same x keeps its copy).
  std::map<std::string, std::string> to;
  std::set<int> dropped;
  for (int i = 0; i < graph.node_size(); ++i) {
    const auto &node = graph.node(i);
    if (node.op_type() != "Identity" || !node.domain().empty() ||
        node.input_size() != 1 || node.output_size() != 1)
      continue;
    const std::string &x = node.input(0), &y = node.output(0);
    if (!outputs.count(y) || outputs.count(x) || fixed.count(x) ||
        !produced.count(x) || to.count(x))
      continue;
    to[x] = y;
    dropped.insert(i);
  }
  int removed = static_cast<int>(dropped.size());
  if (!to.empty()) {
    google::protobuf::RepeatedPtrField<onnx::NodeProto> kept;
    for (int i = 0; i < graph.node_size(); ++i)
      if (!dropped.count(i))
        *kept.Add() = std::move(*graph.mutable_node(i));
    graph.mutable_node()->Swap(&kept);
    renameValues(graph, to);
  }
  // Loop, Scan and If bodies return their results the same way.
  forEachSubgraph(
      graph, [&](onnx::GraphProto &g) { removed += produceOutputsInPlace(g); });
  return removed;
}

} // namespace archc
