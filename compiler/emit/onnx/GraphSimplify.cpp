//===- GraphSimplify.cpp - Chain folding and dead nodes -------------------===//
//
// This file implements foldViewChains, hoistSubgraphConstants and
// removeDeadNodes. Constant shape
// tensors are read from the graph's Constant nodes (how the builder emits
// them) and initializers.
//
//===----------------------------------------------------------------------===//
#include "emit/onnx/GraphSimplify.h"

#include "emit/onnx/GraphSubgraphs.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace archc {

namespace {
using Graph = onnx::GraphProto;
using Node = onnx::NodeProto;

std::optional<std::vector<int64_t>> int64Values(const onnx::TensorProto &t) {
  if (t.data_type() != onnx::TensorProto_DataType_INT64 || t.dims_size() != 1)
    return std::nullopt;
  std::vector<int64_t> v;
  if (t.has_raw_data()) {
    const std::string &raw = t.raw_data();
    if (raw.size() % 8)
      return std::nullopt;
    v.resize(raw.size() / 8);
    if (!raw.empty()) // memcpy's pointers must not be null, even for 0 bytes
      std::memcpy(v.data(), raw.data(), raw.size());
  } else {
    v.assign(t.int64_data().begin(), t.int64_data().end());
  }
  if (static_cast<int64_t>(v.size()) != t.dims(0))
    return std::nullopt;
  return v;
}

const onnx::AttributeProto *attribute(const Node &n, const std::string &name) {
  for (const auto &a : n.attribute())
    if (a.name() == name)
      return &a;
  return nullptr;
}

int64_t intAttribute(const Node &n, const std::string &name, int64_t dflt) {
  const onnx::AttributeProto *a = attribute(n, name);
  return a && a->type() == onnx::AttributeProto::INT ? a->i() : dflt;
}

bool plainNode(const Node &n, const char *op) {
  return n.op_type() == op && n.domain().empty();
}

class ChainFolder {
public:
  explicit ChainFolder(Graph &g) : graph(g) {
    for (const auto &t : graph.initializer())
      if (auto v = int64Values(t))
        constants[t.name()] = *v;
    for (const auto &n : graph.node()) {
      for (const auto &out : n.output())
        producer[out] = &n;
      if (plainNode(n, "Constant") && n.output_size() == 1)
        if (const auto *a = attribute(n, "value"); a && a->has_t())
          if (auto v = int64Values(a->t()))
            constants[n.output(0)] = *v;
    }
  }

  int run() {
    int folded = 0;
    std::vector<Node> shapes; // merged shapes, placed first
    for (int i = 0; i < graph.node_size(); ++i) {
      Node &n = *graph.mutable_node(i);
      if (plainNode(n, "Reshape"))
        folded += foldReshape(n, shapes);
      else if (plainNode(n, "Transpose"))
        folded += foldTranspose(n);
    }
    if (!shapes.empty()) {
      google::protobuf::RepeatedPtrField<Node> nodes;
      for (Node &s : shapes)
        *nodes.Add() = std::move(s);
      for (Node &n : *graph.mutable_node())
        *nodes.Add() = std::move(n);
      graph.mutable_node()->Swap(&nodes);
    }
    if (!direct.empty())
      renameUses();
    return folded;
  }

private:
  Graph &graph;
  std::map<std::string, std::vector<int64_t>> constants;
  std::map<std::string, const Node *> producer;
  /// Transposes that compose to the identity: uses read the source.
  std::map<std::string, std::string> direct;
  int fresh = 0;

  /// The node producing `name` if it is a plain `op`.
  const Node *inner(const std::string &name, const char *op) const {
    auto it = producer.find(name);
    return it != producer.end() && plainNode(*it->second, op) ? it->second
                                                              : nullptr;
  }

