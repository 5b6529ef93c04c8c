//===- QuantizeTest.cpp - Weight quantization units -----------------------===//
//
// The MLAS round-to-nearest rule on hand-computed rows (signed scale, ties,
// zero blocks, padding, asymmetric zero points, 8 bits), the FP8 / FP4
// element decoders, storage sizes, and which weights of a module are Linear
// weights (routers, gates and dtype-pinned params excluded).
//
//===----------------------------------------------------------------------===//
#include "TestUtil.h"

#include "checkpoint/TensorSource.h"
#include "emit/weights/Quantize.h"
#include "emit/weights/WeightPlan.h"
#include "ir/WeightQuant.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <vector>

using namespace archc;

namespace {
float identity(float f) { return f; }

ir::QuantLayout layout(int bits, int64_t cols, bool symmetric = true,
                       int64_t block = 32) {
  ir::QuantLayout l;
  l.bits = bits;
  l.block = block;
  l.rows = 1;
  l.cols = cols;
  l.symmetric = symmetric;
  return l;
}

unsigned nibble(const std::vector<uint8_t> &codes, int64_t k) {
  return k % 2 == 0 ? (codes[k / 2] & 0xF) : (codes[k / 2] >> 4);
}
} // namespace

TEST(Quantize, SymmetricInt4UsesTheSignedLargestMagnitude) {
  // w = k - 16: min -16 has the largest magnitude, scale = -16 / -8 = 2.
  std::vector<float> w(32);
  for (int k = 0; k < 32; ++k)
    w[k] = static_cast<float>(k - 16);
  ir::QuantLayout l = layout(4, 32);
  std::vector<uint8_t> codes(16);
  float scale = 0;
  quantizeRow(w.data(), l, identity, codes.data(), &scale, nullptr);
  EXPECT_FLOAT_EQ(scale, 2.0f);
  EXPECT_EQ(nibble(codes, 0), 0u);   // -16 / 2 + 8 = 0 (q = -8)
  EXPECT_EQ(nibble(codes, 16), 8u);  // 0
  EXPECT_EQ(nibble(codes, 17), 9u);  // 1 / 2 = 0.5 rounds away from zero
  EXPECT_EQ(nibble(codes, 31), 15u); // 15 / 2 + 8 = 15.5 -> 16, clamped
  // Input 2j is the low nibble of byte j.
  EXPECT_EQ(codes[8], (9u << 4) | 8u);
}

TEST(Quantize, PositiveMaximumGivesANegativeScale) {
  std::vector<float> w(32, 0.0f);
  w[0] = 10.0f;
  w[1] = -3.0f;
  ir::QuantLayout l = layout(4, 32);
  std::vector<uint8_t> codes(16);
  float scale = 0;
  quantizeRow(w.data(), l, identity, codes.data(), &scale, nullptr);
  EXPECT_FLOAT_EQ(scale, -1.25f);
  EXPECT_EQ(nibble(codes, 0), 0u);  // 10 / -1.25 = -8
  EXPECT_EQ(nibble(codes, 1), 10u); // -3 / -1.25 = 2.4 -> 2
  std::vector<float> back(32);
  dequantizeRow(codes.data(), &scale, nullptr, l, back.data());
  EXPECT_FLOAT_EQ(back[0], 10.0f);
  EXPECT_FLOAT_EQ(back[1], -2.5f);
}

TEST(Quantize, TiesPickTheMinimumAndZeroBlocksDequantizeToZero) {
  std::vector<float> w(32, 0.0f);
  w[3] = 4.0f;
  w[5] = -4.0f;
  ir::QuantLayout l = layout(4, 32);
  std::vector<uint8_t> codes(16);
  float scale = 0;
  quantizeRow(w.data(), l, identity, codes.data(), &scale, nullptr);
  EXPECT_FLOAT_EQ(scale, 0.5f); // -4 / -8
  std::vector<float> zero(32, 0.0f);
  quantizeRow(zero.data(), l, identity, codes.data(), &scale, nullptr);
  EXPECT_EQ(scale, 0.0f);
  for (uint8_t b : codes)
    EXPECT_EQ(b, 0x88);
}

