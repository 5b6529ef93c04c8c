//===- EvaluatorTest.cpp - IR generation by evaluation --------------------===//
#include "TestUtil.h"

#include "frontend/Sema.h"
#include "ir/Printer.h"
#include "irgen/ConfigBinder.h"
#include "irgen/Evaluator.h"

#include <gtest/gtest.h>

using namespace archc;
using namespace archc::test;

namespace {
const ir::Op *findRepeat(const ir::Module &m) {
  for (const auto &op : m.graph.body.getOps())
    if (op->getKind() == ir::OpKind::Repeat)
      return op.get();
  return nullptr;
}
} // namespace

TEST(Evaluator, IdenticalLayersShareOneKind) {
  ScratchDir d;
  auto c = compile(d, kTinyArch, kTinyConfig);
  ASSERT_TRUE(c.ok) << c.diagnostics();
  const ir::Op *rep = findRepeat(c.module());
  ASSERT_TRUE(rep);
  ASSERT_EQ(rep->getRegions().size(), 1u);
  EXPECT_EQ(rep->getRegions()[0]->layers, (std::vector<int64_t>{0, 1, 2}));
  const ir::WeightDecl *q =
      c.module().findWeight("model.layers.{i}.self_attn.q_proj.weight");
  ASSERT_TRUE(q);
  EXPECT_EQ(q->layers, (std::vector<int64_t>{0, 1, 2}));
  EXPECT_EQ(q->type.str(), "tensor<16 x 16 x f32>");
}

TEST(Evaluator, PerLayerConditionsMakeLayerKinds) {
  ScratchDir d;
  std::string arch = R"(
import "std/nn.arch"
arch k {
  config { n: int }
  model(x: f32[batch, seq, 8]) -> (x) {
    for i in 0 .. n @ "layers.{i}" {
      if i % 3 == 2 {
        x = linear(x, 8, 8) @ "wide"
      } else {
        x = x * 2.0
      }
    }
  }
})";
  auto c = compile(d, arch, R"({"n": 7})");
  ASSERT_TRUE(c.ok) << c.diagnostics();
  const ir::Op *rep = findRepeat(c.module());
  ASSERT_EQ(rep->getRegions().size(), 2u);
  EXPECT_EQ(rep->getRegions()[0]->layers,
            (std::vector<int64_t>{0, 1, 3, 4, 6}));
  EXPECT_EQ(rep->getRegions()[1]->layers, (std::vector<int64_t>{2, 5}));
  EXPECT_EQ(c.module().findWeight("layers.{i}.wide.weight")->layers,
            (std::vector<int64_t>{2, 5}));
}

TEST(Evaluator, WeightInLoopWithoutPlaceholderIsDuplicate) {
  ScratchDir d;
  std::string arch = R"(
import "std/nn.arch"
arch k {
  config { n: int }
  model(x: f32[batch, seq, 8]) -> (x) {
    for i in 0 .. n @ "layers" {
      x = linear(x, 8, 8) @ "proj"
    }
  }
})";
  auto c = compile(d, arch, R"({"n": 2})");
  ASSERT_FALSE(c.ok);
  EXPECT_NE(c.diagnostics().find("weight 'layers.proj.weight' is declared "
                                 "again in layer 1"),
            std::string::npos)
      << c.diagnostics();
}

TEST(Evaluator, TiedWeightIsDeclaredOnce) {
  ScratchDir d;
  std::string arch = R"(
arch k {
  config { v: int  h: int }
  model(ids: i64[batch, seq]) -> (logits) {
    e = param("weight", [v, h]) @ "embed"
    logits = op.matmul(op.gather(e, ids), e, transpose_b: true)
  }
})";
  auto c = compile(d, arch, R"({"v": 10, "h": 4})");
  ASSERT_TRUE(c.ok) << c.diagnostics();
  EXPECT_EQ(c.module().weights.size(), 1u);
}

TEST(Evaluator, ErrorStatementReportsAtCallSite) {
  ScratchDir d;
  std::string arch = R"(
import "std/nn.arch"
arch k {
  config { act: string }
  model(x: f32[batch, seq, 8]) -> (x) {
    x = activation(x, act)
  }
})";
  auto c = compile(d, arch, R"({"act": "swoosh"})");
  ASSERT_FALSE(c.ok);
  std::string diag = c.diagnostics();
  EXPECT_NE(diag.find("unsupported activation 'swoosh'"), std::string::npos);
  EXPECT_NE(diag.find("test.arch:6:9: note: in call to 'activation' from here"),
            std::string::npos)
      << diag;
}

TEST(Evaluator, ScopeOfACallAppliesToTheCalleeOnly) {
  ScratchDir d;
  std::string arch = R"(
import "std/nn.arch"
arch k {
  config { h: int }
  def block(x: tensor) { return linear(x, h, h) @ "inner" }
  model(x: f32[batch, seq, 4]) -> (x) {
    x = block(linear(x, h, h) @ "arg") @ "outer"
  }
})";
  auto c = compile(d, arch, R"({"h": 4})");
  ASSERT_TRUE(c.ok) << c.diagnostics();
  EXPECT_TRUE(c.module().findWeight("arg.weight"));
  EXPECT_TRUE(c.module().findWeight("outer.inner.weight"));
}

