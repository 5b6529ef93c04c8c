//===- InputSafetyTest.cpp - Bounds of the hardening rules ----------------===//
//
// Unit tests of the rules of docs/limits.md that a reader or writer holds
// on its own: the bounded JSON reader, safetensors headers (nesting, dtype
// types, tensors named twice), shard indexes (one pass, duplicates, names
// that leave the folder, many shards), paths that stay in a folder (a
// Hugging Face cache's blobs/), the run's input files, the folders a failed
// output set removes, values checked as they stream and conversions that
// overflow.
//
//===----------------------------------------------------------------------===//
#include "TestUtil.h"

#include "checkpoint/QuantizedCheckpoint.h"
#include "checkpoint/Safetensors.h"
#include "checkpoint/TensorSource.h"
#include "emit/weights/WeightElements.h"
#include "support/BoundedJson.h"
#include "support/FileRead.h"
#include "support/OutputSet.h"
#include "support/StagedFile.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>

using namespace archc;
using archc::test::ScratchDir;
namespace fs = std::filesystem;

namespace {
struct Diags {
  SourceMgr sm;
  DiagnosticEngine engine{sm};
  Diags() {
    engine.setCapture(true);
    engine.setErrorLimit(0);
  }
  std::string text() {
    std::string s;
    for (const Diagnostic &d : engine.getCaptured())
      s += engine.render(d);
    return s;
  }
};

std::string safetensors(const std::string &header, const std::string &data) {
  std::string out(8, '\0');
  uint64_t n = header.size();
  std::memcpy(out.data(), &n, 8);
  return out + header + data;
}

std::string floats(std::initializer_list<float> values) {
  std::string s;
  for (float f : values)
    s.append(reinterpret_cast<const char *>(&f), 4);
  return s;
}

bool parseHeader(const std::string &bytes, std::string &err) {
  std::vector<StTensor> t;
  return parseSafetensorsHeader(reinterpret_cast<const uint8_t *>(bytes.data()),
                                bytes.size(), "x", t, err);
}
} // namespace

TEST(BoundedJson, DepthIsCheckedBeforeParsingInLinearTime) {
  std::string deep(2'000'000, '[');
  deep += std::string(2'000'000, ']');
  nlohmann::json j;
  std::string err;
  auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(parseBoundedJson(deep, j, err));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  EXPECT_EQ(err, "nested more than 64 levels deep (the limit) at byte 64");
  EXPECT_FALSE(isBoundedJson(deep, err));
  // 64 levels are within the limit.
  std::string ok = std::string(64, '[') + std::string(64, ']');
  EXPECT_TRUE(parseBoundedJson(ok, j, err)) << err;
  EXPECT_TRUE(isBoundedJson(ok, err)) << err;
}

TEST(BoundedJson, NonFiniteLiteralsOnRequestAndNoBytesQuoted) {
  nlohmann::json j;
  std::string err;
  JsonParseOptions opts;
  opts.allowNonFinite = true;
  ASSERT_TRUE(parseBoundedJson(R"({"t": NaN, "m": [0, Infinity], "s": "NaN"})",
                               j, err, opts))
      << err;
  EXPECT_TRUE(std::isnan(j["t"].get<double>()));
  EXPECT_TRUE(std::isinf(j["m"][1].get<double>()));
  EXPECT_EQ(j["s"], "NaN");
  EXPECT_FALSE(parseBoundedJson(R"({"t": NaN})", j, err));
  // The parser's message without the document's bytes.
  EXPECT_FALSE(isBoundedJson("SECRET-KEY", err));
  EXPECT_EQ(err.find("SECRET"), std::string::npos) << err;
  EXPECT_FALSE(parseBoundedJson("SECRET-KEY", j, err));
  EXPECT_EQ(err.find("SECRET"), std::string::npos) << err;
}

TEST(SafetensorsBounds, NestedDtypeDuplicateAndWrongTypes) {
  std::string err;
  std::string nested(100'000, '[');
  nested += std::string(100'000, ']');
  EXPECT_FALSE(
      parseHeader(safetensors(R"({"w": {"dtype": )" + nested +
                                  R"(, "shape": [1], "data_offsets": [0, 4]}})",
                              floats({1})),
                  err));
  EXPECT_NE(err.find("nested more than 64 levels"), std::string::npos) << err;
  EXPECT_FALSE(parseHeader(
      safetensors(
          R"({"w": {"dtype": 7, "shape": [1], "data_offsets": [0, 4]}})",
          floats({1})),
      err));
  EXPECT_EQ(err, "tensor 'w': dtype is not a string but number");
  EXPECT_FALSE(parseHeader(
      safetensors(
          R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
                      "w": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}})",
          floats({1, 2})),
      err));
  EXPECT_EQ(err, "tensor 'w' appears twice in the header");
}

