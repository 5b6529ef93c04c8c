//===- CompressedAttentionTest.cpp - DeepSeek-V4's ops --------------------===//
//
// reduce_sum / reduce_mean, topk_mask, compress (state, flags, errors),
// attention with extra keys, hash routing (route with a table), integral
// constants next to integer tensors, the `set` and `model_dtype` built-ins,
// and the profile of compressed states (stride, float32 state, key density,
// extra keys of attention).
//
//===----------------------------------------------------------------------===//
#include "TestUtil.h"

#include "analysis/Profile.h"
#include "ir/OpRules.h"

#include <gtest/gtest.h>

using namespace archc;
using namespace archc::test;

namespace {

/// The type of the first op with this mnemonic's result `r`.
std::string typeOf(const ir::Module &m, const std::string &mnemonic,
                   unsigned r = 0) {
  std::string out;
  ir::walk(m.graph.body, [&](const ir::Op &op) {
    if (out.empty() && op.getMnemonic() == mnemonic && op.getNumResults() > r)
      out = op.getResult(r)->type.str();
  });
  return out;
}

// One compressed-attention layer: window keys, entries of every 2 tokens
// (overlapping windows of 4), an indexer-style score and top-1 selection.
const char *kCompressedArch = R"(
arch v4ish {
  config { ratio: int = 2 }
  model(x: f32[batch, seq, 8], pos: i64[batch, seq]) -> (y) {
    for i in 0 .. 2 @ "l.{i}" {
      q = op.reshape(op.matmul(x, param("wq", [8, 8])), [batch, seq, 2, 4])
      k = op.cache(op.reshape(op.matmul(x, param("wk", [8, 4])), [batch, seq, 1, 4]), "kv")
      e, valid = op.compress(op.matmul(x, param("wkv", [8, 8])), op.matmul(x, param("wg", [8, 8])),
                             param("ape", [ratio, 8]), ratio: ratio, overlap: true)
      e = op.cache(op.rope(op.reshape(e, [batch, seq, 1, 4]), pos - (ratio - 1), theta: 10000.0), "compressed")
      s = op.reduce_sum(op.matmul(q, op.transpose(e, [0, 2, 1, 3]), transpose_b: true), axes: [2])
      o = op.attention(q, k, k, window: 3, extra_k: e, extra_v: e,
                       extra_mask: op.topk_mask(s, k: 1, valid: valid))
      x = x + op.reshape(o, [batch, seq, 8])
    }
    y = x
  }
})";

} // namespace

TEST(CompressedAttention, ReductionsDropOrKeepAxes) {
  ScratchDir d;
  std::string arch = R"(
arch r {
  model(x: f32[batch, seq, 4, 6]) -> (a, b, c) {
    a = op.reduce_sum(x, axes: [2])
    b = op.reduce_mean(x, axes: [-1, 2], keepdims: true)
    c = op.reduce_sum(x, axes: [0, 1])
  }
})";
  auto c = compile(d, arch, "{}");
  ASSERT_TRUE(c.ok) << c.diagnostics();
  const auto &outs = c.module().graph.body.getTerminator()->operands;
  EXPECT_EQ(outs[0]->type.str(), "tensor<batch x seq x 6 x f32>");
  EXPECT_EQ(outs[1]->type.str(), "tensor<batch x seq x 1 x 1 x f32>");
  EXPECT_EQ(outs[2]->type.str(), "tensor<4 x 6 x f32>");

  std::string twice = arch;
  twice.replace(twice.find("[-1, 2]"), 7, "[-1, 3]");
  c = compile(d, twice, "{}");
  ASSERT_FALSE(c.ok);
  EXPECT_NE(c.diagnostics().find("test.arch:5:9: error: reduce_mean: axis 3 "
                                 "is listed twice"),
            std::string::npos)
      << c.diagnostics();

  std::string range = arch;
  range.replace(range.find("axes: [2])"), 10, "axes: [4])");
  c = compile(d, range, "{}");
  ASSERT_FALSE(c.ok);
  EXPECT_NE(c.diagnostics().find("reduce_sum: axis 4 is out of range for "
                                 "tensor<batch x seq x 4 x 6 x f32>"),
            std::string::npos)
      << c.diagnostics();
}

