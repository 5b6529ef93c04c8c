//===- HardeningTest.cpp - Checked arithmetic and bounded file reads ------===//
#include "support/CheckedArith.h"
#include "support/FileRead.h"

#include <gtest/gtest.h>

#include <limits>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include <sys/stat.h>
#include <unistd.h>

using namespace archc;

namespace {

constexpr int64_t kMin = INT64_MIN, kMax = INT64_MAX;

TEST(CheckedArith, AddSubMulNegDetectOverflow) {
  EXPECT_EQ(checkedAdd(kMax - 1, 1), kMax);
  EXPECT_FALSE(checkedAdd(kMax, 1));
  EXPECT_FALSE(checkedAdd(kMin, -1));
  EXPECT_EQ(checkedSub(kMin + 1, 1), kMin);
  EXPECT_FALSE(checkedSub(kMin, 1));
  EXPECT_FALSE(checkedSub(0, kMin));
  EXPECT_EQ(checkedMul(int64_t(1) << 31, int64_t(1) << 31), int64_t(1) << 62);
  EXPECT_FALSE(checkedMul(int64_t(1) << 32, int64_t(1) << 31));
  EXPECT_FALSE(checkedMul(kMin, -1));
  EXPECT_EQ(checkedNeg(kMax), kMin + 1);
  EXPECT_FALSE(checkedNeg(kMin));
}

TEST(CheckedArith, DivisionAndFlooredRemainder) {
  EXPECT_FALSE(checkedDiv(1, 0));
  EXPECT_FALSE(checkedDiv(kMin, -1)); // the quotient 2^63 does not fit
  EXPECT_EQ(checkedDiv(kMin, 1), kMin);
  EXPECT_EQ(checkedDiv(-7, 2), -3); // truncating
  EXPECT_FALSE(flooredMod(1, 0));
  EXPECT_EQ(flooredMod(kMin, -1), 0); // C++'s % is undefined here
  EXPECT_EQ(flooredMod(kMax, -1), 0);
  EXPECT_EQ(flooredMod(-7, 2), 1); // the sign of the divisor
  EXPECT_EQ(flooredMod(7, -2), -1);
  EXPECT_EQ(flooredMod(kMin, kMax), kMax - 1);
  EXPECT_EQ(flooredMod(kMax, kMin), -1);
}

TEST(CheckedArith, DoubleToIntRejectsWhatDoesNotFit) {
  EXPECT_EQ(doubleToInt(2.9), 2);
  EXPECT_EQ(doubleToInt(-2.9), -2);
  EXPECT_EQ(doubleToInt(-9223372036854775808.0), kMin);
  EXPECT_FALSE(doubleToInt(9223372036854775808.0));
  EXPECT_EQ(doubleToInt(9223372036854774784.0), 9223372036854774784);
  EXPECT_FALSE(doubleToInt(-9223372036854777856.0));
  EXPECT_FALSE(doubleToInt(1e300));
  EXPECT_FALSE(doubleToInt(std::numeric_limits<double>::infinity()));
  EXPECT_FALSE(doubleToInt(std::numeric_limits<double>::quiet_NaN()));
}

std::string scratch(const std::string &name) {
  auto dir = std::filesystem::temp_directory_path() /
             ("archc-hardening-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  return (dir / name).string();
}

TEST(FileRead, ReadsRegularFilesWithinTheLimit) {
  std::string path = scratch("small.txt");
  std::ofstream(path) << "hello";
  std::string text, err;
  ASSERT_TRUE(readRegularFile(path, 5, text, err)) << err;
  EXPECT_EQ(text, "hello");
  EXPECT_FALSE(readRegularFile(path, 4, text, err));
  EXPECT_EQ(err, "the file has 5 bytes, more than the limit of 4 bytes");
  EXPECT_FALSE(readRegularFile(scratch("missing"), 4, text, err));
  EXPECT_EQ(err, "No such file or directory");
}

TEST(FileRead, RefusesNonRegularFilesWithoutBlocking) {
  std::string text, err;
  EXPECT_FALSE(readRegularFile("/dev/zero", kMaxConfigBytes, text, err));
  EXPECT_EQ(err, "it is a character device, not a regular file");
  std::string dir = scratch("");
  EXPECT_FALSE(readRegularFile(dir, kMaxConfigBytes, text, err));
  EXPECT_EQ(err, "it is a directory, not a regular file");
  // A FIFO with no writer: a blocking open would never return.
  std::string fifo = scratch("fifo");
  ::unlink(fifo.c_str());
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_FALSE(readRegularFile(fifo, kMaxConfigBytes, text, err));
  EXPECT_EQ(err, "it is a FIFO, not a regular file");
  uint64_t size = 0;
  EXPECT_EQ(openRegularFile(fifo, size, err), -1);
  ::unlink(fifo.c_str());
}

} // namespace