TEST(Quantize, PaddingOfTheLastBlockHoldsTheZeroPoint) {
  std::vector<float> w(40, 1.0f);
  ir::QuantLayout l = layout(4, 40);
  ASSERT_EQ(l.blocksPerRow(), 2);
  std::vector<uint8_t> codes(32);
  float scales[2];
  quantizeRow(w.data(), l, identity, codes.data(), scales, nullptr);
  EXPECT_FLOAT_EQ(scales[1], -0.125f);
  EXPECT_EQ(nibble(codes, 32 + 7), 0u); // input 39: 1 / -0.125 + 8 = 0
  EXPECT_EQ(nibble(codes, 32 + 8), 8u); // padding
  EXPECT_EQ(codes[31], 0x88);
}

TEST(Quantize, AsymmetricStoresPackedZeroPoints) {
  // Block 0 in [-1, 3]: scale 4/15, zero point round(1 / (4/15)) = 4.
  std::vector<float> w(64, 0.0f);
  w[0] = -1.0f;
  w[1] = 3.0f;
  for (int k = 32; k < 64; ++k)
    w[k] = 2.0f; // block 1 in [0, 2]: scale 2/15, zero point 0
  ir::QuantLayout l = layout(4, 64, /*symmetric=*/false);
  ASSERT_EQ(l.zeroPointBytesPerRow(), 1);
  std::vector<uint8_t> codes(32), zp(1);
  float scales[2];
  quantizeRow(w.data(), l, identity, codes.data(), scales, zp.data());
  EXPECT_FLOAT_EQ(scales[0], 4.0f / 15.0f);
  EXPECT_FLOAT_EQ(scales[1], 2.0f / 15.0f);
  EXPECT_EQ(zp[0], 0x04); // block 0 low nibble 4, block 1 high nibble 0
  EXPECT_EQ(nibble(codes, 0), 0u);
  EXPECT_EQ(nibble(codes, 1), 15u);
  std::vector<float> back(64);
  dequantizeRow(codes.data(), scales, zp.data(), l, back.data());
  for (int k = 0; k < 64; ++k)
    EXPECT_NEAR(back[k], w[k], scales[k / 32] / 2 + 1e-6) << k;
}

TEST(Quantize, Int8IsSymmetricAroundCode128) {
  std::vector<float> w(32);
  for (int k = 0; k < 32; ++k)
    w[k] = 0.01f * static_cast<float>(k) - 0.2f;
  ir::QuantLayout l = layout(8, 32);
  std::vector<uint8_t> codes(32);
  float scale = 0;
  quantizeRow(w.data(), l, identity, codes.data(), &scale, nullptr);
  EXPECT_FLOAT_EQ(scale, -0.2f / -128.0f);
  EXPECT_EQ(codes[0], 0u); // -0.2 -> -128
  std::vector<float> back(32);
  dequantizeRow(codes.data(), &scale, nullptr, l, back.data());
  for (int k = 0; k < 32; ++k)
    EXPECT_NEAR(back[k], w[k], scale / 2 + 1e-7);
}

TEST(Quantize, ScalesAreRoundedBeforeTheCodesAreComputed) {
  std::vector<float> w(32, 0.0f);
  w[0] = -1.0f;
  w[1] = 0.3f;
  ir::QuantLayout l = layout(4, 32);
  std::vector<uint8_t> codes(16);
  float scale = 0;
  quantizeRow(
      w.data(), l,
      [](float s) { return std::ldexp(std::round(std::ldexp(s, 3)), -3); },
      codes.data(), &scale, nullptr);
  EXPECT_FLOAT_EQ(scale, 0.125f);   // 1/8 stays
  EXPECT_EQ(nibble(codes, 1), 10u); // 0.3 / 0.125 = 2.4 -> 2
}

