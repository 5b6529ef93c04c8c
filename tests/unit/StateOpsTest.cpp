//===- StateOpsTest.cpp - MLA, causal conv, delta rule, stacked experts ---===//
#include "TestUtil.h"

#include "analysis/Profile.h"
#include "ir/OpRules.h"

#include <gtest/gtest.h>

using namespace archc;
using namespace archc::test;

namespace {
// A one-layer linear-attention block: conv over [q | k | v], then the delta
// rule with 2 key heads and 4 value heads.
const char *kLinearArch = R"(
arch lin {
  config { d: int }
  model(x: f32[batch, seq, 8]) -> (y) {
    for i in 0 .. 2 @ "l.{i}" {
      u = op.causal_conv1d(op.matmul(x, param("w", [8, 16])), param("conv", [16, 1, 4]))
      q, k, v = op.split(u, [4, 4, 8])
      q = op.reshape(q, [batch, seq, 2, 2])
      k = op.reshape(k, [batch, seq, 2, 2])
      v = op.reshape(v, [batch, seq, 4, d])
      g = op.matmul(x, param("wg", [8, 4]))
      o = op.delta_rule(q, k, v, g, op.sigmoid(g))
      x = x + op.reshape(o, [batch, seq, 8])
    }
    y = x
  }
})";
} // namespace

TEST(StateOps, LinearAttentionStatesAreConstantSize) {
  ScratchDir d;
  auto c = compile(d, kLinearArch, R"({"d": 2})", EmitTarget::IR,
                   {"shape-inference", "kv-cache", "shape-inference"});
  ASSERT_TRUE(c.ok) << c.diagnostics();
  const auto &g = c.module().graph;
  ASSERT_EQ(g.stateInputs.size(), 2u);
  EXPECT_EQ(g.stateInputs[0].pattern, "past_key_values.{i}.conv_state");
  EXPECT_EQ(g.stateInputs[0].type.str(), "tensor<batch x 16 x 3 x f32>");
  EXPECT_EQ(g.stateInputs[1].pattern, "past_key_values.{i}.recurrent_state");
  EXPECT_EQ(g.stateInputs[1].type.str(), "tensor<batch x 4 x 2 x 2 x f32>");
  // Present states have the same (past-free) shape.
  EXPECT_EQ(g.stateOutputs[0].type, g.stateInputs[0].type);
  EXPECT_EQ(g.stateOutputs[1].type, g.stateInputs[1].type);

  ModelFacts f = computeModelFacts(c.module());
  ASSERT_EQ(f.states.size(), 2u);
  EXPECT_EQ(f.states[0].elementsPerSequence, 16 * 3);
  EXPECT_EQ(f.states[1].elementsPerSequence, 4 * 2 * 2);
  EXPECT_EQ(f.states[1].bits, 32); // float32 recurrent state
  // 2 layers x (48 x 2 B + 16 x 4 B); no growth per token.
  EXPECT_DOUBLE_EQ(f.stateBytesPerSequence(16), 2 * (48 * 2 + 16 * 4));
  EXPECT_DOUBLE_EQ(f.kvBytesPerToken(16), 0);
  EXPECT_DOUBLE_EQ(f.kvBytes(100000, 3, 16), 3 * f.stateBytesPerSequence(16));
}

TEST(StateOps, DeltaRuleChecksHeadsAndGates) {
  ScratchDir d;
  // 3 value heads over 2 key heads.
  std::string arch = R"(
arch lin {
  model(x: f32[batch, seq, 2, 6]) -> (y) {
    for i in 0 .. 1 @ "l.{i}" {
      g = op.slice(op.reshape(x, [batch, seq, 12]), axis: 2, start: 0, end: G)
      x = x + op.reshape(op.delta_rule(x, x, op.reshape(x, [batch, seq, 3, 4]), g, g),
                         [batch, seq, 2, 6])
    }
    y = x
  }
})";
  std::string heads = arch;
  heads.replace(heads.find("end: G"), 6, "end: 3");
  auto c = compile(d, heads, "{}");
  ASSERT_FALSE(c.ok);
  EXPECT_NE(c.diagnostics().find("with value heads a multiple of key heads"),
            std::string::npos)
      << c.diagnostics();
  // Gates must have one value per value head: 6 value heads, 5 gates.
  std::string gates = arch;
  gates.replace(gates.find("end: G"), 6, "end: 5");
  gates.replace(gates.find("[batch, seq, 3, 4]"), 18, "[batch, seq, 6, 2]");
  c = compile(d, gates, "{}");
  ASSERT_FALSE(c.ok);
  EXPECT_NE(c.diagnostics().find("must be [batch, seq, value_heads] = "
                                 "[batch, seq, 6]"),
            std::string::npos)
      << c.diagnostics();
}

