//===- GraphCseTest.cpp - Common subexpressions of an ONNX graph ----------===//
//
// Unit tests of eliminateCommonSubexpressions: repeated nodes merge (chains
// in one pass, uses and subgraph references renamed, value_info dropped);
// different attributes, inputs or output counts, random generators, nodes
// with subgraphs and nodes writing graph outputs are kept.
//
//===----------------------------------------------------------------------===//
#include "emit/onnx/GraphCse.h"

#include "OnnxGraphUtil.h"

#include <gtest/gtest.h>

using namespace archc;
using archc::test::addNode;

namespace {

void setInt(onnx::NodeProto *n, const std::string &name, int64_t v) {
  onnx::AttributeProto *a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(v);
}
} // namespace

TEST(GraphCse, ChainsOfRepeatedNodesMergeInOnePass) {
  onnx::GraphProto g;
  g.add_input()->set_name("x");
  g.add_output()->set_name("y");
  addNode(g, "Shape", {"x"}, {"s1"});
  addNode(g, "Cast", {"s1"}, {"c1"});
  addNode(g, "Shape", {"x"}, {"s2"}); // repeats s1
  addNode(g, "Cast", {"s2"}, {"c2"}); // repeats c1 once s2 is s1
  g.add_value_info()->set_name("c2");
  addNode(g, "Add", {"c1", "c2"}, {"y"});
  EXPECT_EQ(eliminateCommonSubexpressions(g), 2);
  ASSERT_EQ(g.node_size(), 3);
  EXPECT_EQ(g.node(2).input(0), "c1");
  EXPECT_EQ(g.node(2).input(1), "c1");
  EXPECT_EQ(g.value_info_size(), 0);
}

TEST(GraphCse, DifferentNodesAreKept) {
  onnx::GraphProto g;
  g.add_input()->set_name("x");
  g.add_input()->set_name("z");
  auto *a = addNode(g, "Softmax", {"x"}, {"a"});
  setInt(a, "axis", -1);
  auto *b = addNode(g, "Softmax", {"x"}, {"b"}); // other attribute value
  setInt(b, "axis", 0);
  addNode(g, "Neg", {"z"}, {"c"}); // other input
  addNode(g, "Neg", {"x"}, {"d"});
  addNode(g, "Split", {"x"}, {"e0", "e1"}); // other output count
  addNode(g, "Split", {"x"}, {"f0", "f1", "f2"});
  addNode(g, "RandomNormalLike", {"x"}, {"r1"}); // draws anew
  addNode(g, "RandomNormalLike", {"x"}, {"r2"});
  EXPECT_EQ(eliminateCommonSubexpressions(g), 0);
  EXPECT_EQ(g.node_size(), 8);
}

TEST(GraphCse, GraphOutputsAndSubgraphNodesAreKeptAndReferencesFollow) {
  onnx::GraphProto g;
  g.add_input()->set_name("x");
  g.add_output()->set_name("out1");
  g.add_output()->set_name("out2");
  addNode(g, "Neg", {"x"}, {"n1"});
  addNode(g, "Neg", {"x"}, {"n2"});
  addNode(g, "Abs", {"n1"}, {"out1"});
  addNode(g, "Abs", {"n2"}, {"out2"}); // writes an output: kept
  onnx::NodeProto *loop = addNode(g, "Loop", {"", ""}, {"l"});
  onnx::AttributeProto *body = loop->add_attribute();
  body->set_name("body");
  body->set_type(onnx::AttributeProto::GRAPH);
  // The body reads n2 from the outer scope and repeats a node of its own.
  addNode(*body->mutable_g(), "Exp", {"n2"}, {"e1"});
  addNode(*body->mutable_g(), "Exp", {"n2"}, {"e2"});
  body->mutable_g()->add_output()->set_name("e2");
  *g.add_node() = *loop; // an identical Loop is still kept
  g.mutable_node(g.node_size() - 1)->set_output(0, "l2");
  EXPECT_EQ(eliminateCommonSubexpressions(g), 1);
  ASSERT_EQ(g.node_size(), 5);
  EXPECT_EQ(g.node(2).input(0), "n1"); // out2's Abs reads the survivor
  const onnx::GraphProto &inner = g.node(3).attribute(0).g();
  ASSERT_EQ(inner.node_size(), 2); // e2 is the body's output: kept
  EXPECT_EQ(inner.node(0).input(0), "n1");
}
