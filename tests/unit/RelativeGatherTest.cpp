//===- RelativeGatherTest.cpp - DeBERTa-v2's attention pieces -------------===//
//
// Shape rules and errors of the ops DeBERTa-v2's disentangled attention is
// written with: relative_gather, attention's additive bias and grouped
// conv1d. Their ONNX lowerings are checked in ONNX Runtime against the
// numpy reference (ctest ref.encdec.deberta-v2-*).
//
//===----------------------------------------------------------------------===//
#include "TestUtil.h"

#include "ir/IR.h"

#include <gtest/gtest.h>

using namespace archc;
using namespace archc::test;

namespace {
/// The type of the model's i-th result.
std::string resultType(const Compiled &c, size_t i) {
  return c.module().graph.body.getTerminator()->getOperand(i)->type.str();
}

/// The first op of `kind` in the graph.
const ir::Op *firstOp(const Compiled &c, ir::OpKind kind) {
  const ir::Op *found = nullptr;
  ir::walk(c.module().graph.body, [&](const ir::Op &op) {
    if (!found && op.getKind() == kind)
      found = &op;
  });
  return found;
}

void expectError(const std::string &body, const std::string &want) {
  ScratchDir d;
  std::string arch = "arch v {\n  config { n: int }\n  model(x: f32[batch, "
                     "4, seq, 12], q: f32[batch, seq, 4, 8], e: f32[batch, 8, "
                     "seq]) -> (y) {\n    " +
                     body + "\n  }\n}";
  auto r = compile(d, arch, R"({"n": 1})");
  EXPECT_FALSE(r.ok) << body;
  EXPECT_NE(r.diagnostics().find(want), std::string::npos) << r.diagnostics();
}
} // namespace

TEST(RelativeGather, ShapeRulesAndAttributes) {
  ScratchDir d;
  std::string arch = R"(
arch v {
  config { n: int }
  model(x: f32[batch, 4, seq, 12], q: f32[batch, seq, 4, 8], e: f32[batch, 8, seq]) -> (a, b, c, o) {
    a = op.relative_gather(x, span: 6)
    b = op.relative_gather(x, span: 6, max_position: 10, by_key: true)
    c = op.conv1d(e, param("w", [8, 4, 3]), padding: 1, groups: 2)
    o = op.attention(q, q, q, causal: false, padding_mask: false, bias: a + b)
  }
})";
  auto c = compile(d, arch, R"({"n": 1})");
  ASSERT_TRUE(c.ok) << c.diagnostics();
  // [..., len, 2 span] -> [..., len, len].
  EXPECT_EQ(resultType(c, 0), "tensor<batch x 4 x seq x seq x f32>");
  EXPECT_EQ(resultType(c, 1), "tensor<batch x 4 x seq x seq x f32>");
  EXPECT_EQ(resultType(c, 2), "tensor<batch x 8 x seq x f32>");
  EXPECT_EQ(resultType(c, 3), "tensor<batch x seq x 4 x 8 x f32>");
  const ir::Op *g = firstOp(c, ir::OpKind::RelativeGather);
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(g->attr<int64_t>("span"), 6);
  EXPECT_EQ(g->optAttr<int64_t>("max_position"), nullptr);
  EXPECT_FALSE(g->attr<bool>("by_key"));
  const ir::Op *attn = firstOp(c, ir::OpKind::Attention);
  ASSERT_NE(attn, nullptr);
  EXPECT_TRUE(attn->hasOperand("bias"));
}

TEST(RelativeGather, Errors) {
  // The table's width is 2 span.
  expectError("y = op.relative_gather(x, span: 5)",
              "expects float x [..., len, 2 span = 10]");
  // Log buckets need span / 2 >= 1 and max_position - 1 above it.
  expectError("y = op.relative_gather(x, span: 6, max_position: 4)",
              "log buckets need span >= 2 and max_position - 1 > span / 2");
  // The bias is [batch or 1, heads, queries, keys].
  expectError("y = op.attention(q, q, q, causal: false, bias: "
              "op.transpose(op.relative_gather(x, span: 6), [0, 2, 1, 3]))",
              "(batch, query heads, queries, keys)");
  // Grouped convolutions: the weight holds channels / groups per output.
  expectError("y = op.conv1d(e, param(\"w\", [8, 8, 3]), groups: 2)",
              "expects 16 (8 per group, 2 groups)");
  expectError("y = op.conv1d(e, param(\"w\", [6, 2, 3]), groups: 4)",
              "divisible by the 4 groups");
}
