//===- SymExprTest.cpp - Symbolic dims ------------------------------------===//
#include "ir/SymExpr.h"
#include "ir/Types.h"

#include <gtest/gtest.h>

using archc::ir::SymExpr;

TEST(SymExpr, ConstantsFoldAndPrintBare) {
  EXPECT_EQ((SymExpr(3) + SymExpr(4)).str(), "7");
  EXPECT_EQ((SymExpr(3) * SymExpr(4)).getConstant(), 12);
  EXPECT_TRUE(SymExpr(0).isConstant());
}

TEST(SymExpr, CanonicalSumPrintsOneWay) {
  SymExpr p = SymExpr::symbol("past"), s = SymExpr::symbol("seq");
  EXPECT_EQ((p + s).str(), "(past + seq)");
  EXPECT_EQ((s + p).str(), "(past + seq)");
  EXPECT_EQ(p + s, s + p);
  EXPECT_EQ(s.str(), "seq");
}

TEST(SymExpr, LikeTermsMergeAndCancel) {
  SymExpr s = SymExpr::symbol("seq");
  EXPECT_EQ((s + s).str(), "(2 * seq)");
  EXPECT_EQ((s - s).str(), "0");
  EXPECT_EQ(((s + 1) - 1), s);
}

TEST(SymExpr, ProductsAndPowers) {
  SymExpr b = SymExpr::symbol("batch"), s = SymExpr::symbol("seq");
  EXPECT_EQ((b * s).str(), "(batch * seq)");
  EXPECT_EQ((s * s + s).str(), "(seq * seq + seq)");
  EXPECT_EQ((b * s * SymExpr(4096)).str(), "(4096 * batch * seq)");
}

TEST(SymExpr, SubstituteAndEvaluate) {
  SymExpr p = SymExpr::symbol("past"), s = SymExpr::symbol("seq");
  SymExpr total = p + s;
  EXPECT_EQ(total.substitute({{"past", SymExpr(0)}}), s);
  EXPECT_EQ(total.evaluate({{"past", 2048}, {"seq", 1}}), 2049);
  EXPECT_FALSE(total.evaluate({{"seq", 1}}).has_value());
}

TEST(SymExpr, ExactDivision) {
  SymExpr s = SymExpr::symbol("seq");
  EXPECT_EQ((s * SymExpr(4)).divExact(2), s * SymExpr(2));
  EXPECT_FALSE((s * SymExpr(3)).divExact(2).has_value());
}

TEST(TensorType, Printing) {
  using namespace archc::ir;
  TensorType t(DType::BF16,
               {SymExpr::symbol("batch"), SymExpr::symbol("seq"), 4096});
  EXPECT_EQ(t.str(), "tensor<batch x seq x 4096 x bf16>");
  EXPECT_EQ(TensorType(DType::F32, {}).str(), "tensor<f32>");
  EXPECT_EQ(TensorType::unknown().str(), "?");
  EXPECT_EQ(t.numElements().str(), "(4096 * batch * seq)");
}
