//===- GraphOutputsTest.cpp - Graph outputs produced in place -------------===//
//
// Unit tests of produceOutputsInPlace: an output's Identity is removed and
// its producer renamed, except where the input is a graph input, an
// initializer or another output, or where a second output copies the same
// value; references from subgraphs follow the rename.
//
//===----------------------------------------------------------------------===//
#include "emit/onnx/GraphOutputs.h"

#include "OnnxGraphUtil.h"

#include <gtest/gtest.h>

using namespace archc;
using archc::test::addNode;

namespace {

int countOps(const onnx::GraphProto &g, const std::string &op) {
  int n = 0;
  for (const auto &node : g.node())
    n += node.op_type() == op;
  return n;
}
} // namespace

TEST(GraphOutputs, ProducerWritesTheOutput) {
  onnx::GraphProto g;
  g.add_input()->set_name("past");
  g.add_input()->set_name("x");
  g.add_output()->set_name("present");
  addNode(g, "Concat", {"past", "x"}, {"cat"});
  addNode(g, "MatMul", {"x", "cat"}, {"scores"});
  addNode(g, "Identity", {"cat"}, {"present"});
  EXPECT_EQ(produceOutputsInPlace(g), 1);
  ASSERT_EQ(g.node_size(), 2);
  EXPECT_EQ(g.node(0).output(0), "present");
  EXPECT_EQ(g.node(1).input(1), "present"); // later readers follow
  EXPECT_EQ(countOps(g, "Identity"), 0);
}

TEST(GraphOutputs, InputsInitializersAndOutputsKeepTheirCopy) {
  onnx::GraphProto g;
  g.add_input()->set_name("state");
  g.add_initializer()->set_name("w");
  for (const char *o : {"present", "weights", "a", "b"})
    g.add_output()->set_name(o);
  addNode(g, "Identity", {"state"}, {"present"});
  addNode(g, "Identity", {"w"}, {"weights"});
  addNode(g, "Neg", {"state"}, {"a"});
  addNode(g, "Identity", {"a"}, {"b"}); // a is itself an output
  EXPECT_EQ(produceOutputsInPlace(g), 0);
  EXPECT_EQ(countOps(g, "Identity"), 3);
}

TEST(GraphOutputs, SecondCopyOfTheSameValueStays) {
  onnx::GraphProto g;
  g.add_input()->set_name("x");
  g.add_output()->set_name("y");
  g.add_output()->set_name("z");
  addNode(g, "Neg", {"x"}, {"n"});
  addNode(g, "Identity", {"n"}, {"y"});
  addNode(g, "Identity", {"n"}, {"z"});
  EXPECT_EQ(produceOutputsInPlace(g), 1);
  ASSERT_EQ(g.node_size(), 2);
  EXPECT_EQ(g.node(0).output(0), "y");
  EXPECT_EQ(g.node(1).op_type(), "Identity");
  EXPECT_EQ(g.node(1).input(0), "y");
  EXPECT_EQ(g.node(1).output(0), "z");
}

TEST(GraphOutputs, SubgraphReferencesAreRenamed) {
  onnx::GraphProto g;
  g.add_input()->set_name("x");
  g.add_output()->set_name("y");
  g.add_output()->set_name("s");
  addNode(g, "Neg", {"x"}, {"n"});
  onnx::NodeProto *scan = addNode(g, "Scan", {"x"}, {"s"});
  onnx::AttributeProto *body = scan->add_attribute();
  body->set_name("body");
  body->set_type(onnx::AttributeProto::GRAPH);
  addNode(*body->mutable_g(), "Add", {"t", "n"}, {"u"}); // outer-scope n
  addNode(g, "Identity", {"n"}, {"y"});
  EXPECT_EQ(produceOutputsInPlace(g), 1);
  EXPECT_EQ(g.node(0).output(0), "y");
  EXPECT_EQ(g.node(1).attribute(0).g().node(0).input(1), "y");
}

TEST(GraphOutputs, BodiesWriteTheirOutputsInPlace) {
  // Loop body: out = Identity(d) becomes d's producer writing out; the
  // condition passed through from the body's input keeps its Identity.
  onnx::GraphProto g;
  g.add_input()->set_name("x");
  g.add_output()->set_name("y");
  onnx::NodeProto *loop = addNode(g, "Loop", {"", "", "x"}, {"y"});
  onnx::AttributeProto *body = loop->add_attribute();
  body->set_name("body");
  body->set_type(onnx::AttributeProto::GRAPH);
  onnx::GraphProto &b = *body->mutable_g();
  for (const char *in : {"i", "cond", "c"})
    b.add_input()->set_name(in);
  addNode(b, "Neg", {"c"}, {"d"});
  addNode(b, "Identity", {"cond"}, {"cond_out"});
  addNode(b, "Identity", {"d"}, {"out"});
  b.add_output()->set_name("cond_out");
  b.add_output()->set_name("out");
  EXPECT_EQ(produceOutputsInPlace(g), 1);
  EXPECT_EQ(countOps(b, "Identity"), 1);
  EXPECT_EQ(b.node(0).output(0), "out");
}