TEST(Quantize, StorageSizes) {
  ir::QuantLayout l;
  l.bits = 4;
  l.block = 32;
  l.rows = 10;
  l.cols = 70; // 3 blocks, the last partial
  l.experts = 2;
  l.scaleBits = 16;
  EXPECT_EQ(l.blocksPerRow(), 3);
  EXPECT_EQ(l.codeBytesPerMatrix(), 10 * 3 * 16);
  EXPECT_DOUBLE_EQ(l.totalBytes(), 2 * (480 + 30 * 2.0));
  l.symmetric = false;
  EXPECT_EQ(l.zeroPointBytesPerRow(), 2);
  EXPECT_DOUBLE_EQ(l.totalBytes(), 2 * (480 + 60.0 + 20));
}

TEST(Quantize, Fp8AndFp4Elements) {
  EXPECT_EQ(decodeE4M3(0x38), 1.0f);
  EXPECT_EQ(decodeE4M3(0x7E), 448.0f);
  EXPECT_EQ(decodeE4M3(0xFE), -448.0f);
  EXPECT_EQ(decodeE4M3(0x01), std::ldexp(1.0f, -9)); // smallest subnormal
  EXPECT_EQ(decodeE4M3(0x08), std::ldexp(1.0f, -6)); // smallest normal
  EXPECT_TRUE(std::isnan(decodeE4M3(0x7F)));
  EXPECT_EQ(decodeE2M1(0x7), 6.0f);
  EXPECT_EQ(decodeE2M1(0x3), 1.5f);
  EXPECT_EQ(decodeE2M1(0x9), -0.5f);
}

TEST(Quantize, LinearWeightsExcludeRoutersGatesAndPinnedParams) {
  test::ScratchDir dir;
  auto r = test::compile(dir, test::kTinyArch, test::kTinyConfig);
  ASSERT_TRUE(r.ok) << r.diagnostics();
  // 7 projections per layer (compact IR: one layer kind) + lm_head.
  std::vector<ir::LinearWeightUse> uses = ir::findLinearWeightUses(r.module());
  EXPECT_EQ(uses.size(), 8u);
  const char *moe = R"(
import "std/moe.arch"
arch m matches "M" {
  config { vocab_size: int
           hidden_size: int }
  model(input_ids: i64[batch, seq]) -> (logits) {
    x = op.gather(param("weight", [vocab_size, hidden_size]) @ "embed", input_ids)
    x = moe(x, hidden_size, 4, 8, fn(logits) {
      return op.route(logits, top_k: 2)
    }) @ "moe"
    g = op.sigmoid(linear(x, hidden_size, 1) @ "gate1")
    s = op.matmul(op.cast(x, dtype: "f32"), param("w", [4, hidden_size], dtype: "f32"), transpose_b: true)
    x = x * g + op.reshape(op.reduce_sum(s, axes: [-1]), [batch, seq, 1])
    logits = op.matmul(x, param("weight", [vocab_size, hidden_size]) @ "head", transpose_b: true)
  }
})";
  auto m = test::compile(
      dir, moe,
      R"({"architectures": ["M"], "vocab_size": 32, "hidden_size": 16})");
  ASSERT_TRUE(m.ok) << m.diagnostics();
  std::vector<std::string> names;
  for (const ir::LinearWeightUse &u : ir::findLinearWeightUses(m.module()))
    names.push_back(u.param->attr<std::string>("name"));
  // Not the router (moe.gate), the 1-output gate, nor the float32 param.
  EXPECT_EQ(names, (std::vector<std::string>{"moe.experts.{e}.gate_proj.weight",
                                             "moe.experts.{e}.up_proj.weight",
                                             "moe.experts.{e}.down_proj.weight",
                                             "head.weight"}));
}

