//===- GraphSimplifyTest.cpp - Chain folding and dead nodes ---------------===//
//
// Unit tests of foldViewChains (Reshape chains: literal outer shapes, 0
// entries resolved through a constant inner shape, chains left alone where
// the result could differ; Transpose chains composed, identities dropped,
// also behind an identity pair), hoistSubgraphConstants (nested bodies
// included, body outputs kept) and removeDeadNodes (unread nodes go, subgraph
// reads and outputs keep theirs).
//
//===----------------------------------------------------------------------===//
#include "emit/onnx/GraphSimplify.h"

#include "OnnxGraphUtil.h"

#include <gtest/gtest.h>

#include <cstring>

using namespace archc;
using archc::test::addNode;

namespace {

void addShape(onnx::GraphProto &g, const std::string &name,
              std::vector<int64_t> v) {
  onnx::NodeProto *n = addNode(g, "Constant", {}, {name});
  onnx::AttributeProto *a = n->add_attribute();
  a->set_name("value");
  a->set_type(onnx::AttributeProto::TENSOR);
  a->mutable_t()->set_data_type(onnx::TensorProto_DataType_INT64);
  a->mutable_t()->add_dims(static_cast<int64_t>(v.size()));
  a->mutable_t()->set_raw_data(
      std::string(reinterpret_cast<const char *>(v.data()), v.size() * 8));
}

void setInts(onnx::NodeProto *n, const std::string &name,
             std::vector<int64_t> v) {
  onnx::AttributeProto *a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INTS);
  for (int64_t x : v)
    a->add_ints(x);
}

std::vector<int64_t> shapeOf(const onnx::GraphProto &g,
                             const std::string &name) {
  for (const auto &n : g.node())
    if (n.op_type() == "Constant" && n.output(0) == name) {
      const std::string &raw = n.attribute(0).t().raw_data();
      std::vector<int64_t> v(raw.size() / 8);
      if (!raw.empty())
        std::memcpy(v.data(), raw.data(), raw.size());
      return v;
    }
  return {};
}

const onnx::NodeProto *producerOf(const onnx::GraphProto &g,
                                  const std::string &name) {
  for (const auto &n : g.node())
    for (const auto &o : n.output())
      if (o == name)
        return &n;
  return nullptr;
}
} // namespace

TEST(GraphSimplify, ReshapeChainsReadTheFirstInput) {
  onnx::GraphProto g;
  g.add_input()->set_name("x");
  for (const char *o : {"a", "b", "c"})
    g.add_output()->set_name(o);
  addShape(g, "s1", {0, 0, 4, 16}); // [b, s, 64] -> [b, s, 4, 16]
  addShape(g, "flat", {-1, 64});
  addShape(g, "back", {0, 0, 64});
  addShape(g, "grid", {-1, 16});
  addNode(g, "Reshape", {"x", "s1"}, {"heads"});
  addNode(g, "Reshape", {"heads", "flat"}, {"a"}); // no 0: literal
  addNode(g, "Reshape", {"heads", "back"}, {"b"}); // 0s are x's dims too
  addNode(g, "Reshape", {"x", "grid"}, {"rows"});
  addNode(g, "Reshape", {"rows", "back"}, {"c"}); // 0s of [-1, 16]: kept
  EXPECT_EQ(foldViewChains(g), 2);
  EXPECT_EQ(producerOf(g, "a")->input(0), "x");
  EXPECT_EQ(producerOf(g, "b")->input(0), "x");
  EXPECT_EQ(shapeOf(g, producerOf(g, "b")->input(1)),
            (std::vector<int64_t>{0, 0, 64}));
  EXPECT_EQ(producerOf(g, "c")->input(0), "rows");
  EXPECT_EQ(removeDeadNodes(g), 2); // heads, then its shape s1
  EXPECT_EQ(producerOf(g, "heads"), nullptr);
}

TEST(GraphSimplify, ZeroEntriesTakeTheInnerLiteralDims) {
  onnx::GraphProto g;
  g.add_input()->set_name("x");
  g.add_output()->set_name("y");
  addShape(g, "s1", {2, 0, 8});
  addShape(g, "s2", {0, 0, 2, 4});
  addNode(g, "Reshape", {"x", "s1"}, {"v"});
  addNode(g, "Reshape", {"v", "s2"}, {"y"});
  EXPECT_EQ(foldViewChains(g), 1);
  EXPECT_EQ(producerOf(g, "y")->input(0), "x");
  EXPECT_EQ(shapeOf(g, producerOf(g, "y")->input(1)),
            (std::vector<int64_t>{2, 0, 2, 4}));
}