TEST(StateOps, CausalConvChecksItsWeight) {
  ScratchDir d;
  std::string arch = R"(
arch lin {
  model(x: f32[batch, seq, 8]) -> (y) {
    for i in 0 .. 1 @ "l.{i}" {
      x = op.causal_conv1d(x, param("conv", [6, 1, 4]))
    }
    y = x
  }
})";
  auto c = compile(d, arch, "{}");
  ASSERT_FALSE(c.ok);
  EXPECT_NE(c.diagnostics().find("test.arch:5:11: error: causal_conv1d: "
                                 "weight tensor<6 x 1 x 4 x f32> must be "
                                 "[channels, 1, kernel] with channels = 8"),
            std::string::npos)
      << c.diagnostics();
}

TEST(StateOps, StateOpsNeedALayerLoop) {
  ScratchDir d;
  std::string arch = R"(
arch lin {
  model(x: f32[batch, seq, 8]) -> (y) {
    y = op.causal_conv1d(x, param("conv", [8, 1, 4]))
  }
})";
  auto c = compile(d, arch, "{}");
  ASSERT_FALSE(c.ok);
  EXPECT_NE(c.diagnostics().find("op.causal_conv1d must be used inside a "
                                 "layer loop"),
            std::string::npos)
      << c.diagnostics();
}

TEST(StateOps, MlaCachesTheLatentOnly) {
  ScratchDir d;
  std::string arch = R"(
arch mla {
  model(x: f32[batch, seq, 16]) -> (y) {
    for i in 0 .. 1 @ "l.{i}" {
      q = op.reshape(op.matmul(x, param("wq", [16, 24])), [batch, seq, 2, 12])
      q_nope, q_pe = op.split(q, [8, 4])
      lat = op.cache(op.matmul(x, param("wkv", [16, 6])), "compressed_kv")
      k_pe = op.cache(op.matmul(x, param("wr", [16, 4])), "k_pe")
      o = op.mla_attention(q_nope, q_pe, lat, k_pe, param("kv_b", [2 * (8 + 5), 6]), v_dim: 5)
      x = x + op.matmul(op.reshape(o, [batch, seq, 10]), param("wo", [10, 16]))
    }
    y = x
  }
})";
  auto c = compile(d, arch, "{}", EmitTarget::IR,
                   {"shape-inference", "kv-cache", "shape-inference"});
  ASSERT_TRUE(c.ok) << c.diagnostics();
  const auto &g = c.module().graph;
  ASSERT_EQ(g.stateInputs.size(), 2u);
  EXPECT_EQ(g.stateInputs[0].type.str(), "tensor<batch x past x 6 x f32>");
  EXPECT_EQ(g.stateOutputs[1].type.str(),
            "tensor<batch x (past + seq) x 4 x f32>");
  EXPECT_DOUBLE_EQ(computeModelFacts(c.module()).kvBytesPerToken(16),
                   (6 + 4) * 2);

  // kv_b must be [heads * (nope + v_dim), latent].
  std::string bad = arch;
  bad.replace(bad.find("[2 * (8 + 5), 6]"), 16, "[2 * (8 + 4), 6]");
  c = compile(d, bad, "{}");
  ASSERT_FALSE(c.ok);
  EXPECT_NE(c.diagnostics().find("kv_weight tensor<24 x 6 x f32> must be "
                                 "[heads * (nope + v_dim), c]"),
            std::string::npos)
      << c.diagnostics();
}

