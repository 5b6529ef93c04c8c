//===- VisionTest.cpp - Packages, `use`, vision ops, M-RoPE ---------------===//
#include "TestUtil.h"

#include "analysis/Profile.h"
#include "ir/OpRules.h"
#include "ir/Printer.h"

#include <gtest/gtest.h>

using namespace archc;
using namespace archc::test;

namespace {
/// Compiles with the default pipeline of `emit` (named graphs get theirs).
Compiled compileDefault(const ScratchDir &dir, const std::string &arch,
                        const std::string &config,
                        EmitTarget emit = EmitTarget::Profile) {
  Options opts;
  opts.input = dir.write("test.arch", arch);
  opts.config = dir.write("config.json", config);
  opts.emit = emit;
  Compiled r;
  r.c = std::make_unique<Compilation>();
  r.c->diags->setCapture(true);
  r.c->diags->setErrorLimit(0);
  std::ostringstream ir;
  r.ok = compileModule(opts, *r.c, ir);
  return r;
}

const ir::Module *graph(const Compiled &c, const std::string &name) {
  for (const NamedGraph &g : c.c->graphs)
    if (g.name == name)
      return g.module.get();
  return nullptr;
}

/// The first op of a kind in a graph (regions included).
const ir::Op *first(const ir::Module &m, ir::OpKind kind) {
  const ir::Op *found = nullptr;
  ir::walk(m.graph.body, [&](const ir::Op &op) {
    if (!found && op.getKind() == kind)
      found = &op;
  });
  return found;
}

size_t count(const ir::Module &m, ir::OpKind kind) {
  size_t n = 0;
  ir::walk(m.graph.body, [&](const ir::Op &op) { n += op.getKind() == kind; });
  return n;
}

/// A text arch and a package arch that uses it.
const char *kPackageArch = R"(
import "std/attention.arch"
arch text {
  config { hidden_size: int  vocab_size: int  let wide = 2 * hidden_size }
  def inner(x: tensor) { return x * 2.0 }
  def block(x: tensor) {
    return inner(linear(x, hidden_size, hidden_size) @ "proj") @ "b"
  }
  def decoder(x: tensor, positions: tensor) {
    for i in 0 .. 2 @ "layers.{i}" {
      h = split_heads(x, 2, hidden_size / 2)
      q = op.rope(h, positions, theta: 10000.0, scaling: set(none, "mrope_section", [1, 1, 0]))
      o = op.attention(q, op.cache(h, "key"), op.cache(h, "value"))
      x = x + block(merge_heads(o, 2, hidden_size / 2))
    }
    return x
  }
  model(ids: i64[batch, seq], position_ids: i64[batch, seq]) -> (y) {
    y = decoder(op.gather(param("weight", [vocab_size, hidden_size]) @ "embed", ids), position_ids)
  }
}
arch pkg matches "PkgForConditionalGeneration" {
  use text as t
  config {
    vision_width: int alias "vision_config.hidden_size"
    let image_tokens_per_image = 4
    let vision_image_size = 8
    check t.wide == 2 * t.hidden_size, "used lets are visible"
  }
  def inner(x: tensor) { return x * 3.0 }
  model vision_encoder(pixel_values: float[images, 3, 8, 8]) -> (image_features) {
    y = op.conv2d(pixel_values, param("w", [vision_width, 3, 4, 4]), stride: [4, 4])
    f = op.reshape(op.transpose(op.reshape(y, [images, vision_width, 4]), [0, 2, 1]), [images * 4, vision_width])
    unused = linear(f, vision_width, 2) @ "head"
    image_features = linear(f, vision_width, t.hidden_size) @ "proj"
  }
  model embedding(ids: i64[batch, seq], image_features: float[image_tokens, t.hidden_size]) -> (inputs_embeds) {
    x = op.gather(param("weight", [t.vocab_size, t.hidden_size]) @ "embed", ids)
    inputs_embeds = op.scatter_rows(x, op.equal(ids, 7), image_features)
  }
  model decoder(inputs_embeds: float[batch, seq, t.hidden_size], position_ids: i64[3, batch, seq]) -> (y) {
    y = inner(t.decoder(inputs_embeds, position_ids))
  }
  model(ids: i64[batch, seq], position_ids: i64[batch, seq]) -> (y) {
    y = t.decoder(op.gather(param("weight", [t.vocab_size, t.hidden_size]) @ "embed", ids), position_ids)
  }
}
)";

