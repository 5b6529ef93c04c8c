//===- WeightPlanTest.cpp - Weights stored transposed ---------------------===//
//
// A dense Linear weight registered transposed (WeightPlan::use with
// `transposed`) keeps its checkpoint name, gets the [in, out] shape, and
// its data is the transpose of the untransposed tensor: for generated
// (random) values, for a checkpoint tensor converted from bf16, over
// several output chunks, in external data and embedded alike. A weight
// stored reshaped keeps its bytes under the new dims. An interleaved
// expert stack alternates its members' rows. Expert blocks made from a
// checkpoint stack are transposed, interleaved, cut and zeroed per expert.
//
//===----------------------------------------------------------------------===//
#include "TestUtil.h"
#include "WeightBytes.h"

#include "emit/weights/Quantize.h"
#include "emit/weights/WeightPlan.h"
#include "support/FloatConvert.h"

#include <gtest/gtest.h>

#include <cstring>
#include <fmt/format.h>
#include <fstream>
#include <map>
#include <vector>

using namespace archc;

namespace {

ir::TensorType matrix(ir::DType dt, int64_t rows, int64_t cols) {
  return ir::TensorType(dt, {ir::SymExpr(rows), ir::SymExpr(cols)});
}

/// The one initializer an embedded plan writes, as its dims and bytes.
struct Written {
  std::vector<int64_t> dims;
  std::string bytes;
};

Written embedOne(WeightPlan &plan) {
  SourceMgr sm;
  DiagnosticEngine diags(sm);
  onnx::GraphProto g;
  WeightStats stats;
  EXPECT_TRUE(plan.embed(g, diags, stats));
  EXPECT_EQ(g.initializer_size(), 1);
  if (g.initializer_size() != 1)
    return {};
  const onnx::TensorProto &t = g.initializer(0);
  EXPECT_EQ(t.name(), "w");
  return {{t.dims().begin(), t.dims().end()}, t.raw_data()};
}

/// A safetensors file: the JSON header padded to 8 bytes, then the data.
std::string safetensorsFile(std::string header, const std::string &data) {
  while ((8 + header.size()) % 8)
    header += ' ';
  std::string file(8, '\0');
  uint64_t n = header.size();
  std::memcpy(file.data(), &n, 8);
  return file + header + data;
}

} // namespace

TEST(WeightPlan, RandomTransposedIsTheTransposeOfTheSameValues) {
  // f32 and f16; [3, 700000] f32 is written in three output chunks.
  struct Case {
    ir::DType dt;
    int64_t rows, cols;
  };
  for (Case c : {Case{ir::DType::F32, 5, 7}, Case{ir::DType::F16, 5, 7},
                 Case{ir::DType::F32, 3, 700000}}) {
    size_t es = ir::dtypeBits(c.dt) / 8;
    WeightPlan plain(WeightSource::Random, nullptr, 7);
    plain.use("w", matrix(c.dt, c.rows, c.cols));
    WeightPlan transposed(WeightSource::Random, nullptr, 7);
    transposed.use("w", matrix(c.dt, c.rows, c.cols), /*transposed=*/true);
    EXPECT_EQ(plain.totalBytes(), transposed.totalBytes());
    Written a = embedOne(plain), b = embedOne(transposed);
    EXPECT_EQ(a.dims, (std::vector<int64_t>{c.rows, c.cols}));
    EXPECT_EQ(b.dims, (std::vector<int64_t>{c.cols, c.rows}));
    ASSERT_EQ(a.bytes.size(), static_cast<size_t>(c.rows * c.cols) * es);
    EXPECT_TRUE(b.bytes == test::transpose(a.bytes, c.rows, c.cols, es))
        << c.rows << "x" << c.cols;
  }
}

TEST(WeightPlan, ReshapedWeightKeepsItsBytesUnderTheNewDims) {
  WeightPlan plain(WeightSource::Random, nullptr, 7);
  plain.use("w", ir::TensorType(ir::DType::F32, {ir::SymExpr(24)}));
  WeightPlan reshaped(WeightSource::Random, nullptr, 7);
  std::vector<int64_t> dims{6, 4};
  reshaped.use("w", ir::TensorType(ir::DType::F32, {ir::SymExpr(24)}),
               /*transposed=*/false, &dims);
  Written a = embedOne(plain), b = embedOne(reshaped);
  EXPECT_EQ(a.dims, (std::vector<int64_t>{24}));
  EXPECT_EQ(b.dims, dims);
  EXPECT_EQ(a.bytes, b.bytes);
}