TEST(Quantize, StackedExpertViewsTileTheWholeStack) {
  // A stacked [3, 8, 40] tensor quantized per expert: each expert's views
  // and the whole-stack (QMoE) views cover the same bytes.
  WeightPlan plan(WeightSource::Random, nullptr, 7);
  ir::TensorType t(ir::DType::F32,
                   {ir::SymExpr(3), ir::SymExpr(8), ir::SymExpr(40)});
  ir::QuantLayout l;
  l.bits = 4;
  l.block = 32;
  l.rows = 8;
  l.cols = 40;
  l.experts = 3;
  l.symmetric = false;
  l.scaleBits = 32;
  for (int64_t e = 0; e < 3; ++e)
    plan.useQuantized("w", t, l, /*inOut=*/false, e, QuantRead::Matrix);
  QuantizedRef whole =
      plan.useQuantized("w", t, l, false, -1, QuantRead::Stack);
  EXPECT_EQ(whole.codes, "w.qweight");
  // The same stack read whole by a Scan of MatMulNBits: [E, N, blocks,
  // blob] codes, one expert's matrix per step.
  QuantizedRef scanned =
      plan.useQuantized("v", t, l, false, -1, QuantRead::Matrix);
  EXPECT_EQ(scanned.codes, "v.qweight");
  EXPECT_EQ(scanned.scaleType, onnx::TensorProto_DataType_FLOAT);
  test::ScratchDir dir;
  SourceMgr sm;
  DiagnosticEngine diags(sm);
  OutputSet set;
  ASSERT_TRUE(set.begin(dir.path.string(), diags));
  ExternalDataWriter out(set, "", "w.onnx", 0, /*layoutOnly=*/false, nullptr);
  onnx::GraphProto g;
  WeightStats stats;
  ASSERT_TRUE(plan.writeExternal(g, out, diags, stats));
  std::map<std::string, std::pair<uint64_t, uint64_t>> at; // offset, length
  std::map<std::string, std::vector<int64_t>> shape;
  for (const auto &init : g.initializer()) {
    uint64_t off = 0, len = 0;
    for (const auto &kv : init.external_data()) {
      if (kv.key() == "offset")
        off = std::stoull(kv.value());
      if (kv.key() == "length")
        len = std::stoull(kv.value());
    }
    at[init.name()] = {off, len};
    shape[init.name()] = {init.dims().begin(), init.dims().end()};
  }
  for (const char *part : {"qweight", "scales", "zero_points"}) {
    auto w = at[std::string("w.") + part];
    uint64_t next = w.first;
    for (int e = 0; e < 3; ++e) {
      auto v = at["w." + std::to_string(e) + "." + part];
      EXPECT_EQ(v.first, next) << part << " expert " << e;
      next += v.second;
    }
    EXPECT_EQ(next, w.first + w.second) << part;
  }
  EXPECT_EQ(shape["w.qweight"], (std::vector<int64_t>{3, 8, 32}));
  EXPECT_EQ(shape["w.1.qweight"], (std::vector<int64_t>{8, 2, 16}));
  EXPECT_EQ(shape["w.scales"], (std::vector<int64_t>{3, 8, 2}));
  EXPECT_EQ(shape["w.zero_points"], (std::vector<int64_t>{3, 8, 1}));
  EXPECT_EQ(shape["v.qweight"], (std::vector<int64_t>{3, 8, 2, 16}));
  EXPECT_EQ(at["v.qweight"].second, at["w.qweight"].second);
  EXPECT_EQ(shape["v.scales"], (std::vector<int64_t>{3, 8, 2}));
  // Codes + f32 scales + zero points of 3 experts of each of the two
  // weights, nothing duplicated.
  EXPECT_EQ(plan.totalBytes(), 2u * 3u * (8 * 32 + 8 * 2 * 4 + 8));
}

