//===- MoeOptionsTest.cpp - Options of the MoE families of issue 9 --------===//
//
// Zero-sized split parts and concatenated operands, chunked attention (its
// kept keys and its cost), the routing options (group score, p-norm and
// floor of the renormalisation), experts that weight their inputs, stacked
// experts reshaped from 2-D weights, op.floor, and comparing an optional
// tensor with none.
//
//===----------------------------------------------------------------------===//
#include "TestUtil.h"

#include "analysis/Profile.h"

#include <gtest/gtest.h>

using namespace archc;
using namespace archc::test;

namespace {

/// The first op of this kind in the module (walking into regions).
const ir::Op *firstOp(const ir::Module &m, ir::OpKind kind) {
  const ir::Op *found = nullptr;
  ir::walk(m.graph.body, [&](const ir::Op &op) {
    if (!found && op.getKind() == kind)
      found = &op;
  });
  return found;
}

double macsOf(const ir::Module &m, ir::OpKind kind, const ProfilePoint &p) {
  Precision bits;
  double macs = 0;
  for (const OpProfile &op : profileOps(m, p, bits))
    if (op.op->getKind() == kind)
      macs += op.cost.macs;
  return macs;
}

double flopsOf(const ir::Module &m, ir::OpKind kind, const ProfilePoint &p) {
  Precision bits;
  double flops = 0;
  for (const OpProfile &op : profileOps(m, p, bits))
    if (op.op->getKind() == kind)
      flops += op.cost.flops;
  return flops;
}

} // namespace

TEST(MoeOptions, ZeroSizedPartsAreEmptyTensors) {
  ScratchDir d;
  std::string arch = R"(
arch z {
  model(x: f32[batch, seq, 8]) -> (y) {
    a, b, c = op.split(x, [0, 8, 0])
    y = op.concat([a, op.neg(b), c], axis: -1)
  }
})";
  auto c = compile(d, arch, "{}");
  ASSERT_TRUE(c.ok) << c.diagnostics();
  const ir::Op *split = firstOp(c.module(), ir::OpKind::Split);
  ASSERT_NE(split, nullptr);
  EXPECT_EQ(split->getResult(0)->type.str(), "tensor<batch x seq x 0 x f32>");
  EXPECT_EQ(split->getResult(1)->type.str(), "tensor<batch x seq x 8 x f32>");
  EXPECT_EQ(firstOp(c.module(), ir::OpKind::Concat)->getResult()->type.str(),
            "tensor<batch x seq x 8 x f32>");
  // The empty parts cost nothing in the profile.
  Precision bits;
  ASSERT_FALSE(profileOps(c.module(), ProfilePoint{1, 4, 0}, bits).empty());

  // A negative size is an error at the op.
  auto bad = compile(d, R"(
arch z {
  model(x: f32[batch, seq, 8]) -> (y) {
    y, w = op.split(x, [-2, 10])
  }
})",
                     "{}");
  EXPECT_FALSE(bad.ok);
  EXPECT_NE(bad.diagnostics().find("split sizes must not be negative, got -2"),
            std::string::npos)
      << bad.diagnostics();
}

