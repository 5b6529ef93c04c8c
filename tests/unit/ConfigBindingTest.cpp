//===- ConfigBindingTest.cpp - Hugging Face config binding ----------------===//
#include "TestUtil.h"

#include <gtest/gtest.h>

using namespace archc;
using namespace archc::test;

namespace {
const char *kSchemaArch = R"(
arch s {
  config {
    hidden_size: int alias "n_embd"
    heads: int alias "num_attention_heads"
    head_dim: int = hidden_size / heads
    eps: float = 1e-5
    window: int? = 4096
    scaling: dict?
    types: list<string>?
    let double_hidden = hidden_size * 2
    check hidden_size % heads == 0, "hidden {hidden_size} not divisible by {heads}"
  }
  model(x: f32[batch, seq, 4]) -> (x) {
  }
}
)";

int64_t intInfo(const Compiled &c, const std::string &k) {
  return std::get<int64_t>(c.module().info.at(k));
}
} // namespace

TEST(ConfigBinding, FlatConfigWithAliasesDefaultsAndLets) {
  ScratchDir d;
  auto c =
      compile(d, kSchemaArch, R"({"n_embd": 64, "num_attention_heads": 4})");
  ASSERT_TRUE(c.ok) << c.diagnostics();
  EXPECT_EQ(intInfo(c, "hidden_size"), 64);
  EXPECT_EQ(intInfo(c, "head_dim"), 16);
  EXPECT_EQ(intInfo(c, "double_hidden"), 128);
  EXPECT_EQ(intInfo(c, "window"), 4096);
  EXPECT_EQ(std::get<double>(c.module().info.at("eps")), 1e-5);
}

TEST(ConfigBinding, NestedTextConfigWins) {
  ScratchDir d;
  auto c = compile(d, kSchemaArch,
                   R"({"text_config": {"hidden_size": 64,
                       "num_attention_heads": 2}})");
  ASSERT_TRUE(c.ok) << c.diagnostics();
  EXPECT_EQ(intInfo(c, "hidden_size"), 64);
  EXPECT_EQ(intInfo(c, "head_dim"), 32);
  // The top-level key text_config shadows is read by no field: refused.
  auto shadowed = compile(d, kSchemaArch,
                          R"({"hidden_size": 8, "text_config": {
                              "hidden_size": 64, "num_attention_heads": 2}})");
  EXPECT_FALSE(shadowed.ok);
  EXPECT_NE(shadowed.diagnostics().find(
                "config.json:1:2: error: config field 'hidden_size' is not a "
                "field of 's'"),
            std::string::npos)
      << shadowed.diagnostics();
}

TEST(ConfigBinding, ExplicitNullInOptionalFieldMeansNone) {
  ScratchDir d;
  auto c = compile(d, kSchemaArch,
                   R"({"hidden_size": 64, "heads": 4, "window": null,
                       "head_dim": null})");
  ASSERT_TRUE(c.ok) << c.diagnostics();
  EXPECT_EQ(c.module().info.count("window"), 0u); // none has no attribute
  EXPECT_EQ(intInfo(c, "head_dim"), 16);          // null -> default
}

TEST(ConfigBinding, IntegralFloatIsAcceptedAsInt) {
  ScratchDir d;
  auto c = compile(d, kSchemaArch, R"({"hidden_size": 64.0, "heads": 4})");
  ASSERT_TRUE(c.ok) << c.diagnostics();
  EXPECT_EQ(intInfo(c, "hidden_size"), 64);
}

TEST(ConfigBinding, WrongTypeIsLocatedInTheConfig) {
  ScratchDir d;
  auto c = compile(d, kSchemaArch,
                   "{\n  \"hidden_size\": \"big\",\n  \"heads\": 4\n}");
  ASSERT_FALSE(c.ok);
  std::string diag = c.diagnostics();
  EXPECT_NE(diag.find("config.json:2:3: error: config field 'hidden_size' "
                      "must be int, got string \"big\""),
            std::string::npos)
      << diag;
  EXPECT_NE(diag.find("test.arch:4:5: note: 'hidden_size' declared here"),
            std::string::npos)
      << diag;
}

TEST(ConfigBinding, MissingFieldNamesFieldFileAndDeclaration) {
  ScratchDir d;
  auto c = compile(d, kSchemaArch, R"({"hidden_size": 64})");
  ASSERT_FALSE(c.ok);
  std::string diag = c.diagnostics();
  EXPECT_NE(diag.find("missing required config field 'heads' in"),
            std::string::npos)
      << diag;
  EXPECT_NE(diag.find("config.json"), std::string::npos);
  EXPECT_NE(diag.find("test.arch:5:5: note: 'heads' (also read as "
                      "'num_attention_heads') is declared here"),
            std::string::npos)
      << diag;
}