TEST(CompressedAttention, TopkMaskChecksScoresAndFlags) {
  ScratchDir d;
  std::string arch = R"(
arch t {
  model(s: f32[batch, seq, 5], v: bool[batch, 5]) -> (m) {
    m = op.topk_mask(s, k: 2, valid: v)
  }
})";
  auto c = compile(d, arch, "{}");
  ASSERT_TRUE(c.ok) << c.diagnostics();
  EXPECT_EQ(typeOf(c.module(), "topk_mask"), "tensor<batch x seq x 5 x bool>");

  std::string flags = arch;
  flags.replace(flags.find("bool[batch, 5]"), 14, "bool[batch, 4]");
  c = compile(d, flags, "{}");
  ASSERT_FALSE(c.ok);
  EXPECT_NE(c.diagnostics().find("topk_mask: valid tensor<batch x 4 x bool> "
                                 "must be bool [batch, keys] = [batch, 5]"),
            std::string::npos)
      << c.diagnostics();

  std::string k = arch;
  k.replace(k.find("k: 2"), 4, "k: 0");
  c = compile(d, k, "{}");
  ASSERT_FALSE(c.ok);
  EXPECT_NE(c.diagnostics().find("op.topk_mask: k must be at least 1, got 0"),
            std::string::npos)
      << c.diagnostics();
}

TEST(CompressedAttention, CompressOwnsAConstantStateAndFlagsAllKeys) {
  ScratchDir d;
  // Full-sequence form: entries for the new tokens, one flag per token.
  auto c = compile(d, kCompressedArch, "{}");
  ASSERT_TRUE(c.ok) << c.diagnostics();
  EXPECT_EQ(typeOf(c.module(), "compress", 0), "tensor<batch x seq x 4 x f32>");
  EXPECT_EQ(typeOf(c.module(), "compress", 1), "tensor<batch x seq x bool>");
  // Integral constants next to integer positions are integers.
  EXPECT_EQ(typeOf(c.module(), "sub"), "tensor<batch x seq x i64>");

  // With the cache: a [batch, 2 ratio - 1, 2 C] float32 state; the flags
  // cover past and new keys, as the entries' cache and the top-k mask.
  c = compile(d, kCompressedArch, "{}", EmitTarget::IR,
              {"shape-inference", "kv-cache", "shape-inference"});
  ASSERT_TRUE(c.ok) << c.diagnostics();
  const auto &g = c.module().graph;
  ASSERT_EQ(g.stateInputs.size(), 3u);
  EXPECT_EQ(g.stateInputs[1].pattern, "past_key_values.{i}.compress_state");
  EXPECT_EQ(g.stateInputs[1].type.str(), "tensor<batch x 3 x 16 x f32>");
  EXPECT_EQ(g.stateOutputs[1].type, g.stateInputs[1].type);
  EXPECT_EQ(g.stateInputs[2].type.str(), "tensor<batch x 1 x past x 4 x f32>");
  EXPECT_EQ(typeOf(c.module(), "compress", 1),
            "tensor<batch x (past + seq) x bool>");
  EXPECT_EQ(typeOf(c.module(), "topk_mask"),
            "tensor<batch x seq x (past + seq) x bool>");

  // Without overlap the state is the ratio - 1 inputs of the open window.
  std::string hca = R"(
arch hca {
  model(x: f32[batch, seq, 8]) -> (y) {
    for i in 0 .. 1 @ "l.{i}" {
      e, v = op.compress(x, x, param("ape", [4, 8]), ratio: 4, state: "hca")
      x = x + e
    }
    y = x
  }
})";
  c = compile(d, hca, "{}", EmitTarget::IR,
              {"shape-inference", "kv-cache", "shape-inference"});
  ASSERT_TRUE(c.ok) << c.diagnostics();
  EXPECT_EQ(c.module().graph.stateInputs[0].pattern, "past_key_values.{i}.hca");
  EXPECT_EQ(c.module().graph.stateInputs[0].type.str(),
            "tensor<batch x 3 x 16 x f32>");
}

TEST(CompressedAttention, CompressChecksItsOperands) {
  ScratchDir d;
  std::string arch = R"(
arch c {
  model(x: f32[batch, seq, 6]) -> (y) {
    for i in 0 .. 1 @ "l.{i}" {
      e, v = op.compress(x, x, param("ape", [2, 6]), ratio: 2, overlap: true)
      x = x + op.concat([e, e], axis: -1)
    }
    y = x
  }
})";
  auto c = compile(d, arch, "{}");
  ASSERT_TRUE(c.ok) << c.diagnostics();

  std::string ape = arch;
  ape.replace(ape.find("[2, 6]"), 6, "[3, 6]");
  c = compile(d, ape, "{}");
  ASSERT_FALSE(c.ok);
  EXPECT_NE(c.diagnostics().find("test.arch:5:14: error: compress: ape "
                                 "tensor<3 x 6 x f32> must be [ratio, "
                                 "channels] = [2, 6]"),
            std::string::npos)
      << c.diagnostics();

  std::string ratio = arch;
  ratio.replace(ratio.find("ratio: 2"), 8, "ratio: 1");
  c = compile(d, ratio, "{}");
  ASSERT_FALSE(c.ok);
  EXPECT_NE(
      c.diagnostics().find("op.compress: ratio must be at least 2, got 1"),
      std::string::npos)
      << c.diagnostics();

  std::string gate = arch;
  gate.replace(gate.find("op.compress(x, x,"), 17,
               "op.compress(x, op.reshape(x, [batch, seq, 2, 3]),");
  c = compile(d, gate, "{}");
  ASSERT_FALSE(c.ok);
  EXPECT_NE(c.diagnostics().find("compress: expects kv and gate as float "
                                 "[batch, seq, channels] of one type"),
            std::string::npos)
      << c.diagnostics();

  std::string outside = R"(