TEST(WeightPlan, CheckpointTensorIsConvertedThenTransposed) {
  // A bf16 [2, 3] checkpoint tensor read as f32 [3, 2], embedded and in
  // external data.
  const float values[6] = {1, 2, 3, -4, 0.5f, 6};
  std::string data;
  for (float v : values) {
    uint16_t h = floatToBf16(v);
    data.append(reinterpret_cast<const char *>(&h), 2);
  }
  std::string header =
      R"({"w":{"dtype":"BF16","shape":[2,3],"data_offsets":[0,12]}})";
  std::string file = safetensorsFile(header, data);
  test::ScratchDir dir;
  std::string path = dir.write("model.safetensors", file);
  SourceMgr sm;
  DiagnosticEngine diags(sm);
  Checkpoint ckpt;
  ASSERT_TRUE(ckpt.open(path, diags));
  const float expected[6] = {1, -4, 2, 0.5f, 3, 6};

  WeightPlan embedded(WeightSource::Checkpoint, &ckpt, 0);
  embedded.use("w", matrix(ir::DType::F32, 2, 3), /*transposed=*/true);
  ASSERT_TRUE(embedded.validate(diags, path));
  Written w = embedOne(embedded);
  EXPECT_EQ(w.dims, (std::vector<int64_t>{3, 2}));
  ASSERT_EQ(w.bytes.size(), sizeof expected);
  EXPECT_EQ(std::memcmp(w.bytes.data(), expected, sizeof expected), 0);

  WeightPlan external(WeightSource::Checkpoint, &ckpt, 0);
  external.use("w", matrix(ir::DType::F32, 2, 3), /*transposed=*/true);
  ASSERT_TRUE(external.validate(diags, path));
  OutputSet set;
  ASSERT_TRUE(set.begin((dir.path / "out").string(), diags));
  onnx::GraphProto g;
  WeightStats stats;
  {
    ExternalDataWriter out(set, "", "m.onnx", 0, /*layoutOnly=*/false, nullptr);
    ASSERT_TRUE(external.writeExternal(g, out, diags, stats));
  }
  ASSERT_TRUE(set.publish(diags));
  ASSERT_EQ(g.initializer_size(), 1);
  EXPECT_EQ(std::vector<int64_t>(g.initializer(0).dims().begin(),
                                 g.initializer(0).dims().end()),
            (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(stats.bytesWritten, sizeof expected);
  std::ifstream in(dir.path / "out" / "m.onnx_data", std::ios::binary);
  std::string got((std::istreambuf_iterator<char>(in)),
                  std::istreambuf_iterator<char>());
  ASSERT_GE(got.size(), sizeof expected);
  EXPECT_EQ(std::memcmp(got.data(), expected, sizeof expected), 0);
}

TEST(WeightPlan, InterleavedStackAlternatesTheRowsOfEachExpertsMembers) {
  // Two experts' gate and up [2, 3] f32 checkpoint tensors, stacked as
  // f16 [2, 4, 3]: slice e is gate_e row 0, up_e row 0, gate_e row 1,
  // up_e row 1 (ONNX Runtime MoE's swiglu_fusion = 1).
  const char *names[4] = {"g0", "u0", "g1", "u1"};
  std::string header = "{", data;
  for (int t = 0; t < 4; ++t) {
    for (int i = 0; i < 6; ++i) {
      float v = static_cast<float>(t * 10 + i); // tensor t, element i
      data.append(reinterpret_cast<const char *>(&v), 4);
    }
    header += fmt::format(R"({}"{}":{{"dtype":"F32","shape":[2,3],)"
                          R"("data_offsets":[{},{}]}})",
                          t ? "," : "", names[t], t * 24, t * 24 + 24);
  }
  header += "}";
  std::string file = safetensorsFile(header, data);
  test::ScratchDir dir;
  std::string path = dir.write("model.safetensors", file);
  SourceMgr sm;
  DiagnosticEngine diags(sm);
  Checkpoint ckpt;
  ASSERT_TRUE(ckpt.open(path, diags));

  WeightPlan plan(WeightSource::Checkpoint, &ckpt, 0);
  plan.useInterleavedStack("w", {"g0", "u0", "g1", "u1"}, 2,
                           matrix(ir::DType::F16, 2, 3));
  ASSERT_TRUE(plan.validate(diags, path));
  EXPECT_EQ(plan.totalBytes(), 2u * 4 * 3 * 2);
  Written w = embedOne(plan);
  EXPECT_EQ(w.dims, (std::vector<int64_t>{2, 4, 3}));
  ASSERT_EQ(w.bytes.size(), 2u * 4 * 3 * 2);
  const int order[2][4] = {{0, 1, 0, 1}, {2, 3, 2, 3}}; // member of each row
  for (int e = 0; e < 2; ++e)
    for (int row = 0; row < 4; ++row)
      for (int c = 0; c < 3; ++c) {
        uint16_t h;
        std::memcpy(&h, &w.bytes[((e * 4 + row) * 3 + c) * 2], 2);
        float want = static_cast<float>(order[e][row] * 10 + (row / 2) * 3 + c);
        EXPECT_EQ(halfToFloat(h), want) << e << " " << row << " " << c;
      }

  // Part-major: each expert's interleaved [4, 3] matrix cut into two row
  // blocks, entry p * 2 + e = rows [2p, 2p + 2) of expert e: row q of the
  // block is member q of the pair, its row p.
  WeightPlan rows(WeightSource::Checkpoint, &ckpt, 0);
  rows.useInterleavedStack("w", {"g0", "u0", "g1", "u1"}, 2,
                           matrix(ir::DType::F32, 2, 3), 2, 0);
  ASSERT_TRUE(rows.validate(diags, path));
  EXPECT_EQ(rows.totalBytes(), 2u * 4 * 3 * 4);
  Written r = embedOne(rows);
  EXPECT_EQ(r.dims, (std::vector<int64_t>{4, 2, 3}));
  ASSERT_EQ(r.bytes.size(), 4u * 2 * 3 * 4);
  for (int p = 0; p < 2; ++p)
    for (int e = 0; e < 2; ++e)
      for (int q = 0; q < 2; ++q)
        for (int c = 0; c < 3; ++c) {
          float got;
          std::memcpy(&got, &r.bytes[(((p * 2 + e) * 2 + q) * 3 + c) * 4], 4);
          EXPECT_EQ(got, static_cast<float>((e * 2 + q) * 10 + p * 3 + c))
              << p << " " << e << " " << q << " " << c;
        }
  // Column blocks of plain members: g0 and g1 [2, 3] cut into three
  // columns, entry p * 2 + e = column p of expert e, [2, 1].
  WeightPlan cols(WeightSource::Checkpoint, &ckpt, 0);
  cols.useInterleavedStack("w", {"g0", "g1"}, 1, matrix(ir::DType::F32, 2, 3),
                           3, 1);
  ASSERT_TRUE(cols.validate(diags, path, /*reportUnused=*/false));
  Written c = embedOne(cols);
  EXPECT_EQ(c.dims, (std::vector<int64_t>{6, 2, 1}));
  ASSERT_EQ(c.bytes.size(), 6u * 2 * 4);
  for (int p = 0; p < 3; ++p)
    for (int e = 0; e < 2; ++e)
      for (int row = 0; row < 2; ++row) {
        float got;
        std::memcpy(&got, &c.bytes[((p * 2 + e) * 2 + row) * 4], 4);
        EXPECT_EQ(got, static_cast<float>(e * 2 * 10 + row * 3 + p))
            << p << " " << e << " " << row;
      }

  // A member the checkpoint lacks is reported by its own name.
  DiagnosticEngine captured(sm);
  captured.setCapture(true);
  WeightPlan missing(WeightSource::Checkpoint, &ckpt, 0);
  missing.useInterleavedStack("w", {"g0", "u0", "g1", "u2"}, 2,
                              matrix(ir::DType::F32, 2, 3));
  EXPECT_FALSE(missing.validate(captured, path));
  std::string text;
  for (const Diagnostic &d : captured.getCaptured())
    text += captured.render(d);
  EXPECT_NE(text.find("missing"), std::string::npos) << text;
  EXPECT_NE(text.find("\n  u2"), std::string::npos) << text;
}

TEST(WeightPlan, ExpertBlocksOfACheckpointStack) {
  // A checkpoint stack "s" F32 [2, 2, 4] (expert, in, out: input-major
  // [gate | up] of I = 2) with s[e][r][c] = e * 100 + r * 10 + c, and "v"
  // F32 [2, 4] with v[e][c] = e * 100 + c, and "u" F32 [4, 4] (DBRX's
  // [E * I, D], read as [2, 2, 4]) with u[e * 2 + r][c] = 1000 + e * 100 +
  // r * 10 + c.
  std::string data;
  for (int e = 0; e < 2; ++e)
    for (int r = 0; r < 2; ++r)
      for (int c = 0; c < 4; ++c) {
        float x = static_cast<float>(e * 100 + r * 10 + c);
        data.append(reinterpret_cast<const char *>(&x), 4);
      }
  for (int e = 0; e < 2; ++e)
    for (int c = 0; c < 4; ++c) {
      float x = static_cast<float>(e * 100 + c);
      data.append(reinterpret_cast<const char *>(&x), 4);
    }
  for (int e = 0; e < 2; ++e)
    for (int r = 0; r < 2; ++r)
      for (int c = 0; c < 4; ++c) {
        float x = static_cast<float>(1000 + e * 100 + r * 10 + c);
        data.append(reinterpret_cast<const char *>(&x), 4);
      }
  std::string header =
      R"({"s":{"dtype":"F32","shape":[2,2,4],"data_offsets":[0,64]},)"
      R"("v":{"dtype":"F32","shape":[2,4],"data_offsets":[64,96]},)"
      R"("u":{"dtype":"F32","shape":[4,4],"data_offsets":[96,160]}})";
  test::ScratchDir dir;
  std::string path =
      dir.write("model.safetensors", safetensorsFile(header, data));
  SourceMgr sm;
  DiagnosticEngine diags(sm);
  Checkpoint ckpt;
  ASSERT_TRUE(ckpt.open(path, diags));
  ir::TensorType stack(ir::DType::F32,
                       {ir::SymExpr(2), ir::SymExpr(2), ir::SymExpr(4)});
  ir::TensorType vectors(ir::DType::F32, {ir::SymExpr(2), ir::SymExpr(4)});
  auto at = [](const Written &w, size_t i) {
    float f;
    std::memcpy(&f, &w.bytes[i * 4], 4);
    return f;
  };

  // Transposed to [4 out, 2 in], the halves' rows alternating (out row j
  // is checkpoint column (j % 2) * 2 + j / 2), cut into two row blocks:
  // entry p * 2 + e is rows [2p, 2p + 2) of expert e.
  WeightPlan::ExpertBlocks l;
  l.transposed = true;
  l.interleaveHalves = true;
  l.parts = 2;
  WeightPlan fc1(WeightSource::Checkpoint, &ckpt, 0);
  EXPECT_EQ(fc1.useExpertBlocks("w", {{"s", stack}}, stack, l), "w");
  ASSERT_TRUE(fc1.validate(diags, path, /*reportUnused=*/false));
  EXPECT_EQ(fc1.totalBytes(), 4u * 2 * 2 * 4);
  Written a = embedOne(fc1);
  EXPECT_EQ(a.dims, (std::vector<int64_t>{4, 2, 2}));
  ASSERT_EQ(a.bytes.size(), 4u * 2 * 2 * 4);
  for (int p = 0; p < 2; ++p)
    for (int e = 0; e < 2; ++e)
      for (int q = 0; q < 2; ++q)
        for (int c = 0; c < 2; ++c) {
          int j = p * 2 + q, from = (j % 2) * 2 + j / 2;
          EXPECT_EQ(at(a, ((p * 2 + e) * 2 + q) * 2 + c),
                    static_cast<float>(e * 100 + c * 10 + from))
              << p << " " << e << " " << q << " " << c;
        }

  // As stored, cut into two column blocks: entry p * 2 + e is columns
  // [2p, 2p + 2) of expert e's [2, 4].
  WeightPlan::ExpertBlocks byColumns;
  byColumns.parts = 2;
  byColumns.axis = 1;
  WeightPlan fc2(WeightSource::Checkpoint, &ckpt, 0);
  fc2.useExpertBlocks("w", {{"s", stack}}, stack, byColumns);
  ASSERT_TRUE(fc2.validate(diags, path, /*reportUnused=*/false));
  Written b = embedOne(fc2);
  EXPECT_EQ(b.dims, (std::vector<int64_t>{4, 2, 2}));
  for (int p = 0; p < 2; ++p)
    for (int e = 0; e < 2; ++e)
      for (int r = 0; r < 2; ++r)
        for (int c = 0; c < 2; ++c)
          EXPECT_EQ(at(b, ((p * 2 + e) * 2 + r) * 2 + c),
                    static_cast<float>(e * 100 + r * 10 + p * 2 + c));

  // A bias stack, its halves alternating and cut: [4, 2], entry p * 2 + e
  // holds elements (j % 2) * 2 + j / 2 for j in [2p, 2p + 2).
  WeightPlan::ExpertBlocks halves;
  halves.interleaveHalves = true;
  halves.parts = 2;
  WeightPlan bias(WeightSource::Checkpoint, &ckpt, 0);
  bias.useExpertBlocks("w", {{"v", vectors}}, vectors, halves);
  ASSERT_TRUE(bias.validate(diags, path, /*reportUnused=*/false));
  Written c = embedOne(bias);
  EXPECT_EQ(c.dims, (std::vector<int64_t>{4, 2}));
  for (int p = 0; p < 2; ++p)
    for (int e = 0; e < 2; ++e)
      for (int q = 0; q < 2; ++q) {
        int j = p * 2 + q;
        EXPECT_EQ(at(c, (p * 2 + e) * 2 + q),
                  static_cast<float>(e * 100 + (j % 2) * 2 + j / 2));
      }

  // A bias added once: whole in part 0, zeros in part 1: [4, 4].
  WeightPlan::ExpertBlocks once;
  once.parts = 2;
  once.firstPartOnly = true;
  WeightPlan down(WeightSource::Checkpoint, &ckpt, 0);
  down.useExpertBlocks("w", {{"v", vectors}}, vectors, once);
  ASSERT_TRUE(down.validate(diags, path, /*reportUnused=*/false));
  Written d = embedOne(down);
  EXPECT_EQ(d.dims, (std::vector<int64_t>{4, 4}));
  for (int p = 0; p < 2; ++p)
    for (int e = 0; e < 2; ++e)
      for (int x = 0; x < 4; ++x)
        EXPECT_EQ(at(d, (p * 2 + e) * 4 + x),
                  p ? 0.0f : static_cast<float>(e * 100 + x));

  // Two stacks, "s" and "u" read as [2, 2, 4], their rows alternating
  // (separate gate and up): [2 * 2, 4] per expert, row 2r + j is row r of
  // source j; cut into two row blocks.
  WeightPlan::ExpertBlocks pair;
  pair.parts = 2;
  WeightPlan two(WeightSource::Checkpoint, &ckpt, 0);
  ir::TensorType flat(ir::DType::F32, {ir::SymExpr(4), ir::SymExpr(4)});
  two.useExpertBlocks("w", {{"s", stack}, {"u", flat}}, stack, pair);
  ASSERT_TRUE(two.validate(diags, path, /*reportUnused=*/false));
  Written f = embedOne(two);
  EXPECT_EQ(f.dims, (std::vector<int64_t>{4, 2, 4}));
  for (int p = 0; p < 2; ++p)
    for (int e = 0; e < 2; ++e)
      for (int q = 0; q < 2; ++q)
        for (int c = 0; c < 4; ++c) {
          int row = p * 2 + q, j = row % 2, r = row / 2;
          EXPECT_EQ(at(f, ((p * 2 + e) * 2 + q) * 4 + c),
                    static_cast<float>(j * 1000 + e * 100 + r * 10 + c))
              << p << " " << e << " " << q << " " << c;
        }

  // A stack of another shape than the model's is reported by its name.
  DiagnosticEngine captured(sm);
  captured.setCapture(true);
  WeightPlan wrong(WeightSource::Checkpoint, &ckpt, 0);
  ir::TensorType bad(ir::DType::F32,
                     {ir::SymExpr(2), ir::SymExpr(4), ir::SymExpr(2)});
  wrong.useExpertBlocks("w", {{"s", bad}}, bad, l);
  EXPECT_FALSE(wrong.validate(captured, path, /*reportUnused=*/false));
  std::string text;
  for (const Diagnostic &dg : captured.getCaptured())
    text += captured.render(dg);
  EXPECT_NE(text.find("wrong shape"), std::string::npos) << text;
  EXPECT_NE(text.find("s: checkpoint F32 [2, 2, 4], model expects [2, 4, 2]"),
            std::string::npos)
      << text;
}

TEST(WeightPlan, QuantizedStackHoldsTheCodesOfTheFloatStacksRows) {
  // Four experts' gate and up [8, 64] (fc1, rows alternating, two parts
  // along the rows) and down [64, 8] (fc2, two parts along the columns),
  // random: the quantized stack's codes, scales and zero points are those
  // of the float stack's rows, row by row, and the float form is not
  // written.
  struct Case {
    int64_t interleave;
    int axis, bits;
    bool symmetric;
    int64_t block;
    ir::TensorType member;
  };
  const ir::TensorType gateUp(ir::DType::F32,
                              {ir::SymExpr(8), ir::SymExpr(64)});
  const ir::TensorType down(ir::DType::F32, {ir::SymExpr(64), ir::SymExpr(32)});
  for (const Case &c :
       {Case{2, 0, 4, false, 16, gateUp}, Case{1, 1, 8, true, 16, down},
        Case{2, 0, 8, false, 32, gateUp}}) {
    std::vector<std::string> members;
    for (int e = 0; e < 4; ++e)
      for (int64_t j = 0; j < c.interleave; ++j)
        members.push_back(fmt::format("m.{}.{}", e, j));
    WeightPlan floats(WeightSource::Random, nullptr, 11);
    floats.useInterleavedStack("w", members, c.interleave, c.member, 2, c.axis);
    Written f = embedOne(floats);
    ASSERT_EQ(f.dims.size(), 3u);
    ir::QuantLayout l;
    l.bits = c.bits;
    l.block = c.block;
    l.experts = f.dims[0];
    l.rows = f.dims[1];
    l.cols = f.dims[2];
    l.symmetric = c.symmetric;
    WeightPlan quantized(WeightSource::Random, nullptr, 11);
    quantized.useInterleavedStack("w", members, c.interleave, c.member, 2,
                                  c.axis);
    QuantizedRef r = quantized.quantizeStack("w", l);
    EXPECT_EQ(r.codes, "w.qweight");
    EXPECT_EQ(r.zeroPoints, c.symmetric ? "" : "w.zero_points");
    SourceMgr sm;
    DiagnosticEngine diags(sm);
    onnx::GraphProto g;
    WeightStats stats;
    ASSERT_TRUE(quantized.embed(g, diags, stats));
    std::map<std::string, const onnx::TensorProto *> inits;
    for (const onnx::TensorProto &t : g.initializer())
      inits[t.name()] = &t;
    EXPECT_FALSE(inits.count("w"));
    ASSERT_TRUE(inits.count(r.codes) && inits.count(r.scales));
    const int64_t nb = l.blocksPerRow(), rows = l.experts * l.rows;
    EXPECT_EQ(std::vector<int64_t>(inits[r.codes]->dims().begin(),
                                   inits[r.codes]->dims().end()),
              (std::vector<int64_t>{l.experts, l.rows, nb * l.blobBytes()}));
    EXPECT_EQ(std::vector<int64_t>(inits[r.scales]->dims().begin(),
                                   inits[r.scales]->dims().end()),
              (std::vector<int64_t>{l.experts, l.rows, nb}));
    const std::string &codes = inits[r.codes]->raw_data();
    const std::string &scales = inits[r.scales]->raw_data();
    ASSERT_EQ(codes.size(), static_cast<size_t>(rows * nb * l.blobBytes()));
    std::vector<uint8_t> wantCodes(nb * l.blobBytes()),
        wantZp(l.zeroPointBytesPerRow());
    std::vector<float> row(l.cols), wantScales(nb);
    for (int64_t i = 0; i < rows; ++i) {
      std::memcpy(row.data(), &f.bytes[i * l.cols * 4], l.cols * 4);
      quantizeRow(
          row.data(), l, [](float x) { return x; }, wantCodes.data(),
          wantScales.data(), c.symmetric ? nullptr : wantZp.data());
      EXPECT_EQ(codes.substr(i * wantCodes.size(), wantCodes.size()),
                std::string(wantCodes.begin(), wantCodes.end()))
          << "row " << i;
      EXPECT_EQ(0, std::memcmp(&scales[i * nb * 4], wantScales.data(), nb * 4))
          << "row " << i;
      if (!c.symmetric) {
        EXPECT_EQ(inits[r.zeroPoints]->raw_data().substr(i * wantZp.size(),
                                                         wantZp.size()),
                  std::string(wantZp.begin(), wantZp.end()))
            << "row " << i;
      }
    }
  }
}

// A plan shares the bytes another plan wrote (onnxruntime-genai's Whisper
// graphs reading transformers.js' data files) only where every weight is
// stored the same way: a weight transposed in one plan and not in the other
// is not the same bytes, and the graph is left unchanged.
TEST(WeightPlan, SharesWrittenBytesOnlyWhenStoredTheSameWay) {
  test::ScratchDir dir;
  SourceMgr sm;
  DiagnosticEngine diags(sm);
  OutputSet set;
  ASSERT_TRUE(set.begin(dir.path.string(), diags));
  WeightPlan first(WeightSource::Random, nullptr, 7);
  first.use("a", matrix(ir::DType::F32, 4, 6), /*transposed=*/true);
  first.use("b", matrix(ir::DType::F32, 6, 6));
  ASSERT_TRUE(first.validate(diags, ""));
  onnx::GraphProto written;
  WeightStats stats;
  {
    ExternalDataWriter out(set, "", "first.onnx", 1 << 20, false, nullptr);
    ASSERT_TRUE(first.writeExternal(written, out, diags, stats));
  }
  std::vector<WeightPlan::Written> from = {{&first, &written}};

  WeightPlan same(WeightSource::Random, nullptr, 7);
  same.use("b", matrix(ir::DType::F32, 6, 6));
  same.use("a", matrix(ir::DType::F32, 4, 6), /*transposed=*/true);
  ASSERT_TRUE(same.validate(diags, ""));
  onnx::GraphProto g;
  ASSERT_TRUE(same.shareExternal(g, from));
  ASSERT_EQ(g.initializer_size(), 2);
  for (const onnx::TensorProto &t : g.initializer()) {
    const onnx::TensorProto *w = nullptr;
    for (const onnx::TensorProto &x : written.initializer())
      if (x.name() == t.name())
        w = &x;
    ASSERT_NE(w, nullptr) << t.name();
    EXPECT_EQ(t.SerializeAsString(), w->SerializeAsString()) << t.name();
  }

  WeightPlan other(WeightSource::Random, nullptr, 7);
  other.use("b", matrix(ir::DType::F32, 6, 6));
  other.use("a", matrix(ir::DType::F32, 4, 6)); // not transposed
  ASSERT_TRUE(other.validate(diags, ""));
  onnx::GraphProto h;
  EXPECT_FALSE(other.shareExternal(h, from));
  EXPECT_EQ(h.initializer_size(), 0);

  WeightPlan extra(WeightSource::Random, nullptr, 7);
  extra.use("c", matrix(ir::DType::F32, 2, 2)); // written by no plan
  ASSERT_TRUE(extra.validate(diags, ""));
  EXPECT_FALSE(extra.shareExternal(h, from));
  EXPECT_EQ(h.initializer_size(), 0);
  set.discard();
}