TEST(StateOps, StackedExpertsAreSlicedAndCountedAsExperts) {
  ScratchDir d;
  std::string arch = R"(
arch moe {
  model(x: f32[batch, seq, 4]) -> (y) {
    w, idx = op.route(op.matmul(x, param("gate", [4, 3])), top_k: 1)
    up = param("up", [3, 4, 6])
    y = op.experts(x, w, idx, count: 3, body: fn(t, e) {
      return op.matmul(op.matmul(t, up[e]), param("down.{e}", [6, 4]))
    })
  }
})";
  auto c = compile(d, arch, "{}");
  ASSERT_TRUE(c.ok) << c.diagnostics();
  ModelFacts f = computeModelFacts(c.module());
  EXPECT_EQ(f.params, 12 + 72 + 72);
  EXPECT_EQ(f.expertParams, 72 + 72);
  ASSERT_EQ(f.moe.size(), 0u); // no layer loop: facts come from repeat regions
  EXPECT_EQ(f.activatedParamsPerToken(), 12 + 72 + 72);

  // Only a weight stacking every expert can be indexed by `e`.
  std::string bad = arch;
  bad.replace(bad.find("[3, 4, 6]"), 9, "[2, 4, 6]");
  c = compile(d, bad, "{}");
  ASSERT_FALSE(c.ok);
  EXPECT_NE(c.diagnostics().find("only a weight stacking all 3 experts along "
                                 "its first axis can be indexed"),
            std::string::npos)
      << c.diagnostics();
}

TEST(StateOps, SinkhornNeedsSquareMatrices) {
  ScratchDir d;
  std::string arch = R"(
arch hc {
  model(x: f32[batch, seq, 4, 3]) -> (y) {
    y = op.sinkhorn(x, iters: 3, eps: 1e-6)
  }
})";
  auto c = compile(d, arch, "{}");
  ASSERT_FALSE(c.ok);
  EXPECT_NE(c.diagnostics().find("sinkhorn: expects float square matrices"),
            std::string::npos)
      << c.diagnostics();
  std::string ok = arch;
  ok.replace(ok.find("4, 3]"), 5, "4, 4]");
  c = compile(d, ok, "{}");
  ASSERT_TRUE(c.ok) << c.diagnostics();
  std::string zero = ok;
  zero.replace(zero.find("iters: 3"), 8, "iters: 0");
  c = compile(d, zero, "{}");
  ASSERT_FALSE(c.ok);
  EXPECT_NE(c.diagnostics().find("op.sinkhorn: iters must be at least 1"),
            std::string::npos)
      << c.diagnostics();
}

// A decoder layer with a growing self-attention cache and a cross-attention
// cache computed once from the encoder output: the profile counts the
// cross cache per encoder position, and a cached step (crossCached) skips
// exactly the ops that only fill it (the projection and the cache op).
TEST(StateOps, CrossAttentionCacheIsPerEncoderPositionAndSkippedWhenCached) {
  ScratchDir d;
  std::string arch = R"(
arch xattn {
  model(x: f32[batch, seq, 8], enc: f32[batch, enc_seq, 8]) -> (y) {
    for i in 0 .. 3 @ "l.{i}" {
      q = op.matmul(x, param("wq", [8, 4]))
      k = op.cache(op.matmul(x, param("wk", [8, 4])), "decoder.key")
      c = op.cache(op.matmul(enc, param("wc", [8, 6])), "encoder.key", once: true)
      v = op.matmul(c, param("wo", [6, 4]))
      a = op.matmul(op.matmul(q, op.transpose(k, [0, 2, 1])), k)
      z = op.matmul(op.matmul(a, op.transpose(v, [0, 2, 1])), v)
      x = x + op.matmul(z, param("wz", [4, 8]))
    }
    y = x
  }
})";
  auto c = compile(d, arch, "{}", EmitTarget::IR,
                   {"shape-inference", "kv-cache", "shape-inference"});
  ASSERT_TRUE(c.ok) << c.diagnostics();
  ModelFacts f = computeModelFacts(c.module());
  ASSERT_EQ(f.states.size(), 2u);
  EXPECT_FALSE(f.states[0].perEncoderPosition);
  EXPECT_TRUE(f.states[1].perEncoderPosition);
  // 3 layers x 4 (self) and x 6 (cross) elements at 16 bits.
  EXPECT_DOUBLE_EQ(f.kvBytesPerToken(16), 3 * 4 * 2);
  EXPECT_DOUBLE_EQ(f.crossBytesPerEncoderPosition(16), 3 * 6 * 2);
  ProfilePoint p{2, 1, 10, {{"enc_seq", 7}, {"enc_past", 7}}};
  EXPECT_DOUBLE_EQ(kvBytesAt(f, p, 16), 2 * (11 * 24 + 7 * 36));
  auto macs = [&](const ProfilePoint &pt) {
    double n = 0;
    for (const OpProfile &o : profileOps(c.module(), pt, Precision{}))
      n += o.cost.macs;
    return n;
  };
  ProfilePoint cached = p;
  cached.crossCached = true;
  // The skipped projection: 3 layers x batch 2 x 7 positions x 8 x 6.
  EXPECT_DOUBLE_EQ(macs(p) - macs(cached), 3 * 2 * 7 * 8 * 6);
}