arch c {
  model(x: f32[batch, seq, 6]) -> (y) {
    y, v = op.compress(x, x, param("ape", [2, 6]), ratio: 2)
  }
})";
  c = compile(d, outside, "{}");
  ASSERT_FALSE(c.ok);
  EXPECT_NE(c.diagnostics().find("op.compress must be used inside a layer "
                                 "loop"),
            std::string::npos)
      << c.diagnostics();
}

TEST(CompressedAttention, AttentionChecksItsExtraKeys) {
  ScratchDir d;
  std::string arch = R"(
arch a {
  model(q: f32[batch, seq, 2, 4], k: f32[batch, seq, 1, 4], e: f32[batch, seq, 1, 4],
        m: bool[batch, seq]) -> (o) {
    o = op.attention(q, k, k, extra_k: e, extra_v: e, extra_mask: m)
  }
})";
  auto c = compile(d, arch, "{}");
  ASSERT_TRUE(c.ok) << c.diagnostics();

  std::string wide = arch;
  wide.replace(wide.find("e: f32[batch, seq, 1, 4]"), 24,
               "e: f32[batch, seq, 1, 8]");
  c = compile(d, wide, "{}");
  ASSERT_FALSE(c.ok);
  EXPECT_NE(c.diagnostics().find("attention: extra keys tensor<batch x seq x "
                                 "1 x 8 x f32> and values tensor<batch x seq "
                                 "x 1 x 8 x f32> must have the types of k"),
            std::string::npos)
      << c.diagnostics();

  std::string mask = arch;
  mask.replace(mask.find("m: bool[batch, seq]"), 19, "m: f32[batch, seq]");
  c = compile(d, mask, "{}");
  ASSERT_FALSE(c.ok);
  EXPECT_NE(c.diagnostics().find("extra_mask tensor<batch x seq x f32> must "
                                 "be bool [batch, keys] or [batch, seq, keys]"),
            std::string::npos)
      << c.diagnostics();

  std::string lone = arch;
  lone.replace(lone.find("extra_v: e, "), 12, "");
  c = compile(d, lone, "{}");
  ASSERT_FALSE(c.ok);
  EXPECT_NE(c.diagnostics().find("op.attention: extra_k and extra_v go "
                                 "together"),
            std::string::npos)
      << c.diagnostics();
}

TEST(CompressedAttention, HashRoutingReadsTheTable) {
  ScratchDir d;
  std::string arch = R"(
arch h {
  model(ids: i64[batch, seq], x: f32[batch, seq, 4]) -> (w, idx) {
    w, idx = op.route(op.matmul(x, param("gate", [4, 8])), top_k: 2, scoring: "sqrtsoftplus",
                      normalize: true, table: param("tid2eid", [16, 2], dtype: "i64"), tokens: ids)
  }
})";
  auto c = compile(d, arch, "{}");
  ASSERT_TRUE(c.ok) << c.diagnostics();
  EXPECT_EQ(typeOf(c.module(), "route", 1), "tensor<batch x seq x 2 x i64>");

  std::string k = arch;
  k.replace(k.find("[16, 2]"), 7, "[16, 3]");
  c = compile(d, k, "{}");
  ASSERT_FALSE(c.ok);
  EXPECT_NE(c.diagnostics().find("route: table tensor<16 x 3 x i64> must be "
                                 "integer [vocab, top_k] with top_k = 2"),
            std::string::npos)
      << c.diagnostics();

  std::string bias = arch;
  bias.replace(bias.find("normalize: true,"), 16,
               "normalize: true, bias: param(\"b\", [8]),");
  c = compile(d, bias, "{}");
  ASSERT_FALSE(c.ok);
  EXPECT_NE(c.diagnostics().find("a routing table fixes the selection"),
            std::string::npos)
      << c.diagnostics();

  std::string lone = arch;
  lone.replace(lone.find(", tokens: ids"), 13, "");
  c = compile(d, lone, "{}");
  ASSERT_FALSE(c.ok);
  EXPECT_NE(c.diagnostics().find("op.route: table and tokens go together"),
            std::string::npos)
      << c.diagnostics();
}

