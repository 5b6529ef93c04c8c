//===- SafetensorsTest.cpp - Checkpoint reading ---------------------------===//
#include "checkpoint/Safetensors.h"

#include <gtest/gtest.h>

#include <cstring>

using namespace archc;

namespace {
std::string file(const std::string &header, size_t dataBytes) {
  std::string json = header;
  while ((8 + json.size()) % 8)
    json += ' ';
  std::string out(8, '\0');
  uint64_t n = json.size();
  std::memcpy(out.data(), &n, 8);
  return out + json + std::string(dataBytes, '\x01');
}

bool parse(const std::string &bytes, std::vector<StTensor> &t,
           std::string &err) {
  return parseSafetensorsHeader(reinterpret_cast<const uint8_t *>(bytes.data()),
                                bytes.size(), "x", t, err);
}
} // namespace

TEST(Safetensors, ParsesTensorsAndMetadata) {
  std::string f = file(R"({"__metadata__":{"format":"pt"},
    "a":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]},
    "b":{"dtype":"BF16","shape":[4],"data_offsets":[24,32]}})",
                       32);
  std::vector<StTensor> t;
  std::string err;
  ASSERT_TRUE(parse(f, t, err)) << err;
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t[0].name, "a");
  EXPECT_EQ(t[0].shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(t[1].dtype, StDType::BF16);
  EXPECT_EQ(t[1].size, 8u);
}

TEST(Safetensors, TruncatedDataIsReported) {
  std::string f =
      file(R"({"a":{"dtype":"F32","shape":[8],"data_offsets":[0,32]}})", 16);
  std::vector<StTensor> t;
  std::string err;
  EXPECT_FALSE(parse(f, t, err));
  EXPECT_NE(err.find("truncated"), std::string::npos) << err;
}

TEST(Safetensors, TruncatedHeaderIsReported) {
  std::string f =
      file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", 4);
  std::vector<StTensor> t;
  std::string err;
  EXPECT_FALSE(parse(f.substr(0, 20), t, err));
  EXPECT_NE(err.find("exceeds the file"), std::string::npos) << err;
  EXPECT_FALSE(parse(f.substr(0, 5), t, err));
}

TEST(Safetensors, InconsistentSizeAndOverlapAreErrors) {
  std::vector<StTensor> t;
  std::string err;
  EXPECT_FALSE(parse(
      file(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8), t,
      err));
  EXPECT_NE(err.find("need 12"), std::string::npos) << err;
  t.clear();
  EXPECT_FALSE(
      parse(file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},
                            "b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                 12),
            t, err));
  EXPECT_NE(err.find("overlap"), std::string::npos) << err;
}

TEST(Safetensors, UnknownDtypeAndBadJsonAreErrors) {
  std::vector<StTensor> t;
  std::string err;
  EXPECT_FALSE(
      parse(file(R"({"a":{"dtype":"Q4","shape":[1],"data_offsets":[0,1]}})", 1),
            t, err));
  EXPECT_NE(err.find("unsupported dtype"), std::string::npos);
  EXPECT_FALSE(parse(file("{not json", 0), t, err));
  EXPECT_NE(err.find("not valid JSON"), std::string::npos);
}

namespace {
// The byte count of a shape is checked: 2^61 F64 elements are 2^64 bytes,
// which wrapped to 0 and matched an empty data range.
TEST(Safetensors, ByteCountOverflowIsAnError) {
  std::vector<StTensor> t;
  std::string err;
  EXPECT_FALSE(parse(file(R"({"w":{"dtype":"F64","shape":[2147483648,)"
                          R"(1073741824],"data_offsets":[0,0]}})",
                          0),
                     t, err));
  EXPECT_NE(err.find("need more than 2^64 bytes"), std::string::npos) << err;
  // The element count itself overflowing is refused as before.
  EXPECT_FALSE(parse(file(R"({"w":{"dtype":"U8","shape":[4294967296,)"
                          R"(4294967296,2],"data_offsets":[0,0]}})",
                          0),
                     t, err));
  EXPECT_NE(err.find("overflows"), std::string::npos) << err;
}
} // namespace
