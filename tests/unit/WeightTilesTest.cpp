//===- WeightTilesTest.cpp - Weights written in tiles of any size ---------===//
//
// The writer holds one tile of a transpose or gather (WeightPlan::
// tileBytes) and writes the same bytes whatever its size: a checkpoint
// matrix transposed (tiles of output rows, or bands of source rows written
// at their offsets), a stack of transposed members after other bytes,
// interleaved and part-major stacks, expert blocks of checkpoint stacks,
// quantized rows of [in, out] matrices and of stacks, embedded and in
// external data split over several files.
//
//===----------------------------------------------------------------------===//
#include "TestUtil.h"
#include "WeightBytes.h"

#include "emit/weights/WeightPlan.h"
#include "support/FloatConvert.h"

#include <gtest/gtest.h>

#include <cstring>
#include <fmt/format.h>
#include <fstream>
#include <functional>
#include <map>
#include <vector>

using namespace archc;

namespace {

ir::TensorType tensor(ir::DType dt, std::vector<int64_t> dims) {
  std::vector<ir::SymExpr> d;
  for (int64_t x : dims)
    d.push_back(ir::SymExpr(x));
  return ir::TensorType(dt, d);
}

/// Every initializer's bytes, by name.
using Bytes = std::map<std::string, std::string>;

Bytes embedded(WeightPlan &plan) {
  SourceMgr sm;
  DiagnosticEngine diags(sm);
  onnx::GraphProto g;
  WeightStats stats;
  EXPECT_TRUE(plan.embed(g, diags, stats));
  EXPECT_EQ(stats.bytesWritten, plan.totalBytes());
  Bytes out;
  for (const onnx::TensorProto &t : g.initializer())
    out[t.name()] = t.raw_data();
  return out;
}

std::string readFile(const std::filesystem::path &p) {
  std::ifstream in(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)),
                     std::istreambuf_iterator<char>());
}

/// Written to external data files of at most `chunk` bytes, read back.
Bytes external(WeightPlan &plan, uint64_t chunk) {
  test::ScratchDir dir;
  SourceMgr sm;
  DiagnosticEngine diags(sm);
  OutputSet set;
  EXPECT_TRUE(set.begin(dir.path.string(), diags));
  onnx::GraphProto g;
  WeightStats stats;
  {
    ExternalDataWriter out(set, "", "m.onnx", chunk, /*layoutOnly=*/false,
                           nullptr);
    EXPECT_TRUE(plan.writeExternal(g, out, diags, stats));
  }
  EXPECT_TRUE(set.publish(diags));
  EXPECT_EQ(stats.bytesWritten, plan.totalBytes());
  Bytes out;
  std::map<std::string, std::string> files;
  for (const onnx::TensorProto &t : g.initializer()) {
    std::string location;
    uint64_t offset = 0, length = 0;
    for (const auto &kv : t.external_data()) {
      if (kv.key() == "location")
        location = kv.value();
      else if (kv.key() == "offset")
        offset = std::stoull(kv.value());
      else if (kv.key() == "length")
        length = std::stoull(kv.value());
    }
    if (!files.count(location))
      files[location] = readFile(dir.path / location);
    EXPECT_LE(offset + length, files[location].size()) << t.name();
    out[t.name()] = files[location].substr(offset, length);
  }
  return out;
}

/// A safetensors file of BF16 tensors (name, shape), element i of tensor t
/// the bf16 of (t + 1) * 0.5 + i * 0.25 modulo a period that is no
/// divisor of the rows (a transpose differs from its source).
std::string
bf16File(const std::vector<std::pair<std::string, std::vector<int64_t>>> &ts) {
  std::string header = "{", data;
  for (size_t t = 0; t < ts.size(); ++t) {
    int64_t n = 1;
    for (int64_t d : ts[t].second)
      n *= d;
    size_t begin = data.size();
    for (int64_t i = 0; i < n; ++i) {
      uint16_t h = floatToBf16(static_cast<float>(t + 1) * 0.5f +
                               static_cast<float>(i % 251) * 0.25f);
      data.append(reinterpret_cast<const char *>(&h), 2);
    }
    std::string shape;
    for (int64_t d : ts[t].second) {
      if (!shape.empty())
        shape += ',';
      shape += std::to_string(d);
    }
    header += fmt::format(
        R"({}"{}":{{"dtype":"BF16","shape":[{}],"data_offsets":[{},{}]}})",
        t ? "," : "", ts[t].first, shape, begin, data.size());
  }
  header += "}";
  while ((8 + header.size()) % 8)
    header += ' ';
  std::string file(8, '\0');
  uint64_t len = header.size();
  std::memcpy(file.data(), &len, 8);
  return file + header + data;
}

/// Tile sizes from one element to the whole tensor: at 1000 and 5000 bytes
/// a tall matrix reads bands of whole rows and writes at offsets, smaller
/// ones gather single output rows.
const uint64_t kTiles[] = {1, 48, 200, 1000, 5000, uint64_t(1) << 30};

} // namespace