TEST(SafetensorsBounds, IndexInOnePassWithManyShardsOpenAtOnce) {
  ScratchDir d;
  // 1,500 shards of one tensor each: more than a 1,024 descriptor limit
  // would allow if shards stayed open.
  std::string map;
  for (int i = 0; i < 1500; ++i) {
    std::string name = "t" + std::to_string(i);
    d.write("s" + std::to_string(i) + ".safetensors",
            safetensors("{\"" + name +
                            "\": {\"dtype\": \"F32\", \"shape\": [1], "
                            "\"data_offsets\": [0, 4]}}",
                        floats({float(i)})));
    map += (i ? "," : "") + std::string("\"") + name + "\": \"s" +
           std::to_string(i) + ".safetensors\"";
  }
  std::string index = d.write("model.safetensors.index.json",
                              "{\"weight_map\": {" + map + "}}");
  Diags diags;
  Checkpoint ckpt;
  ASSERT_TRUE(ckpt.open(index, diags.engine)) << diags.text();
  EXPECT_EQ(ckpt.tensors().size(), 1500u);
  const StTensor *t = ckpt.find("t1234");
  ASSERT_TRUE(t);
  float v;
  std::memcpy(&v, t->data, 4);
  EXPECT_EQ(v, 1234.0f);
  // The first shards keep their descriptor for copy_file_range, at most
  // 256 of them; the rest are closed once mapped, their data still there.
  size_t kept = 0;
  for (size_t i = 0; i < 1500; ++i)
    kept +=
        ckpt.file(ckpt.find("t" + std::to_string(i))->file).descriptor() >= 0;
  EXPECT_LE(kept, 256u);
  EXPECT_GE(kept, 1u);
  const StTensor *last = ckpt.find("t1499");
  ASSERT_TRUE(last);
  EXPECT_EQ(ckpt.file(last->file).descriptor(), -1);
  std::memcpy(&v, last->data, 4);
  EXPECT_EQ(v, 1499.0f);
}

TEST(SafetensorsBounds, IndexEntriesThatLeaveTheFolderAreNotOpened) {
  ScratchDir d;
  d.write("outside/x.safetensors", "SECRET");
  fs::create_directories(d.path / "ckpt");
  for (const std::string &shard :
       {std::string("../outside/x.safetensors"),
        (d.path / "outside/x.safetensors").string(), std::string("")}) {
    std::string index = d.write("ckpt/model.safetensors.index.json",
                                "{\"weight_map\": {\"w\": \"" + shard + "\"}}");
    Diags diags;
    Checkpoint ckpt;
    EXPECT_FALSE(ckpt.open(index, diags.engine));
    EXPECT_NE(diags.text().find("archc reads only the shards inside"),
              std::string::npos)
        << diags.text();
    EXPECT_EQ(diags.text().find("SECRET"), std::string::npos);
  }
  // Not read: not an input of the run. (Inodes of earlier tests' deleted
  // files may be reused, so the path it was read through is compared.)
  InputFile found;
  if (findInputFile((d.path / "outside/x.safetensors").string(), found))
    EXPECT_EQ(found.path.find("outside"), std::string::npos) << found.path;
}

TEST(SafetensorsBounds, IndexListingATensorTwiceNamesBothFiles) {
  ScratchDir d;
  std::string index = d.write(
      "model.safetensors.index.json",
      R"({"weight_map": {"w": "a.safetensors", "w": "b.safetensors"}})");
  Diags diags;
  Checkpoint ckpt;
  EXPECT_FALSE(ckpt.open(index, diags.engine));
  EXPECT_NE(diags.text().find("tensor 'w' is listed twice (in "
                              "'a.safetensors' and 'b.safetensors')"),
            std::string::npos)
      << diags.text();
}

TEST(SafetensorsBounds, FolderBindsModelSafetensorsBeforeTheIndex) {
  ScratchDir d;
  d.write(
      "model.safetensors",
      safetensors(
          R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}})",
          floats({1})));
  d.write("model.safetensors.index.json",
          R"({"weight_map": {"w": "absent.safetensors"}})");
  Diags diags;
  Checkpoint ckpt;
  ASSERT_TRUE(ckpt.open(d.path.string(), diags.engine)) << diags.text();
  EXPECT_TRUE(ckpt.find("w"));
}

TEST(PathSafety, StaysInFolderOrAHuggingFaceCachesBlobs) {
  ScratchDir d;
  fs::path snap = d.path / "models--o--m" / "snapshots" / "rev";
  fs::create_directories(snap);
  d.write("models--o--m/blobs/abc", "{}");
  d.write("secret", "x");
  fs::create_symlink("../../blobs/abc", snap / "tokenizer.json");
  fs::create_symlink("../../../secret", snap / "leak.json");
  std::string why;
  EXPECT_TRUE(
      staysInFolder((snap / "tokenizer.json").string(), snap.string(), why))
      << why;
  EXPECT_FALSE(
      staysInFolder((snap / "leak.json").string(), snap.string(), why));
  EXPECT_NE(why.find("outside the folder"), std::string::npos) << why;
  // blobs/ counts only inside a snapshot.
  fs::create_directories(d.path / "plain");
  fs::create_symlink("../models--o--m/blobs/abc", d.path / "plain" / "t.json");
  EXPECT_FALSE(staysInFolder((d.path / "plain" / "t.json").string(),
                             (d.path / "plain").string(), why));
}