  int foldReshape(Node &outer, std::vector<Node> &shapes) {
    if (outer.input_size() != 2)
      return 0;
    const Node *first = inner(outer.input(0), "Reshape");
    if (!first || first->input_size() != 2)
      return 0;
    bool literal = intAttribute(outer, "allowzero", 0) == 1;
    auto s2 = constants.find(outer.input(1));
    if (literal || (s2 != constants.end() &&
                    std::find(s2->second.begin(), s2->second.end(), 0) ==
                        s2->second.end())) {
      outer.set_input(0, first->input(0));
      return 1;
    }
    // 0 entries copy the intermediate's dims: resolve them through the
    // inner shape when that is a constant without allowzero.
    auto s1 = constants.find(first->input(1));
    if (s2 == constants.end() || s1 == constants.end() ||
        intAttribute(*first, "allowzero", 0) != 0)
      return 0;
    std::vector<int64_t> merged = s2->second;
    for (size_t i = 0; i < merged.size(); ++i) {
      if (merged[i] != 0)
        continue;
      if (i >= s1->second.size() || s1->second[i] < 0)
        return 0;
      merged[i] = s1->second[i]; // a literal dim, or 0: the input's dim
    }
    Node shape;
    shape.set_op_type("Constant");
    std::string name =
        outer.output(0) + "_folded_shape" + std::to_string(fresh++);
    shape.set_name(name);
    shape.add_output(name);
    onnx::AttributeProto *a = shape.add_attribute();
    a->set_name("value");
    a->set_type(onnx::AttributeProto::TENSOR);
    onnx::TensorProto *t = a->mutable_t();
    t->set_data_type(onnx::TensorProto_DataType_INT64);
    t->add_dims(static_cast<int64_t>(merged.size()));
    t->set_raw_data(std::string(reinterpret_cast<const char *>(merged.data()),
                                merged.size() * 8));
    shapes.push_back(std::move(shape));
    constants[name] = merged;
    outer.set_input(0, first->input(0));
    outer.set_input(1, name);
    return 1;
  }

  int foldTranspose(Node &outer) {
    // A Transpose of an identity pair reads the pair's source (and may
    // then fold with the Transpose before it).
    int rewired = 0;
    for (auto it = direct.find(outer.input(0)); it != direct.end();
         it = direct.find(outer.input(0))) {
      outer.set_input(0, it->second);
      rewired = 1;
    }
    const Node *first = inner(outer.input(0), "Transpose");
    const onnx::AttributeProto *p2 = attribute(outer, "perm");
    if (!first || !p2)
      return rewired;
    const onnx::AttributeProto *p1 = attribute(*first, "perm");
    if (!p1 || p1->ints_size() != p2->ints_size())
      return 0;
    std::vector<int64_t> perm;
    bool identity = true;
    for (int i = 0; i < p2->ints_size(); ++i) {
      int64_t j = p2->ints(i);
      if (j < 0 || j >= p1->ints_size())
        return 0;
      perm.push_back(p1->ints(static_cast<int>(j)));
      identity &= perm.back() == i;
    }
    std::string source = first->input(0);
    bool isOutput = false;
    for (const auto &vi : graph.output())
      isOutput |= vi.name() == outer.output(0);
    if (identity && !isOutput) {
      direct[outer.output(0)] = source;
      return 1;
    }
    outer.set_input(0, source);
    for (auto &a : *outer.mutable_attribute())
      if (a.name() == "perm") {
        a.clear_ints();
        for (int64_t v : perm)
          a.add_ints(v);
      }
    return 1;
  }

  /// Identity transposes: their readers read the source (the node itself
  /// is then dead).
  void renameUses() {
    std::map<std::string, std::string> to = direct;
    // A source may itself be an identity result.
    for (auto &[from, src] : to)
      while (direct.count(src))
        src = direct.at(src);
    renameInputs(graph, to);
  }

  /// Renames the inputs (not the outputs: the identity Transposes keep
  /// theirs until they are removed) in `g` and its subgraphs.
  static void renameInputs(Graph &g,
                           const std::map<std::string, std::string> &to) {
    for (auto &n : *g.mutable_node()) {
      for (auto &in : *n.mutable_input())
        if (auto it = to.find(in); it != to.end())
          in = it->second;
      for (auto &a : *n.mutable_attribute()) {
        if (a.has_g())
          renameInputs(*a.mutable_g(), to);
        for (auto &sg : *a.mutable_graphs())
          renameInputs(sg, to);
      }
    }
  }
};

/// Every name read by the nodes of `g` and its subgraphs.
void collectReads(const Graph &g, std::set<std::string> &reads) {
  for (const auto &n : g.node()) {
    for (const auto &in : n.input())
      reads.insert(in);
    for (const auto &a : n.attribute()) {
      if (a.has_g())
        collectReads(a.g(), reads);
      for (const auto &sg : a.graphs())
        collectReads(sg, reads);
    }
  }
}

} // namespace