TEST(ConfigBinding, FailedCheckReportsItsMessage) {
  ScratchDir d;
  auto c = compile(d, kSchemaArch,
                   R"({"hidden_size": 66, "heads": 4, "head_dim": 16})");
  ASSERT_FALSE(c.ok);
  EXPECT_NE(c.diagnostics().find("hidden 66 not divisible by 4"),
            std::string::npos)
      << c.diagnostics();
}

TEST(ConfigBinding, ListElementTypesAreChecked) {
  ScratchDir d;
  auto c = compile(d, kSchemaArch,
                   R"({"hidden_size": 64, "heads": 4, "types": ["a", 3]})");
  ASSERT_FALSE(c.ok);
  EXPECT_NE(c.diagnostics().find("must be list<string>?"), std::string::npos)
      << c.diagnostics();
}

TEST(ConfigBinding, InvalidJsonIsLocated) {
  ScratchDir d;
  auto c = compile(d, kSchemaArch, "{\n  \"hidden_size\": 64,,\n}");
  ASSERT_FALSE(c.ok);
  EXPECT_NE(c.diagnostics().find("config.json:2:21: error: invalid JSON"),
            std::string::npos)
      << c.diagnostics();
}

TEST(ConfigBinding, UnknownFieldsAreRefusedByName) {
  ScratchDir d;
  const char *config =
      R"({"hidden_size": 64, "heads": 4, "foo": {"bar": [1]}})";
  auto c = compile(d, kSchemaArch, config);
  EXPECT_FALSE(c.ok);
  EXPECT_NE(c.diagnostics().find("config.json:1:33: error: config field "
                                 "'foo' is not a field of 's'"),
            std::string::npos)
      << c.diagnostics();
  // --allow-unknown-config: a warning, and the model.
  auto allowed = compile(d, kSchemaArch, config, EmitTarget::IR,
                         {"shape-inference"}, /*allowUnknownConfig=*/true);
  EXPECT_TRUE(allowed.ok) << allowed.diagnostics();
  EXPECT_NE(allowed.diagnostics().find("warning: config field 'foo'"),
            std::string::npos);
}

TEST(ConfigBinding, DictKeysAreAccountedForAsTheCodeReadsThem) {
  ScratchDir d;
  // `scaling` is read whole by no op here: only the key the code reads is
  // accounted for, a copy made by set() included.
  const char *arch = R"(
arch s {
  config {
    hidden_size: int
    scaling: dict?
    inert "notes.author"
    let factor = get(set(scaling, "extra", 1), "factor", 1.0)
  }
  model(x: f32[batch, seq, 4]) -> (x) {
  }
}
)";
  auto ok = compile(d, arch,
                    R"({"hidden_size": 8, "scaling": {"factor": 2.0},
                        "notes": {"author": "x"}})");
  EXPECT_TRUE(ok.ok) << ok.diagnostics();
  auto bad = compile(d, arch,
                     R"({"hidden_size": 8, "scaling": {"factor": 2.0,
                         "kind": "linear"}, "notes": {"author": "x",
                         "date": 1}})");
  EXPECT_FALSE(bad.ok);
  EXPECT_NE(bad.diagnostics().find("config field 'scaling.kind'"),
            std::string::npos)
      << bad.diagnostics();
  EXPECT_NE(bad.diagnostics().find("config field 'notes.date'"),
            std::string::npos)
      << bad.diagnostics();
}

TEST(ConfigBinding, RootAnchoredAliasSkipsTextConfig) {
  ScratchDir d;
  // A vision-language class's own field whose name its text_config has too
  // (transformers ties the head by the top-level flag).
  const char *arch = R"(
arch vlm {
  config {
    hidden_size: int
    tie_word_embeddings: bool = false
    top_tie: bool = true alias "/tie_word_embeddings"
  }
  model(x: f32[batch, seq, 4]) -> (x) {
  }
}
)";
  auto c = compile(d, arch,
                   R"({"tie_word_embeddings": false, "text_config": {
                       "hidden_size": 8, "tie_word_embeddings": true}})");
  ASSERT_TRUE(c.ok) << c.diagnostics();
  EXPECT_EQ(std::get<bool>(c.module().info.at("tie_word_embeddings")), true);
  EXPECT_EQ(std::get<bool>(c.module().info.at("top_tie")), false);
}
