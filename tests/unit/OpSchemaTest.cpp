//===- OpSchemaTest.cpp - The op schemas and what derives from them ------===//
//
// Every op kind has one well-formed schema; typed accessors reject names the
// schema does not declare; optional operands keep their schema positions;
// the derived op.* signatures match the schemas.
//
//===----------------------------------------------------------------------===//
#include "ir/OpSchema.h"
#include "frontend/Builtins.h"
#include "ir/OpRules.h"

#include <gtest/gtest.h>

#include <set>

using namespace archc;
using namespace archc::ir;

namespace {

TEST(OpSchema, EveryKindHasOneWellFormedSchema) {
  const auto &all = allOpSchemas();
  std::set<std::string> mnemonics;
  for (size_t k = 0; k < all.size(); ++k) {
    const OpSchema &s = all[k];
    SCOPED_TRACE(s.mnemonic());
    EXPECT_EQ(static_cast<size_t>(s.kind), k);
    EXPECT_TRUE(mnemonics.insert(s.mnemonic()).second);
    EXPECT_FALSE(s.summary.empty());
    EXPECT_LE(s.operands.size(), 32u); // presence bits
    std::set<std::string> names;
    for (size_t i = 0; i < s.operands.size(); ++i) {
      const OperandSpec &o = s.operands[i];
      EXPECT_TRUE(names.insert(o.name).second) << "duplicate " << o.name;
      if (o.variadic)
        EXPECT_EQ(i + 1, s.operands.size()) << "a list operand is last";
      if (!o.needs.empty())
        EXPECT_TRUE(s.findOperand(o.needs)) << o.name << " needs " << o.needs;
    }
    for (const AttrSpec &a : s.attrs) {
      EXPECT_TRUE(names.insert(a.name).second) << "duplicate " << a.name;
      if (a.type == AttrType::Enum)
        EXPECT_FALSE(a.allowed.empty()) << a.name;
      if (a.defaultValue)
        EXPECT_EQ(checkAttrValue(a, *a.defaultValue), std::nullopt) << a.name;
      EXPECT_FALSE(a.defaultValue && a.optional) << a.name;
    }
    for (const ResultSpec &r : s.results)
      if (!r.variadicFrom.empty()) {
        ASSERT_TRUE(s.findAttr(r.variadicFrom));
        EXPECT_EQ(s.attr(r.variadicFrom).type, AttrType::IntList);
      }
    if (s.inLanguage) {
      EXPECT_EQ(findLanguageOp(s.mnemonic()), &s);
      EXPECT_NE(s.infer, nullptr) << "a language op needs a shape rule";
      // The signature lists each language operand, attribute and region
      // exactly once.
      size_t language = s.regions.size();
      for (const OperandSpec &o : s.operands)
        language += o.origin == Origin::Language;
      for (const AttrSpec &a : s.attrs)
        language += a.origin == Origin::Language;
      EXPECT_EQ(s.signature.size(), language);
    } else {
      EXPECT_EQ(findLanguageOp(s.mnemonic()), nullptr);
    }
  }
}

TEST(OpSchema, SignaturesDeriveFromTheSchemas) {
  for (const OpSchema &s : allOpSchemas()) {
    const BuiltinSignature *sig = lookupOpBuiltin(s.mnemonic());
    if (!s.inLanguage) {
      EXPECT_EQ(sig, nullptr) << s.mnemonic();
      continue;
    }
    ASSERT_NE(sig, nullptr) << s.mnemonic();
    ASSERT_EQ(sig->params.size(), s.signature.size());
  }
  const BuiltinSignature *attn = lookupOpBuiltin("attention");
  ASSERT_NE(attn, nullptr);
  std::vector<std::string> names;
  for (const BuiltinParam &p : attn->params)
    names.push_back(p.name + ":" + p.type + (p.required ? "!" : ""));
  EXPECT_EQ(names, (std::vector<std::string>{"q:tensor!",
                                             "k:tensor!",
                                             "v:tensor!",
                                             "causal:bool",
                                             "window:int?",
                                             "chunk:int?",
                                             "scale:float?",
                                             "softcap:float?",
                                             "alibi:float?",
                                             "alibi_bf16:bool?",
                                             "padding_mask:bool?",
                                             "relative_max_distance:int?",
                                             "sinks:tensor?",
                                             "extra_k:tensor?",
                                             "extra_v:tensor?",
                                             "extra_mask:tensor?",
                                             "relative_bias:tensor?",
                                             "bias:tensor?",
                                             "key_mask:tensor?",
                                             "segments:tensor?",
                                             "bidirectional:tensor?"}));
}

/// An op with `n` operand-less results, for accessor tests.
std::unique_ptr<Op> makeOp(OpKind kind) {
  auto op = std::make_unique<Op>(kind, Location{});
  op->addResult();
  return op;
}

TEST(OpSchema, TypedAttributesRejectUndeclaredNames) {
  auto op = makeOp(OpKind::Attention);
  EXPECT_TRUE(op->attr<bool>("causal")); // the schema default
  EXPECT_EQ(op->optAttr<int64_t>("window"), nullptr);
  op->setAttr("window", int64_t(4));
  ASSERT_NE(op->optAttr<int64_t>("window"), nullptr);
  EXPECT_EQ(*op->optAttr<int64_t>("window"), 4);
  EXPECT_TRUE(op->hasAttr("window"));
  EXPECT_FALSE(op->hasAttr("causal")); // defaults are not stored
  // A misspelt name is an internal error, never a silent default.
  EXPECT_THROW(op->attr<int64_t>("windw"), SchemaError);
  EXPECT_THROW(op->optAttr<int64_t>("windw"), SchemaError);
  EXPECT_THROW(op->hasAttr("windw"), SchemaError);
  EXPECT_THROW(op->setAttr("windw", int64_t(4)), SchemaError);
  // So is a read with the wrong C++ type, or of an absent attribute that has
  // no default through attr<T>.
  EXPECT_THROW(op->attr<double>("window"), SchemaError);
  EXPECT_THROW(op->attr<double>("scale"), SchemaError);
}

TEST(OpSchema, OptionalOperandsKeepSchemaPositions) {
  Value q, k, v, sinks, ek, ev, mask;
  auto op = makeOp(OpKind::Attention);
  op->setOperand("q", &q);
  op->setOperand("k", &k);
  op->setOperand("v", &v);
  // Added out of schema order: the mask (a pass operand, last) first.
  op->setOperand("mask", &mask);
  op->setOperand("sinks", &sinks);
  op->setOperand("extra_k", &ek);
  op->setOperand("extra_v", &ev);
  EXPECT_EQ(op->operands,
            (std::vector<Value *>{&q, &k, &v, &sinks, &ek, &ev, &mask}));
  EXPECT_EQ(op->operand("sinks"), &sinks);
  EXPECT_EQ(op->operand("mask"), &mask);
  EXPECT_EQ(op->operand("extra_mask"), nullptr);
  EXPECT_TRUE(op->hasOperand("extra_v"));
  EXPECT_THROW(op->operand("sink"), SchemaError);
  // Replacing a present operand keeps the others.
  Value sinks2;
  op->setOperand("sinks", &sinks2);
  EXPECT_EQ(op->operand("sinks"), &sinks2);
  EXPECT_EQ(op->getNumOperands(), 7u);
}

TEST(OpSchema, VerifierChecksPartnersAndValues) {
  SourceMgr sm;
  DiagnosticEngine diags{sm};
  diags.setCapture(true);
  Value q, k, v, ek;
  auto op = makeOp(OpKind::Attention);
  op->setOperand("q", &q);
  op->setOperand("k", &k);
  op->setOperand("v", &v);
  op->setOperand("extra_k", &ek); // without extra_v
  EXPECT_FALSE(verifyOp(*op, diags));
  ASSERT_FALSE(diags.getCaptured().empty());
  EXPECT_NE(diags.getCaptured().back().message.find("extra_k needs extra_v"),
            std::string::npos);

  auto route = makeOp(OpKind::Route);
  route->addResult();
  Value logits;
  route->setOperand("logits", &logits);
  route->setAttr("top_k", int64_t(0));
  EXPECT_FALSE(verifyOp(*route, diags));
  EXPECT_NE(diags.getCaptured().back().message.find(
                "top_k must be at least 1, got 0"),
            std::string::npos);
}

TEST(OpSchema, AttributeValueChecks) {
  const OpSchema &gelu = opSchema(OpKind::Gelu);
  EXPECT_EQ(checkAttrValue(gelu.attr("approximate"), std::string("tanh")),
            std::nullopt);
  EXPECT_EQ(checkAttrValue(gelu.attr("approximate"), std::string("fast")),
            "approximate must be none or tanh, got \"fast\"");
  EXPECT_EQ(checkAttrValue(gelu.attr("approximate"), int64_t(1)),
            "approximate must be none or tanh, got 1");
  const OpSchema &cache = opSchema(OpKind::Cache);
  // State names are words joined by dots (an encoder-decoder's
  // `decoder.key`), nothing else.
  EXPECT_EQ(checkAttrValue(cache.attr("name"), std::string("decoder.key")),
            std::nullopt);
  for (const char *bad : {"k..v", ".k", "k.", "k v", "k-v", ""})
    EXPECT_NE(checkAttrValue(cache.attr("name"), std::string(bad)),
              std::nullopt)
        << bad;
  EXPECT_EQ(checkAttrValue(cache.attr("name"), std::string("key")),
            std::nullopt);
  const OpSchema &norm = opSchema(OpKind::RmsNorm);
  EXPECT_EQ(checkAttrValue(norm.attr("eps"), 0.0),
            "eps must be greater than 0.0, got 0.0");
  const OpSchema &split = opSchema(OpKind::Split);
  EXPECT_EQ(checkAttrValue(split.attr("sizes"), std::vector<int64_t>{}),
            "sizes must not be empty");
  const OpSchema &cast = opSchema(OpKind::Cast);
  EXPECT_EQ(checkAttrValue(cast.attr("dtype"), std::string("bf16")),
            std::nullopt);
  EXPECT_EQ(checkAttrValue(cast.attr("dtype"), std::string("bfloat16")),
            "unknown dtype 'bfloat16'"); // stored canonical
}

} // namespace