const char *kPackageConfig = R"({
  "architectures": ["PkgForConditionalGeneration"],
  "text_config": {"hidden_size": 8, "vocab_size": 16},
  "vision_config": {"hidden_size": 6}
})";
} // namespace

TEST(Package, NamedGraphsCompileIntoTheirOwnModules) {
  ScratchDir d;
  auto c = compileDefault(d, kPackageArch, kPackageConfig);
  ASSERT_TRUE(c.ok) << c.diagnostics();
  ASSERT_EQ(c.c->graphs.size(), 3u);
  EXPECT_EQ(c.c->graphs[0].name, "vision_encoder");
  EXPECT_EQ(c.c->graphs[2].name, "decoder");
  // Stateless graphs get no state and no attention_mask; the decoder both.
  for (const char *name : {"vision_encoder", "embedding"}) {
    const ir::Module &m = *graph(c, name);
    EXPECT_TRUE(m.graph.stateInputs.empty()) << name;
    for (const auto &a : m.graph.body.getArguments())
      EXPECT_NE(a->name, "attention_mask") << name;
  }
  EXPECT_EQ(graph(c, "decoder")->graph.stateInputs.size(), 2u);
}

TEST(Package, UsedDefsRunInTheirOwnArch) {
  ScratchDir d;
  auto c = compileDefault(d, kPackageArch, kPackageConfig, EmitTarget::IR);
  ASSERT_TRUE(c.ok) << c.diagnostics();
  // text.block calls text's `inner` (x 2), the package's decoder its own
  // (x 3) after the used decoder.
  std::vector<double> consts;
  ir::walk(graph(c, "decoder")->graph.body, [&](const ir::Op &op) {
    if (op.getKind() == ir::OpKind::Const)
      consts.push_back(op.attr<double>("value"));
  });
  ASSERT_EQ(consts.size(), 2u);
  EXPECT_EQ(consts[0], 2.0);
  EXPECT_EQ(consts[1], 3.0);
  // Weight names come from the used arch's scopes.
  EXPECT_TRUE(graph(c, "decoder")->findWeight("layers.{i}.proj.weight"));
}

TEST(Package, DeadCodeKeepsTheWeightsDeclared) {
  ScratchDir d;
  auto c = compileDefault(d, kPackageArch, kPackageConfig, EmitTarget::IR);
  ASSERT_TRUE(c.ok) << c.diagnostics();
  const ir::Module &v = *graph(c, "vision_encoder");
  // `unused` (head) is removed, its weight stays in the list.
  EXPECT_TRUE(v.findWeight("head.weight"));
  bool headRead = false;
  ir::walk(v.graph.body, [&](const ir::Op &op) {
    headRead |= op.getKind() == ir::OpKind::Param &&
                op.attr<std::string>("name") == "head.weight";
  });
  EXPECT_FALSE(headRead);
  EXPECT_EQ(count(v, ir::OpKind::MatMul), 1u);
}