int foldViewChains(Graph &graph) {
  int folded = ChainFolder(graph).run();
  forEachSubgraph(graph, [&](Graph &g) { folded += foldViewChains(g); });
  return folded;
}

int hoistSubgraphConstants(Graph &graph) {
  int hoisted = 0;
  google::protobuf::RepeatedPtrField<Node> lifted;
  forEachSubgraph(graph, [&](Graph &sg) {
    // Innermost first: a nested body's constants reach this level.
    hoisted += hoistSubgraphConstants(sg);
    std::set<std::string> outputs;
    for (const auto &vi : sg.output())
      outputs.insert(vi.name());
    google::protobuf::RepeatedPtrField<Node> kept;
    for (auto &inner : *sg.mutable_node()) {
      bool movable = inner.op_type() == "Constant" && inner.domain().empty() &&
                     inner.output_size() == 1 &&
                     !outputs.count(inner.output(0));
      *(movable ? lifted.Add() : kept.Add()) = std::move(inner);
      hoisted += movable;
    }
    sg.mutable_node()->Swap(&kept);
  });
  if (lifted.empty())
    return hoisted;
  // Constants read nothing, so they may lead the graph.
  for (auto &n : *graph.mutable_node())
    *lifted.Add() = std::move(n);
  graph.mutable_node()->Swap(&lifted);
  return hoisted;
}

int removeDeadNodes(Graph &graph) {
  // Backwards over the topological order: a node is live if a graph output
  // or a live node (or its subgraphs) reads one of its outputs.
  std::set<std::string> live;
  for (const auto &vi : graph.output())
    live.insert(vi.name());
  std::vector<bool> keep(static_cast<size_t>(graph.node_size()), false);
  for (int i = graph.node_size() - 1; i >= 0; --i) {
    const Node &n = graph.node(i);
    bool used = false;
    for (const auto &out : n.output())
      used |= !out.empty() && live.count(out);
    if (!used)
      continue;
    keep[static_cast<size_t>(i)] = true;
    for (const auto &in : n.input())
      live.insert(in);
    for (const auto &a : n.attribute()) {
      if (a.has_g())
        collectReads(a.g(), live);
      for (const auto &sg : a.graphs())
        collectReads(sg, live);
    }
  }
  int removed = 0;
  std::set<std::string> gone;
  google::protobuf::RepeatedPtrField<Node> kept;
  for (int i = 0; i < graph.node_size(); ++i) {
    if (keep[static_cast<size_t>(i)]) {
      *kept.Add() = std::move(*graph.mutable_node(i));
      continue;
    }
    ++removed;
    gone.insert(graph.node(i).output().begin(), graph.node(i).output().end());
  }
  graph.mutable_node()->Swap(&kept);
  if (removed) {
    google::protobuf::RepeatedPtrField<onnx::ValueInfoProto> infos;
    for (auto &vi : *graph.mutable_value_info())
      if (!gone.count(vi.name()))
        *infos.Add() = std::move(vi);
    graph.mutable_value_info()->Swap(&infos);
  }
  forEachSubgraph(graph, [&](Graph &g) { removed += removeDeadNodes(g); });
  return removed;
}

int removeUnreadInputs(Graph &graph, const std::set<std::string> &candidates) {
  std::set<std::string> read;
  collectReads(graph, read);
  for (const auto &vi : graph.output())
    read.insert(vi.name());
  google::protobuf::RepeatedPtrField<onnx::ValueInfoProto> kept;
  int removed = 0;
  for (auto &vi : *graph.mutable_input()) {
    if (candidates.count(vi.name()) && !read.count(vi.name())) {
      ++removed;
      continue;
    }
    *kept.Add() = std::move(vi);
  }
  graph.mutable_input()->Swap(&kept);
  return removed;
}

} // namespace archc
