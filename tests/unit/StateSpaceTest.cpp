//===- StateSpaceTest.cpp - selective_scan, ssd_scan, non-finite JSON -----===//
#include "TestUtil.h"

#include "analysis/Profile.h"
#include "ir/OpRules.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace archc;
using namespace archc::test;

namespace {
// A Mamba-2-like block: conv over x | B | C, the SSD scan with 4 heads of 2
// and 2 groups of B/C (state 3), then a Mamba-1 selective scan over 8
// channels with state 5.
const char *kScanArch = R"(
arch ssm {
  config { groups: int = 2 }
  model(x: f32[batch, seq, 8]) -> (y) {
    for i in 0 .. 2 @ "l.{i}" {
      xbc = op.causal_conv1d(op.matmul(x, param("w", [8, 20])), param("conv", [20, 1, 4]))
      xs, b, c = op.split(xbc, [8, 6, 6])
      dt = op.softplus(op.matmul(x, param("wdt", [8, 4])))
      h = op.ssd_scan(op.reshape(xs, [batch, seq, 4, 2]), dt, param("A", [4]),
                      op.reshape(b, [batch, seq, groups, 6 / groups]),
                      op.reshape(c, [batch, seq, groups, 6 / groups]), chunk: 3)
      u = op.reshape(h, [batch, seq, 8])
      s = op.selective_scan(u, op.softplus(u), param("A1", [8, 5]),
                            op.matmul(x, param("wb", [8, 5])),
                            op.matmul(x, param("wc", [8, 5])), state: "scan_state")
      x = x + s
    }
    y = x
  }
})";
} // namespace

TEST(StateSpace, ScanStatesAreConstantSizeFloat32) {
  ScratchDir d;
  auto c = compile(d, kScanArch, "{}", EmitTarget::IR,
                   {"shape-inference", "kv-cache", "shape-inference"});
  ASSERT_TRUE(c.ok) << c.diagnostics();
  const auto &g = c.module().graph;
  ASSERT_EQ(g.stateInputs.size(), 3u);
  EXPECT_EQ(g.stateInputs[0].pattern, "past_key_values.{i}.conv_state");
  EXPECT_EQ(g.stateInputs[0].type.str(), "tensor<batch x 20 x 3 x f32>");
  // ssd_scan: [batch, heads, head_dim, state]; selective_scan: [batch,
  // channels, state].
  EXPECT_EQ(g.stateInputs[1].pattern, "past_key_values.{i}.ssm_state");
  EXPECT_EQ(g.stateInputs[1].type.str(), "tensor<batch x 4 x 2 x 3 x f32>");
  EXPECT_EQ(g.stateOutputs[1].type, g.stateInputs[1].type);
  EXPECT_EQ(g.stateInputs[2].pattern, "past_key_values.{i}.scan_state");
  EXPECT_EQ(g.stateInputs[2].type.str(), "tensor<batch x 8 x 5 x f32>");
}

TEST(StateSpace, TwoScansInALayerNeedTheirOwnStateNames) {
  ScratchDir d;
  // Both scans default to "ssm_state": one layer cannot hold two.
  std::string arch = kScanArch;
  arch.replace(arch.find(", state: \"scan_state\""), 21, "");
  auto c = compile(d, arch, "{}", EmitTarget::IR,
                   {"shape-inference", "kv-cache", "shape-inference"});
  ASSERT_FALSE(c.ok);
  EXPECT_NE(c.diagnostics().find("selective_scan: two states named "
                                 "'ssm_state' in one layer"),
            std::string::npos)
      << c.diagnostics();
}

TEST(StateSpace, ProfileCountsTheStatesPerSequence) {
  ScratchDir d;
  auto c = compile(d, kScanArch, "{}", EmitTarget::IR,
                   {"shape-inference", "kv-cache", "shape-inference"});
  ASSERT_TRUE(c.ok) << c.diagnostics();
  ModelFacts f = computeModelFacts(c.module());
  ASSERT_EQ(f.states.size(), 3u);
  EXPECT_EQ(f.states[0].elementsPerSequence, 20 * 3);
  EXPECT_EQ(f.states[0].bits, 0); // conv state: at the KV bits
  EXPECT_EQ(f.states[1].elementsPerSequence, 4 * 2 * 3);
  EXPECT_EQ(f.states[1].bits, 32);
  EXPECT_EQ(f.states[2].elementsPerSequence, 8 * 5);
  EXPECT_EQ(f.states[2].bits, 32);
  // 2 layers x (60 conv x 1 B at 8-bit KV + (24 + 40) x 4 B); no growth.
  EXPECT_DOUBLE_EQ(f.stateBytesPerSequence(8), 2 * (60 + 64 * 4));
  EXPECT_DOUBLE_EQ(f.kvBytesPerToken(16), 0);
}