// Gemma 3's decoder graph passes token_type_ids to every attention through
// gemma3.arch's lm (the `image_blocks` hook, std attention's
// `bidirectional`), derived from the marker channel of its inputs_embeds
// (no other input); its text model, the same lm unhooked, passes nothing.
TEST(Package, Gemma3ImageBlocksReachEveryAttention) {
  Options opts;
  opts.input = std::string(ARCHC_SOURCE_DIR) + "/archs/gemma3_multimodal.arch";
  opts.config = std::string(ARCHC_SOURCE_DIR) +
                "/archs/configs/tiny/gemma3_multimodal.json";
  opts.emit = EmitTarget::IR;
  Compiled c;
  c.c = std::make_unique<Compilation>();
  c.c->diags->setCapture(true);
  std::ostringstream ir;
  c.ok = compileModule(opts, *c.c, ir);
  ASSERT_TRUE(c.ok) << c.diagnostics();
  const ir::Module &decoder = *graph(c, "decoder");
  std::vector<std::string> inputs;
  for (const auto &a : decoder.graph.body.getArguments())
    inputs.push_back(a->name);
  EXPECT_EQ(inputs,
            (std::vector<std::string>{"inputs_embeds", "position_ids"}));
  const ir::Value *blocks = nullptr;
  size_t attentions = 0;
  ir::walk(decoder.graph.body, [&](const ir::Op &op) {
    if (op.getKind() != ir::OpKind::Attention)
      return;
    ++attentions;
    if (!blocks)
      blocks = op.operand("bidirectional");
    EXPECT_EQ(op.operand("bidirectional"), blocks);
  });
  // Two layer kinds (sliding, full), one body each.
  EXPECT_EQ(attentions, 2u);
  // An integer cast of the marker channel, sliced from inputs_embeds.
  ASSERT_TRUE(blocks);
  ASSERT_TRUE(blocks->getDefiningOp());
  EXPECT_EQ(blocks->getDefiningOp()->getKind(), ir::OpKind::Cast);
  EXPECT_EQ(blocks->type.dtype, ir::DType::I64);
  const ir::Value *v = blocks;
  while (v->getDefiningOp() && v->getDefiningOp()->getNumOperands() > 0)
    v = v->getDefiningOp()->getOperand(0);
  EXPECT_EQ(v->name, "inputs_embeds");
  const ir::Op *text = first(*c.c->module, ir::OpKind::Attention);
  ASSERT_TRUE(text);
  EXPECT_EQ(text->operand("bidirectional"), nullptr);
}

TEST(Package, ProfileOfTheVisionEncoderBindsImages) {
  ScratchDir d;
  auto c = compileDefault(d, kPackageArch, kPackageConfig);
  ASSERT_TRUE(c.ok) << c.diagnostics();
  const ir::Module &v = *graph(c, "vision_encoder");
  ProfilePoint p;
  p.dims = {{"images", 3}, {"image_tokens", 12}};
  Precision bits;
  double macs = 0;
  for (const OpProfile &o : profileOps(v, p, bits))
    macs += o.cost.macs;
  // conv: 3 images x 4 patches x 6 out x 48 in; proj: 12 tokens x 6 x 8.
  EXPECT_DOUBLE_EQ(macs, 3 * 4 * 6 * 48 + 12 * 6 * 8);
}

