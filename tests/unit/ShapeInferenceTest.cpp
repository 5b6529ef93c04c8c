//===- ShapeInferenceTest.cpp - Symbolic shape inference ------------------===//
#include "TestUtil.h"

#include "ir/OpRules.h"

#include <gtest/gtest.h>

using namespace archc;
using namespace archc::test;

TEST(ShapeInference, TypesEveryValueOfTheTinyModel) {
  ScratchDir d;
  auto c = compile(d, kTinyArch, kTinyConfig);
  ASSERT_TRUE(c.ok) << c.diagnostics();
  const ir::Op *ret = c.module().graph.body.getTerminator();
  EXPECT_EQ(ret->getOperand(0)->type.str(), "tensor<batch x seq x 32 x f32>");
  size_t unknown = 0;
  ir::walk(c.module().graph.body, [&](const ir::Op &op) {
    for (auto &r : op.getResults())
      unknown += !r->type.known;
  });
  EXPECT_EQ(unknown, 0u);
}

TEST(ShapeInference, KVCacheGivesPastPlusSeqKeys) {
  ScratchDir d;
  auto c = compile(d, kTinyArch, kTinyConfig, EmitTarget::IR,
                   {"shape-inference", "kv-cache", "shape-inference"});
  ASSERT_TRUE(c.ok) << c.diagnostics();
  const auto &g = c.module().graph;
  ASSERT_EQ(g.stateInputs.size(), 2u);
  EXPECT_EQ(g.stateInputs[0].pattern, "past_key_values.{i}.key");
  EXPECT_EQ(g.stateInputs[0].type.str(), "tensor<batch x 2 x past x 4 x f32>");
  EXPECT_EQ(g.stateOutputs[1].type.str(),
            "tensor<batch x 2 x (past + seq) x 4 x f32>");
  EXPECT_EQ(g.stateInputs[0].layers, (std::vector<int64_t>{0, 1, 2}));
}

TEST(ShapeInference, MatmulMismatchPointsAtTheSource) {
  ScratchDir d;
  std::string arch = R"(
arch k {
  config { h: int }
  model(x: f32[batch, seq, 8]) -> (y) {
    y = op.matmul(x, param("w", [h, 3]))
  }
})";
  auto c = compile(d, arch, R"({"h": 6})");
  ASSERT_FALSE(c.ok);
  EXPECT_NE(
      c.diagnostics().find("test.arch:5:9: error: matmul: inner "
                           "dimensions differ: the input's last dim is 8"),
      std::string::npos)
      << c.diagnostics();
}

TEST(ShapeInference, BroadcastRules) {
  using namespace archc::ir;
  std::vector<SymExpr> out;
  SymExpr s = SymExpr::symbol("seq");
  EXPECT_TRUE(broadcastShapes({s, 1, 4}, {8, 4}, out));
  EXPECT_EQ(out, (std::vector<SymExpr>{s, 8, 4}));
  EXPECT_FALSE(broadcastShapes({s, 3}, {4}, out));
  EXPECT_TRUE(broadcastShapes({}, {s}, out));
}

TEST(ShapeInference, ReshapeChecksElementCount) {
  ScratchDir d;
  std::string arch = R"(
arch k {
  config { h: int }
  model(x: f32[batch, seq, 8]) -> (y) {
    y = op.reshape(x, [batch, seq, h, 3])
  }
})";
  auto c = compile(d, arch, R"({"h": 2})");
  ASSERT_FALSE(c.ok);
  EXPECT_NE(c.diagnostics().find("cannot reshape"), std::string::npos)
      << c.diagnostics();
}

TEST(ShapeInference, AttentionRequiresHeadMultiple) {
  ScratchDir d;
  std::string arch = R"(
arch k {
  config { h: int }
  model(q: f32[batch, seq, 6, 4], k: f32[batch, seq, 4, 4]) -> (y) {
    y = op.attention(q, k, k)
  }
})";
  auto c = compile(d, arch, R"({"h": 2})");
  ASSERT_FALSE(c.ok);
  EXPECT_NE(c.diagnostics().find("must be a multiple of key/value heads"),
            std::string::npos)
      << c.diagnostics();
}

TEST(ShapeInference, GreaterIsBoolAndWhereBroadcastsTheBranches) {
  ScratchDir d;
  std::string arch = R"(
arch k {
  config { h: int }
  model(x: f32[batch, seq, 8]) -> (y) {
    m = op.greater(x, 0.0)
    y = op.where(m, x * 2.0, param("w", [h]))
  }
})";
  auto c = compile(d, arch, R"({"h": 8})");
  ASSERT_TRUE(c.ok) << c.diagnostics();
  std::vector<std::string> types;
  ir::walk(c.module().graph.body, [&](const ir::Op &op) {
    if (op.getKind() == ir::OpKind::Greater ||
        op.getKind() == ir::OpKind::Where)
      types.push_back(op.getResult()->type.str());
  });
  EXPECT_EQ(types, (std::vector<std::string>{"tensor<batch x seq x 8 x bool>",
                                             "tensor<batch x seq x 8 x f32>"}));
}

TEST(ShapeInference, WhereNeedsABoolConditionAndBroadcastingShapes) {
  ScratchDir d;
  std::string notBool = R"(
arch k {
  config { h: int }
  model(x: f32[batch, seq, 8]) -> (y) {
    y = op.where(x, x, 0.0)
  }
})";
  auto c = compile(d, notBool, R"({"h": 8})");
  ASSERT_FALSE(c.ok);
  EXPECT_NE(c.diagnostics().find("test.arch:5:9: error: where: the condition "
                                 "must be a bool tensor, got tensor<batch x "
                                 "seq x 8 x f32>"),
            std::string::npos)
      << c.diagnostics();
  std::string shapes = R"(
arch k {
  config { h: int }
  model(x: f32[batch, seq, 8]) -> (y) {
    y = op.where(op.greater(x, 0.0), x, param("w", [h]))
  }
})";
  c = compile(d, shapes, R"({"h": 3})");
  ASSERT_FALSE(c.ok);
  EXPECT_NE(c.diagnostics().find("do not broadcast"), std::string::npos)
      << c.diagnostics();
  std::string types = R"(
arch k {
  config { h: int }
  model(x: f32[batch, seq, 8], n: i64[batch, seq, 8]) -> (y) {
    y = op.where(op.greater(x, 0.0), x, n)
  }
})";
  c = compile(d, types, R"({"h": 3})");
  ASSERT_FALSE(c.ok);
  EXPECT_NE(c.diagnostics().find("the two branches' element types differ"),
            std::string::npos)
      << c.diagnostics();
}