TEST(Quantize, RegionsGoThroughChunkedExternalData) {
  // The regions of one quantized weight are placed one by one by the
  // chunked external-data writer: with a 300-byte limit, after a 40-byte
  // float tensor, the 768 bytes of codes get a file of their own and the
  // scales and zero points the next one; every view names its region's
  // file, expert views tile the whole-stack views byte for byte, and the
  // progress bar counts every byte written (1024).
  WeightPlan plan(WeightSource::Random, nullptr, 7);
  ir::TensorType bias(ir::DType::F32, {ir::SymExpr(10)});
  plan.use("b", bias);
  ir::TensorType t(ir::DType::F32,
                   {ir::SymExpr(3), ir::SymExpr(8), ir::SymExpr(40)});
  ir::QuantLayout l;
  l.bits = 4;
  l.block = 32;
  l.rows = 8;
  l.cols = 40;
  l.experts = 3;
  l.symmetric = false;
  l.scaleBits = 32;
  for (int64_t e = 0; e < 3; ++e)
    plan.useQuantized("w", t, l, /*inOut=*/false, e, QuantRead::Matrix);
  plan.useQuantized("w", t, l, false, -1, QuantRead::Stack);
  test::ScratchDir dir;
  SourceMgr sm;
  DiagnosticEngine diags(sm);
  OutputSet set;
  ASSERT_TRUE(set.begin(dir.path.string(), diags));
  char *drawn = nullptr;
  size_t drawnSize = 0;
  FILE *bar = open_memstream(&drawn, &drawnSize);
  ASSERT_NE(bar, nullptr);
  onnx::GraphProto g;
  {
    ProgressBar progress("binding weights", plan.totalBytes(), true, bar);
    ExternalDataWriter out(set, "onnx", "model_q4.onnx", 300,
                           /*layoutOnly=*/false, &progress);
    WeightStats stats;
    ASSERT_TRUE(plan.writeExternal(g, out, diags, stats));
    EXPECT_EQ(out.files(), (std::vector<std::string>{"model_q4.onnx_data",
                                                     "model_q4.onnx_data_1",
                                                     "model_q4.onnx_data_2"}));
    EXPECT_EQ(stats.bytesWritten, plan.totalBytes());
  }
  std::fclose(bar);
  std::string line(drawn, drawnSize);
  std::free(drawn);
  EXPECT_NE(line.find("100% 1.00 KiB / 1.00 KiB"), std::string::npos) << line;
  ASSERT_TRUE(set.publish(diags));
  struct At {
    std::string file;
    uint64_t offset = 0, length = 0;
  };
  std::map<std::string, At> at;
  for (const auto &init : g.initializer()) {
    At a;
    for (const auto &kv : init.external_data()) {
      if (kv.key() == "location")
        a.file = kv.value();
      if (kv.key() == "offset")
        a.offset = std::stoull(kv.value());
      if (kv.key() == "length")
        a.length = std::stoull(kv.value());
    }
    at[init.name()] = a;
  }
  auto read = [&](const At &a) {
    std::ifstream in(dir.path / "onnx" / a.file, std::ios::binary);
    std::string bytes(a.length, '\0');
    in.seekg(static_cast<std::streamoff>(a.offset));
    in.read(bytes.data(), static_cast<std::streamsize>(a.length));
    EXPECT_TRUE(in.good()) << a.file;
    return bytes;
  };
  EXPECT_EQ(at["b"].file, "model_q4.onnx_data");
  EXPECT_EQ(at["w.qweight"].file, "model_q4.onnx_data_1");
  EXPECT_EQ(at["w.qweight"].offset, 0u);
  EXPECT_EQ(at["w.qweight"].length, 3u * 8 * 32);
  EXPECT_EQ(at["w.scales"].file, "model_q4.onnx_data_2");
  EXPECT_EQ(at["w.zero_points"].file, "model_q4.onnx_data_2");
  for (const char *part : {"qweight", "scales", "zero_points"}) {
    At whole = at[std::string("w.") + part];
    std::string wholeBytes = read(whole);
    for (int e = 0; e < 3; ++e) {
      At v = at["w." + std::to_string(e) + "." + part];
      EXPECT_EQ(v.file, whole.file) << part;
      EXPECT_EQ(read(v), wholeBytes.substr(v.offset - whole.offset, v.length))
          << part << " expert " << e;
    }
  }
}