TEST(VisionOps, ShapeRulesAndErrors) {
  ScratchDir d;
  std::string arch = R"(
arch v {
  config { n: int }
  model(x: f32[images, 3, 14, 14], g: i64[images, 3], ids: i64[batch, seq], e: f32[batch, seq, 8], r: f32[image_tokens, 8]) -> (a, b, c, s, w, m, k) {
    a = op.conv2d(x, param("w", [5, 3, 7, 7]), param("b", [5]), stride: [7, 7])
    flat = op.reshape(x, [images, 588])
    b = op.patch_coords(g, flat, merge: 2)
    w = op.patch_segments(g, flat, merge: 2, window: 2)
    c = op.patch_interpolate(param("t", [9, 4]), g, flat, merge: 2)
    s = op.scatter_rows(e, op.equal(ids, n), r)
    m = op.select_rows(flat, op.nonzero_rows(flat), length: [batch])
    k = op.bucket_positions(op.reshape(op.slice(flat, axis: 1, start: 0, end: 4), [images, 2, 2]), side: 2)
  }
})";
  auto c = compile(d, arch, R"({"n": 7})");
  ASSERT_TRUE(c.ok) << c.diagnostics();
  const ir::Op *ret = c.module().graph.body.getTerminator();
  EXPECT_EQ(ret->getOperand(0)->type.str(), "tensor<images x 5 x 2 x 2 x f32>");
  EXPECT_EQ(ret->getOperand(1)->type.str(), "tensor<images x 2 x i64>");
  EXPECT_EQ(ret->getOperand(2)->type.str(), "tensor<images x 4 x f32>");
  EXPECT_EQ(ret->getOperand(3)->type.str(), "tensor<batch x seq x 8 x f32>");
  EXPECT_EQ(ret->getOperand(4)->type.str(), "tensor<images x i64>");
  EXPECT_EQ(ret->getOperand(5)->type.str(), "tensor<batch x 588 x f32>");
  EXPECT_EQ(ret->getOperand(6)->type.str(), "tensor<images x 4 x i64>");

  auto bad = [&](const std::string &body, const std::string &want) {
    std::string a = "arch v { config { n: int }\n model(x: f32[images, 3, 14, "
                    "14], e: f32[batch, seq, 8], ids: i64[batch, seq], r: "
                    "f32[image_tokens, 6]) -> (y) {\n" +
                    body + "\n } }";
    auto r = compile(d, a, R"({"n": 1})");
    EXPECT_FALSE(r.ok) << body;
    EXPECT_NE(r.diagnostics().find(want), std::string::npos) << r.diagnostics();
  };
  bad(R"(y = op.conv2d(x, param("w", [5, 4, 7, 7]), stride: [7, 7]))",
      "has 3 channels, the weight");
  bad(R"(y = op.scatter_rows(e, op.equal(ids, 1), r))",
      "rows tensor<image_tokens x 6 x f32> must be [n, 8]");
  bad(R"(y = op.scatter_rows(e, ids, op.reshape(e, [batch * seq, 8])))",
      "a bool mask over its leading axes");
  bad(R"(y = op.patch_interpolate(param("t", [8, 4]), ids, x))",
      "grid must be integer [images, 3]");
}

TEST(VisionOps, MropePositionsNeedMatchingSections) {
  ScratchDir d;
  auto arch = [](const std::string &sections) {
    return "arch r { config { n: int }\n model(x: f32[batch, seq, 2, 8], p: "
           "i64[3, batch, seq]) -> (y) {\n y = op.rope(x, p, theta: 10000.0, "
           "scaling: set(none, \"mrope_section\", " +
           sections + "))\n } }";
  };
  auto ok = compile(d, arch("[1, 2, 1]"), R"({"n": 1})");
  EXPECT_TRUE(ok.ok) << ok.diagnostics();
  auto wrong = compile(d, arch("[1, 1, 1]"), R"({"n": 1})");
  EXPECT_FALSE(wrong.ok);
  EXPECT_NE(wrong.diagnostics().find("sections summing to rotary dim / 2 = 4"),
            std::string::npos)
      << wrong.diagnostics();
}

TEST(VisionOps, SegmentsNeedAllKeys) {
  ScratchDir d;
  std::string arch = R"(
arch s {
  config { n: int }
  model(x: f32[batch, seq, 2, 4], g: i64[batch, seq]) -> (x) {
    for i in 0 .. n @ "l.{i}" {
      x = op.attention(x, op.cache(x, "key"), op.cache(x, "value"), causal: false, segments: g)
    }
  }
})";
  auto c = compile(d, arch, R"({"n": 1})", EmitTarget::IR,
                   {"shape-inference", "kv-cache", "shape-inference"});
  EXPECT_FALSE(c.ok);
  EXPECT_NE(c.diagnostics().find("segments need the queries to be all the "
                                 "keys"),
            std::string::npos)
      << c.diagnostics();
}
