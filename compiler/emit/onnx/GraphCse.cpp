//===- GraphCse.cpp - Common subexpressions of an ONNX graph --------------===//
//
// This file implements eliminateCommonSubexpressions: one forward pass
// keyed by (domain, operator, inputs after renaming, attributes): a node's
// inputs are renamed to their survivors before its key is formed, so chains
// of repeated nodes merge in the one pass. Then the same in every subgraph.
//
//===----------------------------------------------------------------------===//
#include "emit/onnx/GraphCse.h"

#include "emit/onnx/GraphOutputs.h"
#include "emit/onnx/GraphSubgraphs.h"

#include <map>
#include <set>
#include <string>
#include <unordered_map>

namespace archc {

namespace {
bool mergeable(const onnx::NodeProto &node,
               const std::set<std::string> &graphOutputs) {
  // Random generators draw anew at every node.
  if (node.op_type().rfind("Random", 0) == 0 ||
      node.op_type() == "Multinomial" || node.op_type() == "Dropout")
    return false;
  for (const auto &attr : node.attribute())
    if (attr.has_g() || attr.graphs_size() > 0)
      return false;
  for (const auto &out : node.output())
    if (graphOutputs.count(out))
      return false;
  return node.output_size() > 0;
}

/// One pass over the top level of `graph`; returns the nodes removed.
int mergeOnce(onnx::GraphProto &graph) {
  std::set<std::string> graphOutputs;
  for (const auto &vi : graph.output())
    graphOutputs.insert(vi.name());
  std::map<std::string, std::string> to;
  std::unordered_map<std::string, int> first;
  std::set<int> dropped;
  for (int i = 0; i < graph.node_size(); ++i) {
    const onnx::NodeProto &node = graph.node(i);
    if (!mergeable(node, graphOutputs))
      continue;
    std::string key = node.domain() + '\n' + node.op_type() + '\n' +
                      std::to_string(node.output_size());
    for (const std::string &in : node.input()) {
      auto it = to.find(in);
      key += '\n' + (it == to.end() ? in : it->second);
    }
    for (const auto &attr : node.attribute())
      key += '\n' + attr.SerializeAsString();
    auto [it, fresh] = first.emplace(std::move(key), i);
    if (fresh)
      continue;
    const onnx::NodeProto &earlier = graph.node(it->second);
    for (int o = 0; o < node.output_size(); ++o)
      if (!node.output(o).empty())
        to[node.output(o)] = earlier.output(o);
    dropped.insert(i);
  }
  if (dropped.empty())
    return 0;
  google::protobuf::RepeatedPtrField<onnx::NodeProto> kept;
  for (int i = 0; i < graph.node_size(); ++i)
    if (!dropped.count(i))
      *kept.Add() = std::move(*graph.mutable_node(i));
  graph.mutable_node()->Swap(&kept);
  // The merged values' shapes are their survivors'.
  google::protobuf::RepeatedPtrField<onnx::ValueInfoProto> infos;
  for (auto &vi : *graph.mutable_value_info())
    if (!to.count(vi.name()))
      *infos.Add() = std::move(vi);
  graph.mutable_value_info()->Swap(&infos);
  renameValues(graph, to);
  return static_cast<int>(dropped.size());
}
} // namespace

int eliminateCommonSubexpressions(onnx::GraphProto &graph) {
  int removed = mergeOnce(graph);
  forEachSubgraph(graph, [&](onnx::GraphProto &g) {
    removed += eliminateCommonSubexpressions(g);
  });
  return removed;
}

} // namespace archc