TEST(OutputSafety, AnInputOfTheRunIsNeverReplaced) {
  ScratchDir d;
  std::string in = d.write("in.json", "{}");
  std::string text, err;
  ASSERT_TRUE(readRegularFile(in, 1024, text, err)) << err;
  fs::create_symlink(in, d.path / "link.json");
  Diags diags;
  OutputSet set;
  ASSERT_TRUE(set.begin(d.path.string(), diags.engine));
  StagedFile f;
  ASSERT_TRUE(f.open(set.stage("link.json"), set.finalPath("link.json"),
                     diags.engine) &&
              f.write("x", 1, diags.engine) && f.close(diags.engine));
  EXPECT_FALSE(set.publish(diags.engine));
  EXPECT_NE(diags.text().find("an input of this run"), std::string::npos)
      << diags.text();
  std::ifstream back(in);
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(back), {}), "{}");
}

TEST(OutputSafety, AFailedSetRemovesTheFoldersItCreated) {
  ScratchDir d;
  fs::path out = d.path / "a" / "b" / "c";
  {
    Diags diags;
    OutputSet set;
    ASSERT_TRUE(set.begin(out.string(), diags.engine));
    EXPECT_TRUE(fs::is_directory(out));
    // Discarded (an error before publishing).
  }
  EXPECT_FALSE(fs::exists(d.path / "a"));
  // A folder that existed stays.
  fs::create_directories(out);
  {
    Diags diags;
    OutputSet set;
    ASSERT_TRUE(set.begin(out.string(), diags.engine));
  }
  EXPECT_TRUE(fs::is_directory(out));
}

TEST(StreamedValues, NonFiniteValuesAreReportedWithTheTensor) {
  ScratchDir d;
  float nan = std::numeric_limits<float>::quiet_NaN();
  std::string path = d.write(
      "m.safetensors",
      safetensors(
          R"({"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}})",
          floats({1, 2, nan, 4})));
  Diags diags;
  Checkpoint ckpt;
  ASSERT_TRUE(ckpt.open(path, diags.engine)) << diags.text();
  ir::CheckpointQuant none;
  CheckpointBinder binder(ckpt, none);
  const StoredTensor *t = binder.bind("w", {4}, true, false);
  ASSERT_TRUE(t);
  std::unique_ptr<FloatSource> src = binder.source(*t);
  float out[4];
  src->read(0, 2, out);
  EXPECT_TRUE(src->error.empty());
  src->read(2, 2, out);
  EXPECT_EQ(src->error, "'w' holds NaN at element 2 (F32)");
  const uint8_t *raw = ckpt.find("w")->data;
  EXPECT_EQ(firstNonFinite(raw, 4, StDType::F32), 2u);
}

TEST(StreamedValues, Fp8ScalesAreCheckedWhenBound) {
  ScratchDir d;
  float inf = std::numeric_limits<float>::infinity();
  std::string codes(4, '\x38'); // 1.0 in e4m3
  std::string path = d.write(
      "m.safetensors",
      safetensors(
          R"({"w": {"dtype": "F8_E4M3", "shape": [2, 2], "data_offsets": [0, 4]},
                      "w_scale_inv": {"dtype": "F32", "shape": [1, 1], "data_offsets": [4, 8]}})",
          codes + floats({inf})));
  Diags diags;
  Checkpoint ckpt;
  ASSERT_TRUE(ckpt.open(path, diags.engine)) << diags.text();
  ir::CheckpointQuant q;
  q.method = ir::CheckpointQuant::Method::FP8;
  q.blockRows = q.blockCols = 2;
  CheckpointBinder binder(ckpt, q);
  EXPECT_FALSE(binder.bind("w", {2, 2}, true, false));
  ASSERT_EQ(binder.badQuant.size(), 1u);
  EXPECT_NE(
      binder.badQuant[0].find("w_scale_inv: scale holds Inf at element 0"),
      std::string::npos)
      << binder.badQuant[0];
}

TEST(StreamedValues, ConversionsReportTheFirstOverflow) {
  uint8_t out[8];
  float in[4] = {1.0f, 65504.0f, 1e6f, std::numeric_limits<float>::infinity()};
  EXPECT_EQ(weights::storeFloats(out, in, 2, ir::DType::F16), 2u);
  EXPECT_EQ(weights::storeFloats(out, in, 4, ir::DType::F16), 2u);
  EXPECT_EQ(weights::storeFloats(out, in, 3, ir::DType::BF16), 3u);
  float big[2] = {3.4e38f, 1.0f};
  // 3.4e38 rounds up past bf16's largest value.
  EXPECT_EQ(weights::storeFloats(out, big, 2, ir::DType::BF16), 0u);
}