TEST(Evaluator, ExpertBodiesDeclarePerExpertWeights) {
  ScratchDir d;
  std::string arch = R"(
import "std/moe.arch"
arch k {
  config { h: int  e: int }
  model(x: f32[batch, seq, 8]) -> (x) {
    x = moe(x, h, e, 16, fn(logits) { return op.route(logits, top_k: 2) }) @ "mlp"
  }
})";
  auto c = compile(d, arch, R"({"h": 8, "e": 4})");
  ASSERT_TRUE(c.ok) << c.diagnostics();
  const ir::WeightDecl *w =
      c.module().findWeight("mlp.experts.{e}.gate_proj.weight");
  ASSERT_TRUE(w);
  EXPECT_EQ(w->experts, 4);
  EXPECT_EQ(w->count(), 4);
}

//===----------------------------------------------------------------------===//
// Layer-key memoisation (Evaluator::Stats)
//===----------------------------------------------------------------------===//

namespace {
/// Loads, binds and evaluates an arch without the pass pipeline, keeping the
/// evaluator to read its statistics.
struct Evaluated {
  SourceMgr sm;
  DiagnosticEngine diags{sm};
  Program program;
  std::unique_ptr<JsonSource> config;
  ir::Module module;
  std::unique_ptr<Evaluator> eval;
  bool ok = false;

  Evaluated(const ScratchDir &d, const std::string &arch,
            const std::string &configText) {
    diags.setCapture(true);
    diags.setErrorLimit(0);
    std::string archPath = d.write("test.arch", arch);
    config = JsonSource::load(d.write("config.json", configText), sm, diags);
    if (!config || !program.load(archPath, {}, sm, diags))
      return;
    const ast::ArchDecl *a = program.selectArch("", diags);
    if (!a || !runSema(program, a, diags))
      return;
    eval = std::make_unique<Evaluator>(program, diags, module);
    std::shared_ptr<Env> env = bindConfig(*a, *config, *eval, diags);
    ok = env && eval->buildModel(*a, env);
  }
  std::string diagnostics() const {
    std::string s;
    for (const Diagnostic &d : diags.getCaptured())
      s += diags.render(d);
    return s;
  }
  const ir::Op *repeat() const { return findRepeat(module); }
};

/// A per-layer selector written as a natural `if / else if` chain over two
/// optional config fields: on every layer one of `kinds[i]` and
/// `ratios[i] == ...` fails to evaluate.
const char *kSelectorArch = R"(
import "std/nn.arch"
arch k {
  config {
    n: int
    kinds: list<string>?
    ratios: list<int>?
  }
  model(x: f32[batch, seq, 8]) -> (x) {
    for i in 0 .. n @ "layers.{i}" {
      if kinds != none {
        kind = kinds[i]
      } else if ratios[i] == 0 {
        kind = "plain"
      } else if ratios[i] == 4 {
        kind = "wide"
      } else {
        kind = "ratio " + str(ratios[i])
      }
      if kind == "wide" {
        x = linear(x, 8, 8) @ "wide"
      } else {
        x = x * 2.0
      }
    }
  }
})";
} // namespace

TEST(Evaluator, LayersWithoutLayerKeyAreEvaluatedOnce) {
  ScratchDir d;
  Evaluated e(d, kTinyArch, kTinyConfig);
  ASSERT_TRUE(e.ok) << e.diagnostics();
  EXPECT_EQ(e.eval->getStats().layerBodiesEvaluated, 1);
  EXPECT_EQ(e.eval->getStats().layerBodiesReused, 2);
}

TEST(Evaluator, FailingLayerKeyStillMemoises) {
  // No `kinds`: `kinds[i]` fails on every layer. One evaluation per
  // distinct ratio, not one per layer.
  ScratchDir d;
  Evaluated e(d, kSelectorArch,
              R"({"n": 8, "ratios": [0, 4, 0, 4, 4, 0, 0, 4]})");
  ASSERT_TRUE(e.ok) << e.diagnostics();
  EXPECT_EQ(e.eval->getStats().layerBodiesEvaluated, 2);
  EXPECT_EQ(e.eval->getStats().layerBodiesReused, 6);
  const ir::Op *rep = e.repeat();
  ASSERT_TRUE(rep);
  ASSERT_EQ(rep->getRegions().size(), 2u);
  EXPECT_EQ(rep->getRegions()[0]->layers, (std::vector<int64_t>{0, 2, 5, 6}));
  EXPECT_EQ(rep->getRegions()[1]->layers, (std::vector<int64_t>{1, 3, 4, 7}));
  EXPECT_EQ(e.module.findWeight("layers.{i}.wide.weight")->layers,
            (std::vector<int64_t>{1, 3, 4, 7}));
}