TEST(StateSpace, SsdScanChecksGroupsAndHeads) {
  ScratchDir d;
  // 3 groups do not divide 4 heads (6 / 3 = 2 state per group).
  auto c = compile(d, kScanArch, R"({"groups": 3})");
  ASSERT_FALSE(c.ok);
  EXPECT_NE(c.diagnostics().find(
                "ssd_scan: B tensor<batch x seq x 3 x 2 x f32> and C "
                "tensor<batch x seq x 3 x 2 x f32> must be one [batch, seq, "
                "groups, state] type with constant groups dividing the 4 "
                "heads"),
            std::string::npos)
      << c.diagnostics();
  // A must be one scalar per head.
  std::string arch = kScanArch;
  arch.replace(arch.find("param(\"A\", [4])"), 15, "param(\"A\", [8])");
  c = compile(d, arch, "{}");
  ASSERT_FALSE(c.ok);
  EXPECT_NE(c.diagnostics().find("ssd_scan: A tensor<8 x f32> must be "
                                 "[heads] = [4] (one scalar per head)"),
            std::string::npos)
      << c.diagnostics();
}

TEST(StateSpace, SelectiveScanChecksItsOperands) {
  ScratchDir d;
  std::string arch = kScanArch;
  arch.replace(arch.find("param(\"A1\", [8, 5])"), 19, "param(\"A1\", [8, 4])");
  auto c = compile(d, arch, "{}");
  ASSERT_FALSE(c.ok);
  EXPECT_NE(c.diagnostics().find(
                "selective_scan: B tensor<batch x seq x 5 x f32> and C "
                "tensor<batch x seq x 5 x f32> must be [batch, seq, state] = "
                "[batch, seq, 4]"),
            std::string::npos)
      << c.diagnostics();
  arch = kScanArch;
  arch.replace(arch.find("param(\"A1\", [8, 5])"), 19, "param(\"A1\", [6, 5])");
  c = compile(d, arch, "{}");
  ASSERT_FALSE(c.ok);
  EXPECT_NE(c.diagnostics().find("selective_scan: A tensor<6 x 5 x f32> must "
                                 "be [channels, state] with channels = 8"),
            std::string::npos)
      << c.diagnostics();
}

TEST(StateSpace, ScansNeedALayerLoop) {
  ScratchDir d;
  std::string arch = R"(
arch lin {
  model(x: f32[batch, seq, 8]) -> (y) {
    y = op.selective_scan(x, x, param("A", [8, 2]), op.slice(x, axis: 2, start: 0, end: 2),
                          op.slice(x, axis: 2, start: 0, end: 2))
  }
})";
  auto c = compile(d, arch, "{}");
  ASSERT_FALSE(c.ok);
  EXPECT_NE(c.diagnostics().find("layer loop"), std::string::npos)
      << c.diagnostics();
}

TEST(StateSpace, ConfigAcceptsPythonNonFiniteLiterals) {
  ScratchDir d;
  std::string arch = R"(
arch t {
  config {
    lim: list<float>
    n: float
    s: string
    let hi_finite = lim[1] < 1e300
    check !hi_finite, "lim[1] = {lim} should be Infinity"
    check lim[0] < -1e300, "lim[0] should be -Infinity"
    check n == 1.5, "n should be 1.5"
  }
  model(x: f32[batch, seq, 4]) -> (y) { y = x }
})";
  // The literals outside strings become numbers (an infinity in a list is a
  // bound); inside strings they stay text ("NaN" is a string here).
  auto c = compile(d, arch,
                   "{\"lim\": [-Infinity, Infinity], \"n\": 1.5, \"s\": "
                   "\"NaN Infinity\"}");
  EXPECT_TRUE(c.ok) << c.diagnostics();
  // NaN is refused wherever it is, at its position; an infinite scalar at
  // its key.
  c = compile(d, arch, "{\"lim\": [0, 1], \"n\": NaN, \"s\": \"\"}");
  ASSERT_FALSE(c.ok);
  EXPECT_NE(c.diagnostics().find("config.json:1:22: error: config value 'n' "
                                 "is NaN"),
            std::string::npos)
      << c.diagnostics();
  c = compile(d, arch, "{\"lim\": [0, 1], \"n\": Infinity, \"s\": \"\"}");
  ASSERT_FALSE(c.ok);
  EXPECT_NE(c.diagnostics().find("config.json:1:17: error: config value 'n' "
                                 "is Infinity"),
            std::string::npos)
      << c.diagnostics();
  // Other barewords are still invalid JSON, located at the token.
  c = compile(d, arch, "{\"lim\": [0, Infinityx], \"n\": 1, \"s\": \"\"}");
  ASSERT_FALSE(c.ok);
  EXPECT_NE(c.diagnostics().find("config.json:1:"), std::string::npos)
      << c.diagnostics();
  EXPECT_NE(c.diagnostics().find("invalid JSON"), std::string::npos)
      << c.diagnostics();
}

TEST(StateSpace, NonFiniteLiteralsKeepErrorPositions) {
  ScratchDir d;
  std::string arch = R"(
arch t {
  config { a: float
           b: int }
  model(x: f32[batch, seq, 4]) -> (y) { y = x }
})";
  // The error on `b` (a string) points at its key on line 3, after the
  // literals of lines 1-2 were substituted.
  auto c = compile(
      d, arch, "{\"a\": 1.0,\n \"c\": [-Infinity, Infinity],\n  \"b\": \"x\"}");
  ASSERT_FALSE(c.ok);
  EXPECT_NE(c.diagnostics().find("config.json:3:3:"), std::string::npos)
      << c.diagnostics();
}