TEST(MoeOptions, ChunkedAttentionKeepsAChunkAndVisitsItsKeys) {
  ScratchDir d;
  std::string arch = R"(
arch ch {
  model(x: f32[batch, seq, 8]) -> (y) {
    for i in 0 .. 2 @ "l.{i}" {
      q = op.reshape(op.matmul(x, param("wq", [8, 8])), [batch, seq, 2, 4])
      k = op.cache(op.reshape(op.matmul(x, param("wk", [8, 4])), [batch, seq, 1, 4]), "key")
      v = op.cache(op.reshape(op.matmul(x, param("wv", [8, 4])), [batch, seq, 1, 4]), "value")
      x = x + op.reshape(op.attention(q, k, v, chunk: 3), [batch, seq, 8])
    }
    y = x
  }
})";
  auto c = compile(d, arch, "{}", EmitTarget::IR,
                   {"shape-inference", "kv-cache", "shape-inference"});
  ASSERT_TRUE(c.ok) << c.diagnostics();
  ModelFacts f = computeModelFacts(c.module());
  ASSERT_EQ(f.states.size(), 2u);
  EXPECT_EQ(f.states[0].window, 3);
  // At 10 tokens each layer holds 3 keys and 3 values of 4 elements.
  EXPECT_DOUBLE_EQ(f.kvBytes(10, 1, 16), 2 * 2 * 3 * 4 * 2);
  // Prefill of 8: the queries at 0..7 see p mod 3 + 1 keys, 15 in all; per
  // key 2 heads x (4 + 4) MACs, in 2 layers.
  EXPECT_DOUBLE_EQ(macsOf(c.module(), ir::OpKind::Attention, {1, 8, 0}),
                   2 * 2 * 8 * 15);
  // Decode at past 7 (position 7): 7 mod 3 + 1 = 2 keys.
  EXPECT_DOUBLE_EQ(macsOf(c.module(), ir::OpKind::Attention, {1, 1, 7}),
                   2 * 2 * 8 * 2);

  // A chunk takes no window.
  auto bad = compile(d, R"(
arch ch {
  model(q: f32[batch, seq, 2, 4]) -> (y) {
    y = op.attention(q, q, q, chunk: 3, window: 2)
  }
})",
                     "{}");
  EXPECT_FALSE(bad.ok);
  EXPECT_NE(bad.diagnostics().find("chunked attention is causal and takes no "
                                   "window or extra keys"),
            std::string::npos)
      << bad.diagnostics();
}

TEST(MoeOptions, RoutingOptionsAreAttributesWithRules) {
  ScratchDir d;
  std::string arch = R"(
arch r {
  model(x: f32[batch, seq, 8]) -> (w, i) {
    w, i = op.route(x, top_k: 3, groups: 4, topk_groups: 2, group_score: "max",
                    normalize: true, norm_p: 2.0, norm_min: 0.25)
  }
})";
  auto c = compile(d, arch, "{}");
  ASSERT_TRUE(c.ok) << c.diagnostics();
  const ir::Op *route = firstOp(c.module(), ir::OpKind::Route);
  ASSERT_NE(route, nullptr);
  EXPECT_EQ(route->attr<std::string>("group_score"), "max");
  EXPECT_EQ(*route->optAttr<double>("norm_p"), 2.0);
  EXPECT_EQ(*route->optAttr<double>("norm_min"), 0.25);
  // Per token: 8 softmax scores (5 FLOPs each), 8 compares, a p-norm of the
  // 3 weights (4 FLOPs each).
  EXPECT_DOUBLE_EQ(flopsOf(c.module(), ir::OpKind::Route, {1, 2, 0}),
                   2 * (5 * 8 + 8 + 4 * 3));
  // Absent options stay absent (the IR text of other routers is unchanged).
  auto plain = compile(d, R"(
arch r {
  model(x: f32[batch, seq, 8]) -> (w, i) {
    w, i = op.route(x, top_k: 2, normalize: true)
  }
})",
                       "{}");
  ASSERT_TRUE(plain.ok) << plain.diagnostics();
  const ir::Op *p = firstOp(plain.module(), ir::OpKind::Route);
  EXPECT_FALSE(p->hasAttr("group_score"));
  EXPECT_FALSE(p->hasAttr("norm_p"));
  EXPECT_FALSE(p->hasAttr("norm_min"));

  for (const char *body :
       {"w, i = op.route(x, top_k: 2, norm_p: 2.0)",
        "w, i = op.route(x, top_k: 2, group_score: \"max\")"}) {
    auto bad = compile(d,
                       std::string("arch r {\n  model(x: f32[batch, seq, "
                                   "8]) -> (w) {\n    ") +
                           body + "\n  }\n}\n",
                       "{}");
    EXPECT_FALSE(bad.ok) << body;
  }
}