TEST(WeightTiles, TransposeIsTheSameForEveryTileSize) {
  const std::vector<std::pair<std::string, std::vector<int64_t>>> shapes = {
      {"tall", {300, 24}}, {"wide", {24, 300}}, {"odd", {37, 53}},
      {"even", {64, 40}},  {"m0", {300, 24}},   {"m1", {300, 24}}};
  test::ScratchDir dir;
  std::string path = dir.write("model.safetensors", bf16File(shapes));
  SourceMgr sm;
  DiagnosticEngine diags(sm);
  Checkpoint ckpt;
  ASSERT_TRUE(ckpt.open(path, diags));
  for (ir::DType dt : {ir::DType::F32, ir::DType::BF16, ir::DType::F16}) {
    const size_t es = ir::dtypeBits(dt) / 8;
    // Each matrix's bytes as stored, converted: the reference.
    WeightPlan plain(WeightSource::Checkpoint, &ckpt, 0);
    for (const auto &[name, dims] : shapes)
      plain.use(name, tensor(dt, dims));
    ASSERT_TRUE(plain.validate(diags, path));
    Bytes stored = embedded(plain);
    auto make = [&](uint64_t tile) {
      auto plan =
          std::make_unique<WeightPlan>(WeightSource::Checkpoint, &ckpt, 0);
      plan->setTileBytes(tile);
      // A small tensor first: the stack's members start past other bytes.
      plan->use("odd", tensor(dt, {37, 53}));
      for (const auto &[name, dims] : shapes)
        if (name != "odd" && name[0] != 'm')
          plan->use(name, tensor(dt, dims), /*transposed=*/true);
      plan->useStacked("stack", {"m0", "m1"}, tensor(dt, {300, 24}),
                       /*transposed=*/true);
      EXPECT_TRUE(plan->validate(diags, path, /*reportUnused=*/false));
      return plan;
    };
    Bytes want;
    want["odd"] = stored["odd"];
    for (const auto &[name, dims] : shapes)
      if (name != "odd" && name[0] != 'm')
        want[name] = test::transpose(stored[name], dims[0], dims[1], es);
    want["stack"] = test::transpose(stored["m0"], 300, 24, es) +
                    test::transpose(stored["m1"], 300, 24, es);
    for (uint64_t tile : kTiles) {
      EXPECT_TRUE(embedded(*make(tile)) == want) << "embedded, tile " << tile;
      // Chunks of 30000 bytes: the stack (57600 bytes at f32) has a file
      // of its own.
      EXPECT_TRUE(external(*make(tile), 30000) == want)
          << "external, tile " << tile;
    }
  }
}

TEST(WeightTiles, StacksAndQuantizedRowsAreTheSameForEveryTileSize) {
  // Random values (deterministic by name): every stack form, the
  // quantized rows of an [in, out] matrix and of stacks, written with the
  // default tile and with small ones.
  const ir::TensorType stack = tensor(ir::DType::F32, {3, 40, 24});
  const ir::TensorType member = tensor(ir::DType::F16, {24, 40});
  auto quantLayout = [](int64_t experts, int64_t rows, int64_t cols, int bits,
                        bool symmetric) {
    ir::QuantLayout l;
    l.bits = bits;
    l.block = 16;
    l.experts = experts;
    l.rows = rows;
    l.cols = cols;
    l.symmetric = symmetric;
    return l;
  };
  auto make = [&](uint64_t tile) {
    auto plan = std::make_unique<WeightPlan>(WeightSource::Random, nullptr, 5);
    plan->setTileBytes(tile);
    std::vector<std::string> members;
    for (int e = 0; e < 3; ++e)
      for (int j = 0; j < 2; ++j)
        members.push_back(fmt::format("e{}.{}", e, j));
    plan->useInterleavedStack("rows", members, 2, member, 2, 0);
    plan->useInterleavedStack("cols", members, 1, member, 4, 1);
    WeightPlan::ExpertBlocks fc1;
    fc1.transposed = true;
    fc1.interleaveHalves = true;
    fc1.parts = 2;
    plan->useExpertBlocks("fc1", {{"s", stack}}, stack, fc1);
    WeightPlan::ExpertBlocks fc2;
    fc2.transposed = true;
    fc2.parts = 3;
    fc2.axis = 1;
    plan->useExpertBlocks("fc2", {{"s", stack}}, stack, fc2);
    WeightPlan::ExpertBlocks pair;
    pair.parts = 2;
    plan->useExpertBlocks("pair", {{"s", stack}, {"u", stack}}, stack, pair);
    WeightPlan::ExpertBlocks q;
    q.transposed = true;
    plan->useExpertBlocks("q", {{"s", stack}, {"u", stack}}, stack, q);
    plan->quantizeStack("q", quantLayout(3, 48, 40, 4, false));
    plan->useQuantized("inout", tensor(ir::DType::F32, {64, 48}),
                       quantLayout(1, 48, 64, 4, false), /*inOut=*/true, -1,
                       QuantRead::Matrix);
    plan->useQuantized("experts", tensor(ir::DType::F16, {2, 32, 24}),
                       quantLayout(2, 24, 32, 8, true), /*inOut=*/true, -1,
                       QuantRead::Matrix);
    return plan;
  };
  Bytes want = embedded(*make(uint64_t(1) << 30));
  EXPECT_EQ(want.size(), 13u);
  for (uint64_t tile : {uint64_t(1), uint64_t(64), uint64_t(700),
                        uint64_t(4096), uint64_t(1) << 30}) {
    EXPECT_TRUE(embedded(*make(tile)) == want) << "embedded, tile " << tile;
    EXPECT_TRUE(external(*make(tile), 10000) == want)
        << "external, tile " << tile;
  }
}