TEST(GraphSimplify, TransposeChainsCompose) {
  onnx::GraphProto g;
  g.add_input()->set_name("x");
  g.add_output()->set_name("y");
  g.add_output()->set_name("z");
  setInts(addNode(g, "Transpose", {"x"}, {"t1"}), "perm", {0, 2, 1, 3});
  setInts(addNode(g, "Transpose", {"t1"}, {"t2"}), "perm", {0, 1, 3, 2});
  addNode(g, "Neg", {"t2"}, {"y"});
  setInts(addNode(g, "Transpose", {"t1"}, {"back"}), "perm", {0, 2, 1, 3});
  addNode(g, "Abs", {"back"}, {"z"});
  EXPECT_EQ(foldViewChains(g), 2);
  const onnx::NodeProto *t2 = producerOf(g, "t2");
  EXPECT_EQ(t2->input(0), "x");
  EXPECT_EQ(std::vector<int64_t>(t2->attribute(0).ints().begin(),
                                 t2->attribute(0).ints().end()),
            (std::vector<int64_t>{0, 2, 3, 1}));
  EXPECT_EQ(producerOf(g, "z")->input(0), "x"); // the identity is gone
  EXPECT_EQ(removeDeadNodes(g), 2);             // t1 and back
}

TEST(GraphSimplify, SubgraphReadsAndOutputsStayLive) {
  onnx::GraphProto g;
  g.add_input()->set_name("x");
  g.add_output()->set_name("y");
  addNode(g, "Neg", {"x"}, {"read_by_body"});
  addNode(g, "Abs", {"x"}, {"unread"});
  onnx::NodeProto *loop = addNode(g, "Loop", {"", ""}, {"y"});
  onnx::AttributeProto *body = loop->add_attribute();
  body->set_name("body");
  body->set_type(onnx::AttributeProto::GRAPH);
  addNode(*body->mutable_g(), "Exp", {"read_by_body"}, {"out"});
  addNode(*body->mutable_g(), "Exp", {"read_by_body"}, {"dead"});
  body->mutable_g()->add_output()->set_name("out");
  EXPECT_EQ(removeDeadNodes(g), 2); // unread, and dead in the body
  EXPECT_NE(producerOf(g, "read_by_body"), nullptr);
  EXPECT_EQ(body->g().node_size(), 1);
}

TEST(GraphSimplify, TransposeAfterAnIdentityPairFoldsToTheSource) {
  // t3(t2(t1(x))) with t2 . t1 the identity: t3 reads x directly.
  onnx::GraphProto g;
  g.add_input()->set_name("x");
  g.add_output()->set_name("y");
  setInts(addNode(g, "Transpose", {"x"}, {"t1"}), "perm", {0, 2, 1, 3});
  setInts(addNode(g, "Transpose", {"t1"}, {"t2"}), "perm", {0, 2, 1, 3});
  setInts(addNode(g, "Transpose", {"t2"}, {"t3"}), "perm", {0, 1, 3, 2});
  addNode(g, "Neg", {"t3"}, {"y"});
  foldViewChains(g);
  const onnx::NodeProto *t3 = producerOf(g, "t3");
  EXPECT_EQ(t3->input(0), "x");
  EXPECT_EQ(std::vector<int64_t>(t3->attribute(0).ints().begin(),
                                 t3->attribute(0).ints().end()),
            (std::vector<int64_t>{0, 1, 3, 2}));
  EXPECT_EQ(removeDeadNodes(g), 2); // t1 and t2
}

TEST(GraphSimplify, SubgraphConstantsMoveToTheOuterGraph) {
  onnx::GraphProto g;
  g.add_input()->set_name("x");
  g.add_output()->set_name("y");
  addNode(g, "Neg", {"x"}, {"n"});
  onnx::NodeProto *loop = addNode(g, "Loop", {"", "", "n"}, {"y"});
  onnx::AttributeProto *body = loop->add_attribute();
  body->set_name("body");
  body->set_type(onnx::AttributeProto::GRAPH);
  onnx::GraphProto &b = *body->mutable_g();
  addShape(b, "axes", {-1});
  addShape(b, "returned", {3}); // a body output: stays in the body
  addNode(b, "ReduceSum", {"c", "axes"}, {"s"});
  // A nested body's constant reaches the outer graph too.
  onnx::NodeProto *inner = addNode(b, "Loop", {"", "", "s"}, {"out"});
  onnx::AttributeProto *innerBody = inner->add_attribute();
  innerBody->set_name("body");
  innerBody->set_type(onnx::AttributeProto::GRAPH);
  addShape(*innerBody->mutable_g(), "deep", {7});
  addNode(*innerBody->mutable_g(), "Add", {"c2", "deep"}, {"o2"});
  innerBody->mutable_g()->add_output()->set_name("o2");
  b.add_output()->set_name("out");
  b.add_output()->set_name("returned");
  EXPECT_EQ(hoistSubgraphConstants(g), 3); // deep twice (two levels), axes
  EXPECT_NE(producerOf(g, "axes"), nullptr);
  EXPECT_NE(producerOf(g, "deep"), nullptr);
  EXPECT_EQ(producerOf(b, "axes"), nullptr);
  EXPECT_NE(producerOf(b, "returned"), nullptr);
  EXPECT_EQ(innerBody->g().node_size(), 1);
  // The constants lead the graph, ahead of the nodes that read them.
  EXPECT_EQ(g.node(0).op_type(), "Constant");
  EXPECT_EQ(g.node(g.node_size() - 1).op_type(), "Loop");
}
