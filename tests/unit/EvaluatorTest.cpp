//===- EvaluatorTest.cpp - IR generation by evaluation --------------------===//
#include "TestUtil.h"

#include "ir/Printer.h"

#include <gtest/gtest.h>

using namespace archc;
using namespace archc::test;

namespace {
const ir::Op *findRepeat(const ir::Module &m) {
  for (const auto &op : m.graph.body.getOps())
    if (op->getKind() == ir::OpKind::Repeat)
      return op.get();
  return nullptr;
}
} // namespace

TEST(Evaluator, IdenticalLayersShareOneKind) {
  ScratchDir d;
  auto c = compile(d, kTinyArch, kTinyConfig);
  ASSERT_TRUE(c.ok) << c.diagnostics();
  const ir::Op *rep = findRepeat(c.module());
  ASSERT_TRUE(rep);
  ASSERT_EQ(rep->getRegions().size(), 1u);
  EXPECT_EQ(rep->getRegions()[0]->layers, (std::vector<int64_t>{0, 1, 2}));
  const ir::WeightDecl *q =
      c.module().findWeight("model.layers.{i}.self_attn.q_proj.weight");
  ASSERT_TRUE(q);
  EXPECT_EQ(q->layers, (std::vector<int64_t>{0, 1, 2}));
  EXPECT_EQ(q->type.str(), "tensor<16 x 16 x f32>");
}

TEST(Evaluator, PerLayerConditionsMakeLayerKinds) {
  ScratchDir d;
  std::string arch = R"(
import "std/nn.arch"
arch k {
  config { n: int }
  model(x: f32[batch, seq, 8]) -> (x) {
    for i in 0 .. n @ "layers.{i}" {
      if i % 3 == 2 {
        x = linear(x, 8, 8) @ "wide"
      } else {
        x = x * 2.0
      }
    }
  }
})";
  auto c = compile(d, arch, R"({"n": 7})");
  ASSERT_TRUE(c.ok) << c.diagnostics();
  const ir::Op *rep = findRepeat(c.module());
  ASSERT_EQ(rep->getRegions().size(), 2u);
  EXPECT_EQ(rep->getRegions()[0]->layers,
            (std::vector<int64_t>{0, 1, 3, 4, 6}));
  EXPECT_EQ(rep->getRegions()[1]->layers, (std::vector<int64_t>{2, 5}));
  EXPECT_EQ(c.module().findWeight("layers.{i}.wide.weight")->layers,
            (std::vector<int64_t>{2, 5}));
}

TEST(Evaluator, WeightInLoopWithoutPlaceholderIsDuplicate) {
  ScratchDir d;
  std::string arch = R"(
import "std/nn.arch"
arch k {
  config { n: int }
  model(x: f32[batch, seq, 8]) -> (x) {
    for i in 0 .. n @ "layers" {
      x = linear(x, 8, 8) @ "proj"
    }
  }
})";
  auto c = compile(d, arch, R"({"n": 2})");
  ASSERT_FALSE(c.ok);
  EXPECT_NE(c.diagnostics().find("weight 'layers.proj.weight' is declared "
                                 "again in layer 1"),
            std::string::npos)
      << c.diagnostics();
}

TEST(Evaluator, TiedWeightIsDeclaredOnce) {
  ScratchDir d;
  std::string arch = R"(
arch k {
  config { v: int  h: int }
  model(ids: i64[batch, seq]) -> (logits) {
    e = param("weight", [v, h]) @ "embed"
    logits = op.matmul(op.gather(e, ids), e, transpose_b: true)
  }
})";
  auto c = compile(d, arch, R"({"v": 10, "h": 4})");
  ASSERT_TRUE(c.ok) << c.diagnostics();
  EXPECT_EQ(c.module().weights.size(), 1u);
}

TEST(Evaluator, ErrorStatementReportsAtCallSite) {
  ScratchDir d;
  std::string arch = R"(
import "std/nn.arch"
arch k {
  config { act: string }
  model(x: f32[batch, seq, 8]) -> (x) {
    x = activation(x, act)
  }
})";
  auto c = compile(d, arch, R"({"act": "swoosh"})");
  ASSERT_FALSE(c.ok);
  std::string diag = c.diagnostics();
  EXPECT_NE(diag.find("unsupported activation 'swoosh'"), std::string::npos);
  EXPECT_NE(diag.find("test.arch:6:9: note: in call to 'activation' from here"),
            std::string::npos)
      << diag;
}

TEST(Evaluator, ScopeOfACallAppliesToTheCalleeOnly) {
  ScratchDir d;
  std::string arch = R"(
import "std/nn.arch"
arch k {
  config { h: int }
  def block(x: tensor) { return linear(x, h, h) @ "inner" }
  model(x: f32[batch, seq, 4]) -> (x) {
    x = block(linear(x, h, h) @ "arg") @ "outer"
  }
})";
  auto c = compile(d, arch, R"({"h": 4})");
  ASSERT_TRUE(c.ok) << c.diagnostics();
  EXPECT_TRUE(c.module().findWeight("arg.weight"));
  EXPECT_TRUE(c.module().findWeight("outer.inner.weight"));
}

TEST(Evaluator, ExpertBodiesDeclarePerExpertWeights) {
  ScratchDir d;
  std::string arch = R"(
import "std/moe.arch"
arch k {
  config { h: int  e: int }
  model(x: f32[batch, seq, 8]) -> (x) {
    x = switch_moe(x, h, e, 2, 16) @ "mlp"
  }
})";
  auto c = compile(d, arch, R"({"h": 8, "e": 4})");
  ASSERT_TRUE(c.ok) << c.diagnostics();
  const ir::WeightDecl *w =
      c.module().findWeight("mlp.experts.{e}.gate_proj.weight");
  ASSERT_TRUE(w);
  EXPECT_EQ(w->experts, 4);
  EXPECT_EQ(w->count(), 4);
}