TEST(CompressedAttention, SetAndModelDtypeBuiltins) {
  ScratchDir d;
  std::string arch = R"(
arch b {
  config {
    inert torch_dtype
    rope_scaling: dict?
    let scaled = set(rope_scaling, "attention_factor", 1.0)
    let fresh = set(none, "type", "yarn")
    check get(scaled, "attention_factor", 0.0) == 1.0 && get(scaled, "factor", 0) == 4, "set keeps the other keys"
    check get(fresh, "type", "") == "yarn", "set on none"
    check get(rope_scaling, "attention_factor", 7.0) == 7.0, "set copies"
  }
  model(x: f32[batch, 4]) -> (y) {
    y = op.cast(x, dtype: model_dtype())
  }
})";
  auto c = compile(
      d, arch, R"({"rope_scaling": {"factor": 4}, "torch_dtype": "bfloat16"})");
  ASSERT_TRUE(c.ok) << c.diagnostics();
  EXPECT_EQ(typeOf(c.module(), "cast"), "tensor<batch x 4 x bf16>");
}

TEST(CompressedAttention, ProfileCountsEntriesNotTokens) {
  ScratchDir d;
  auto c = compile(d, kCompressedArch, R"({"ratio": 4})", EmitTarget::IR,
                   {"shape-inference", "kv-cache", "shape-inference"});
  ASSERT_TRUE(c.ok) << c.diagnostics();
  ModelFacts f = computeModelFacts(c.module());
  ASSERT_EQ(f.states.size(), 3u);
  EXPECT_EQ(f.states[0].name, "kv");
  EXPECT_EQ(f.states[0].window, 3); // the attention's window, not the entries'
  EXPECT_EQ(f.states[1].name, "compress_state");
  EXPECT_EQ(f.states[1].elementsPerSequence, 7 * 16);
  EXPECT_EQ(f.states[1].bits, 32);
  EXPECT_EQ(f.states[2].name, "compressed");
  EXPECT_EQ(f.states[2].elementsPerToken, 4);
  EXPECT_EQ(f.states[2].stride, 4);
  EXPECT_EQ(f.states[2].window, 0);
  // 2 layers x (4 window keys + 4 / 4 entry elements) x 2 B per token.
  EXPECT_DOUBLE_EQ(f.kvBytesPerToken(16), 2 * (4 + 1) * 2);
  // At 10 tokens: windows of 3, 2 complete entries, the f32 states.
  EXPECT_DOUBLE_EQ(f.kvBytes(10, 1, 16),
                   2 * (3 * 4 * 2 + 2 * 4 * 2 + 7 * 16 * 4));

  // Attention: decode at past 9 sees 3 window keys and min(1, 10 / 4) = 1
  // selected entry: 2 heads x (4 + 4) x 4 keys MACs.
  Precision bits;
  auto ops = profileOps(c.module(), ProfilePoint{1, 1, 9}, bits);
  double attnMacs = 0, scoreMacs = 0;
  for (const OpProfile &p : ops) {
    if (p.op->getKind() == ir::OpKind::Attention)
      attnMacs += p.cost.macs;
    if (p.op->getKind() == ir::OpKind::MatMul &&
        p.op->getResult()->type.rank() == 4)
      scoreMacs += p.cost.macs;
  }
  EXPECT_DOUBLE_EQ(attnMacs, 2 * (2 * (4 + 4) * 4));
  // The score grid over the 10 cached positions counts its 10 / 4 entries.
  EXPECT_DOUBLE_EQ(scoreMacs, 2 * (2 * 10 * 4 / 4.0));
}

TEST(CompressedAttention, IntegralConstantsJoinIntegerTensors) {
  ScratchDir d;
  std::string arch = R"(
arch p {
  model(pos: i64[batch, seq]) -> (y) {
    y = (pos - 3) * -1 + 2
  }
})";
  auto c = compile(d, arch, "{}");
  ASSERT_TRUE(c.ok) << c.diagnostics();
  EXPECT_EQ(c.module().graph.body.getTerminator()->getOperand(0)->type.str(),
            "tensor<batch x seq x i64>");
  // No integer division or fractional constants.
  for (const char *bad : {"pos / 2", "pos + 0.5"}) {
    std::string a = arch;
    a.replace(a.find("(pos - 3) * -1 + 2"), 18, bad);
    c = compile(d, a, "{}");
    ASSERT_FALSE(c.ok) << bad;
    EXPECT_NE(c.diagnostics().find("element types differ: tensor<batch x seq "
                                   "x i64> and tensor<f32>"),
              std::string::npos)
        << c.diagnostics();
  }
}
