//===- RopeTablesTest.cpp - RoPE frequencies ------------------------------===//
#include "emit/lowering/RopeTables.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace archc;

namespace {
std::unique_ptr<ir::Op> ropeOp(double theta, int64_t dim,
                               std::shared_ptr<ir::AttrDict> scaling) {
  auto op = std::make_unique<ir::Op>(ir::OpKind::Rope, ir::Location{});
  op->setAttr("theta", theta);
  op->setAttr("dim", dim);
  if (scaling)
    op->setAttr("scaling", scaling);
  return op;
}
} // namespace

TEST(RopeTables, DefaultFrequencies) {
  auto op = ropeOp(10000.0, 8, nullptr);
  RopeTables t;
  std::string err;
  ASSERT_TRUE(computeRope(*op, 8, t, err)) << err;
  ASSERT_EQ(t.invFreq.size(), 4u);
  EXPECT_FLOAT_EQ(t.invFreq[0], 1.0f);
  EXPECT_FLOAT_EQ(t.invFreq[1],
                  static_cast<float>(1.0 / std::pow(10000.0, 0.25)));
  EXPECT_EQ(t.attentionFactor, 1.0);
}

TEST(RopeTables, Llama3ScalesLowFrequenciesOnly) {
  auto sc = std::make_shared<ir::AttrDict>();
  sc->entries = {{"rope_type", std::string("llama3")},
                 {"factor", 8.0},
                 {"low_freq_factor", 1.0},
                 {"high_freq_factor", 4.0},
                 {"original_max_position_embeddings", int64_t(8192)}};
  auto op = ropeOp(500000.0, 128, sc);
  RopeTables t;
  std::string err;
  ASSERT_TRUE(computeRope(*op, 128, t, err)) << err;
  // Highest frequency (short wavelength) unchanged, lowest divided by 8.
  EXPECT_FLOAT_EQ(t.invFreq[0], 1.0f);
  double lowest = 1.0 / std::pow(500000.0, 126.0 / 128.0);
  EXPECT_FLOAT_EQ(t.invFreq[63], static_cast<float>(lowest / 8.0));
}

TEST(RopeTables, YarnAttentionFactor) {
  auto sc = std::make_shared<ir::AttrDict>();
  sc->entries = {{"rope_type", std::string("yarn")},
                 {"factor", 32.0},
                 {"original_max_position_embeddings", int64_t(4096)}};
  auto op = ropeOp(150000.0, 64, sc);
  RopeTables t;
  std::string err;
  ASSERT_TRUE(computeRope(*op, 64, t, err)) << err;
  EXPECT_NEAR(t.attentionFactor, 0.1 * std::log(32.0) + 1.0, 1e-12);
  EXPECT_FLOAT_EQ(t.invFreq[0], 1.0f); // extrapolated (high frequency)
}

TEST(RopeTables, MissingParametersAreReported) {
  auto sc = std::make_shared<ir::AttrDict>();
  sc->entries = {{"rope_type", std::string("linear")}};
  auto op = ropeOp(10000.0, 8, sc);
  RopeTables t;
  std::string err;
  EXPECT_FALSE(computeRope(*op, 8, t, err));
  EXPECT_NE(err.find("needs 'factor'"), std::string::npos);
}