// A cross-attention cache split between two graphs (onnxruntime-genai's
// Whisper): the graph that computes it exports the entries as present
// states and keeps them through dead-code removal though nothing reads
// them; the graph fed them takes past states alone, with no present state
// and no use_cache_branch input.
TEST(StateOps, CacheSplitBetweenGraphsByCarry) {
  const std::vector<std::string> passes = {"dead-code", "shape-inference",
                                           "kv-cache", "shape-inference"};
  ScratchDir d;
  auto exported = compile(d, R"(
arch exporter {
  model(enc: f32[batch, enc_seq, 8]) -> (y) {
    for i in 0 .. 2 @ "l.{i}" {
      k = op.cache(op.reshape(op.matmul(enc, param("wk", [8, 8])), [batch, enc_seq, 2, 4]),
                   "encoder.key", once: true, carry: "output")
    }
    y = enc
  }
})",
                          "{}", EmitTarget::IR, passes);
  ASSERT_TRUE(exported.ok) << exported.diagnostics();
  const ir::Graph &g = exported.module().graph;
  EXPECT_TRUE(g.stateInputs.empty());
  ASSERT_EQ(g.stateOutputs.size(), 1u);
  EXPECT_EQ(g.stateOutputs[0].pattern, "present.{i}.encoder.key");
  // Stored [batch, heads, enc_seq, d].
  EXPECT_EQ(g.stateOutputs[0].type.str(),
            "tensor<batch x 2 x enc_seq x 4 x f32>");

  auto simple = compile(d, R"(
arch reader2 {
  model(enc: f32[batch, enc_seq, 8]) -> (y) {
    for i in 0 .. 2 @ "l.{i}" {
      k = op.cache(op.reshape(op.matmul(enc, param("wk", [8, 8])), [batch, enc_seq, 2, 4]),
                   "encoder.key", once: true, carry: "input")
      enc = enc + op.reshape(op.reduce_sum(k, [1]), [batch, 1, 8])
    }
    y = enc
  }
})",
                        "{}", EmitTarget::IR, passes);
  ASSERT_TRUE(simple.ok) << simple.diagnostics();
  const ir::Graph &r = simple.module().graph;
  ASSERT_EQ(r.stateInputs.size(), 1u);
  EXPECT_EQ(r.stateInputs[0].pattern, "past_key_values.{i}.encoder.key");
  EXPECT_EQ(r.stateInputs[0].type.str(),
            "tensor<batch x 2 x enc_past x 4 x f32>");
  EXPECT_TRUE(r.stateOutputs.empty());
  for (const auto &arg : r.body.getArguments())
    EXPECT_NE(arg->name, "use_cache_branch");
}

TEST(StateOps, CarryNeedsACacheComputedOnce) {
  ScratchDir d;
  auto c = compile(d, R"(
arch bad {
  model(enc: f32[batch, enc_seq, 8]) -> (y) {
    for i in 0 .. 2 @ "l.{i}" {
      k = op.cache(enc, "encoder.key", carry: "output")
    }
    y = enc
  }
})",
                   "{}");
  EXPECT_FALSE(c.ok);
  EXPECT_NE(c.diagnostics().find("carry splits a cache computed once between "
                                 "two graphs: it needs once: true"),
            std::string::npos)
      << c.diagnostics();
  auto e = compile(d, R"(
arch bad2 {
  model(enc: f32[batch, enc_seq, 8]) -> (y) {
    for i in 0 .. 2 @ "l.{i}" {
      k = op.cache(enc, "encoder.key", once: true, carry: "both")
    }
    y = enc
  }
})",
                   "{}");
  EXPECT_FALSE(e.ok);
  EXPECT_NE(e.diagnostics().find("both"), std::string::npos) << e.diagnostics();
}
