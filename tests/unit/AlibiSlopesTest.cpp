//===- AlibiSlopesTest.cpp - ALiBi head slopes ----------------------------===//
#include "emit/lowering/AlibiSlopes.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace archc;

TEST(AlibiSlopes, PowerOfTwoHeads) {
  // 8 heads: 2^(-8k/8) = 2^-k, exact in float32 and bfloat16.
  std::vector<float> s = alibiSlopes(8, false);
  ASSERT_EQ(s.size(), 8u);
  for (int k = 1; k <= 8; ++k)
    EXPECT_EQ(s[k - 1], std::ldexp(1.0f, -k));
  EXPECT_EQ(alibiSlopes(8, true), s);
  // 4 heads: 2^(-2k).
  std::vector<float> four = alibiSlopes(4, false);
  ASSERT_EQ(four.size(), 4u);
  EXPECT_EQ(four[0], 0.25f);
  EXPECT_EQ(four[3], std::ldexp(1.0f, -8));
}

TEST(AlibiSlopes, RemainingHeadsTakeEveryOtherSlopeOfTwiceAsMany) {
  // 12 heads: the 8 slopes of 8 heads, then 2^(-k/2) for k = 1, 3, 5, 7
  // (every other slope of 16 heads).
  std::vector<float> s = alibiSlopes(12, false);
  ASSERT_EQ(s.size(), 12u);
  EXPECT_EQ(s[7], std::ldexp(1.0f, -8));
  EXPECT_FLOAT_EQ(s[8], static_cast<float>(std::pow(2.0, -0.5)));
  EXPECT_FLOAT_EQ(s[9], static_cast<float>(std::pow(2.0, -1.5)));
  EXPECT_FLOAT_EQ(s[11], static_cast<float>(std::pow(2.0, -3.5)));
  // One head: 2^-8.
  EXPECT_EQ(alibiSlopes(1, false), std::vector<float>{std::ldexp(1.0f, -8)});
}

TEST(AlibiSlopes, Bfloat16RoundsToNearestEven) {
  // 2^-0.5 = 0.70710678... lies between the bfloat16 values 0.70703125
  // (0x3f35) and 0.7109375 (0x3f36); the nearer is the first.
  std::vector<float> s = alibiSlopes(12, true);
  EXPECT_EQ(s[8], 0.70703125f);
  // 16 heads: 2^(-k/2); 2^-1.5 = 0.35355339 -> 0.353515625 (0x3eb5).
  std::vector<float> sixteen = alibiSlopes(16, true);
  EXPECT_EQ(sixteen[2], 0.353515625f);
  EXPECT_EQ(sixteen[1], 0.5f);
}