TEST(MoeOptions, ExpertsMayWeightTheirInputs) {
  ScratchDir d;
  std::string arch = R"(
arch e {
  model(x: f32[batch, seq, 8]) -> (y) {
    w, idx = op.route(op.matmul(x, param("router", [8, 4])), top_k: 2,
                      scoring: "sigmoid", order: "topk_score")
    up = param("up", [4, 8, 16])
    y = op.experts(x, w, idx, count: 4, scale_input: true, body: fn(t, e) {
      return op.reshape(op.reduce_sum(op.reshape(op.matmul(t, up[e]), [batch, seq, 8, 2]),
                                      axes: [3]), [batch, seq, 8])
    })
  }
})";
  auto c = compile(d, arch, "{}");
  ASSERT_TRUE(c.ok) << c.diagnostics();
  const ir::Op *ex = firstOp(c.module(), ir::OpKind::Experts);
  ASSERT_NE(ex, nullptr);
  EXPECT_TRUE(*ex->optAttr<bool>("scale_input"));
  ModelFacts f = computeModelFacts(c.module());
  EXPECT_EQ(f.expertParams, 4 * 8 * 16);
}

TEST(MoeOptions, ReshapedTwoDimensionalWeightsStackExperts) {
  ScratchDir d;
  // DBRX keeps every expert's rows in one [E * I, D] tensor.
  std::string arch = R"(
arch s {
  model(x: f32[batch, seq, 8]) -> (y) {
    w, idx = op.route(op.matmul(x, param("router", [8, 3])), top_k: 1)
    w1 = op.reshape(param("w1", [3 * 5, 8]), [3, 5, 8])
    y = op.experts(x, w, idx, count: 3, body: fn(t, e) {
      return op.matmul(op.matmul(t, w1[e], transpose_b: true), w1[e])
    })
  }
})";
  auto c = compile(d, arch, "{}");
  ASSERT_TRUE(c.ok) << c.diagnostics();
  ModelFacts f = computeModelFacts(c.module());
  EXPECT_EQ(f.expertParams, 3 * 5 * 8);
  ASSERT_EQ(f.moe.size(), 0u); // outside a layer loop: no per-layer facts
  const ir::Op *slice = firstOp(c.module(), ir::OpKind::ExpertSlice);
  ASSERT_NE(slice, nullptr);
  EXPECT_EQ(slice->getResult()->type.str(), "tensor<5 x 8 x f32>");

  // A reshape that does not put the experts first is rejected.
  auto bad = compile(d, R"(
arch s {
  model(x: f32[batch, seq, 8]) -> (y) {
    w, idx = op.route(op.matmul(x, param("router", [8, 3])), top_k: 1)
    w1 = op.reshape(param("w1", [15, 8]), [5, 3, 8])
    y = op.experts(x, w, idx, count: 3, body: fn(t, e) {
      return op.matmul(t, w1[e], transpose_b: false)
    })
  }
})",
                     "{}");
  EXPECT_FALSE(bad.ok);
  EXPECT_NE(bad.diagnostics().find("only a weight stacking all 3 experts"),
            std::string::npos)
      << bad.diagnostics();
}

TEST(MoeOptions, FloorAndOptionalTensorArguments) {
  ScratchDir d;
  std::string arch = R"(
def scaled(x: tensor, s: tensor? = none) {
  if s != none {
    return x * s
  }
  return x
}
arch f {
  model(p: i64[batch, seq], x: f32[batch, seq, 4]) -> (a, b) {
    t = op.floor((op.cast(p, dtype: "f32") + 1.0) / 4.0)
    a = scaled(x, op.reshape(t, [batch, seq, 1]))
    b = scaled(x)
  }
})";
  auto c = compile(d, arch, "{}");
  ASSERT_TRUE(c.ok) << c.diagnostics();
  const ir::Op *fl = firstOp(c.module(), ir::OpKind::Floor);
  ASSERT_NE(fl, nullptr);
  EXPECT_EQ(fl->getResult()->type.str(), "tensor<batch x seq x f32>");
  // b is x itself: one multiply in the module, for a.
  int muls = 0;
  ir::walk(c.module().graph.body,
           [&](const ir::Op &op) { muls += op.getKind() == ir::OpKind::Mul; });
  EXPECT_EQ(muls, 1);
  // Tensors still compare only with none.
  auto bad = compile(d, R"(
arch f {
  model(x: f32[batch, seq, 4]) -> (y) {
    if x == x {
      y = x
    }
  }
})",
                     "{}");
  EXPECT_FALSE(bad.ok);
  EXPECT_NE(bad.diagnostics().find("compares compile-time values, not tensors"),
            std::string::npos)
      << bad.diagnostics();
}