TEST(Evaluator, FailingLayerKeyInTheOtherBranchStillMemoises) {
  // No `ratios`: every `ratios[i] == ...` fails, `kinds[i]` decides.
  ScratchDir d;
  Evaluated e(d, kSelectorArch,
              R"({"n": 6, "kinds": ["wide", "plain", "plain", "wide",
                                    "plain", "other"]})");
  ASSERT_TRUE(e.ok) << e.diagnostics();
  EXPECT_EQ(e.eval->getStats().layerBodiesEvaluated, 3);
  EXPECT_EQ(e.eval->getStats().layerBodiesReused, 3);
  const ir::Op *rep = e.repeat();
  ASSERT_TRUE(rep);
  // "plain" and "other" give identical bodies: one kind.
  ASSERT_EQ(rep->getRegions().size(), 2u);
  EXPECT_EQ(rep->getRegions()[0]->layers, (std::vector<int64_t>{0, 3}));
  EXPECT_EQ(rep->getRegions()[1]->layers, (std::vector<int64_t>{1, 2, 4, 5}));
}

TEST(Evaluator, FailingLayerKeyThatIsEvaluatedIsReported) {
  // `ratios` has 3 entries for 5 layers: layer 3's key fails where its
  // body reads it, so layer 3 is evaluated (a failure matches no earlier
  // successful key) and its error is reported.
  ScratchDir d;
  Evaluated e(d, kSelectorArch, R"({"n": 5, "ratios": [0, 4, 0]})");
  ASSERT_FALSE(e.ok);
  EXPECT_NE(
      e.diagnostics().find("index 3 is out of range for a list of 3 elements"),
      std::string::npos)
      << e.diagnostics();
  EXPECT_EQ(e.eval->getStats().layerBodiesEvaluated, 3);
  EXPECT_EQ(e.eval->getStats().layerBodiesReused, 1);
}

TEST(Evaluator, LayerKeyProbesLeaveNoOpsBehind) {
  // `w * i` is a key with a tensor value: it is evaluated with each layer
  // (never reused), and probing it must not add ops outside the loop.
  ScratchDir d;
  std::string arch = R"(
arch k {
  config { n: int }
  model(x: f32[batch, seq, 8]) -> (x) {
    w = param("w", [8])
    for i in 0 .. n @ "layers.{i}" {
      x = x + w * i
    }
  }
})";
  Evaluated e(d, arch, R"({"n": 3})");
  ASSERT_TRUE(e.ok) << e.diagnostics();
  EXPECT_EQ(e.eval->getStats().layerBodiesEvaluated, 3);
  std::vector<std::string> top;
  for (const auto &op : e.module.graph.body.getOps())
    top.push_back(op->getMnemonic());
  EXPECT_EQ(top, (std::vector<std::string>{"param", "repeat", "return"}));
}

TEST(Evaluator, PureFunctionCallIsALayerKey) {
  // A loop in a def calling the per-layer function it is given: `key(i)` is
  // a pure call, so layers are grouped by its value.
  ScratchDir d;
  std::string arch = R"(
import "std/nn.arch"
arch k {
  config { n: int  every: int }
  def kind(i: int) {
    if i % every == every - 1 {
      return "wide"
    }
    return "plain"
  }
  def run(x: tensor, layers: int, key: function) {
    for i in 0 .. layers @ "layers.{i}" {
      if key(i) == "wide" {
        x = linear(x, 8, 8) @ "wide"
      } else {
        x = x * 2.0
      }
    }
    return x
  }
  model(x: f32[batch, seq, 8]) -> (y) {
    y = run(x, n, kind) + run(x, n, fn(i) { return i < 2 ? "wide" : "plain" }) @ "b"
  }
})";
  Evaluated e(d, arch, R"({"n": 6, "every": 3})");
  ASSERT_TRUE(e.ok) << e.diagnostics();
  EXPECT_EQ(e.eval->getStats().layerBodiesEvaluated, 4);
  EXPECT_EQ(e.eval->getStats().layerBodiesReused, 8);
  EXPECT_EQ(e.module.findWeight("layers.{i}.wide.weight")->layers,
            (std::vector<int64_t>{2, 5}));
  EXPECT_EQ(e.module.findWeight("b.layers.{i}.wide.weight")->layers,
            (std::vector<int64_t>{0, 1}));
}

TEST(Evaluator, ImpureFunctionCallIsNotALayerKey) {
  // `noisy` declares a weight: it is not probed (that would declare it
  // outside the layer), so `i` itself is the key and every layer runs.
  ScratchDir d;
  std::string arch = R"(
arch k {
  config { n: int }
  def noisy(i: int) {
    w = param("probe", [1])
    return i % 2
  }
  model(x: f32[batch, seq, 8]) -> (x) {
    for i in 0 .. n @ "layers.{i}" {
      x = x * noisy(i)
    }
  }
})";
  Evaluated e(d, arch, R"({"n": 4})");
  ASSERT_TRUE(e.ok) << e.diagnostics();
  EXPECT_EQ(e.eval->getStats().layerBodiesEvaluated, 4);
  EXPECT_EQ(e.eval->getStats().layerBodiesReused, 0);
  ASSERT_EQ(e.module.weights.size(), 1u);
  EXPECT_EQ(e.module.weights[0].pattern, "layers.{i}.probe");
  EXPECT_EQ(e.module.weights[0].layers, (std::vector<int64_t>{0, 1, 2, 3}));
}
