//===- ClientFilesTest.cpp - What clients load from archc's output --------===//
//
// Unit tests of the files clients read: external data names and chunking,
// transformers.js's I/O names, model-folder config files, genai_config.json
// (checked against onnxruntime-genai's examples in ../shared/reference),
// the files of a vision-language folder, and the bundled-family suggestions.
//
//===----------------------------------------------------------------------===//
#include "TestUtil.h"

#include "driver/ArchCatalog.h"
#include "emit/package/ClientIo.h"
#include "emit/package/GenaiConfig.h"
#include "emit/package/ModelFolder.h"
#include "emit/package/OnnxEmitter.h"
#include "emit/package/VlmFolder.h"
#include "emit/weights/ExternalData.h"

#include <gtest/gtest.h>

using namespace archc;
namespace fs = std::filesystem;

namespace {
/// Compiles a bundled family for ONNX (the default pipeline).
test::Compiled compileBundled(const std::string &arch,
                              const std::string &config) {
  Options opts;
  opts.input = std::string(ARCHC_SOURCE_DIR) + "/archs/" + arch + ".arch";
  opts.config = std::string(ARCHC_SOURCE_DIR) + "/archs/configs/" + config;
  opts.emit = EmitTarget::Onnx;
  test::Compiled r;
  r.c = std::make_unique<Compilation>();
  r.c->diags->setCapture(true);
  std::ostringstream ir;
  r.ok = compileModule(opts, *r.c, ir);
  return r;
}

onnx::GraphProto graphWith(const std::vector<std::string> &inputs,
                           const std::vector<std::string> &outputs) {
  onnx::GraphProto g;
  onnx::NodeProto *n = g.add_node();
  n->set_op_type("Identity");
  for (const std::string &i : inputs) {
    g.add_input()->set_name(i);
    n->add_input(i);
  }
  for (const std::string &o : outputs) {
    g.add_output()->set_name(o);
    n->add_output(o);
  }
  return g;
}

/// Every key of `ours` (recursively) appears in some example at the same
/// path with the same JSON type; returns the first that does not.
std::string unknownKey(const nlohmann::json &ours,
                       const std::vector<nlohmann::json> &examples,
                       const std::string &path = "") {
  for (auto it = ours.begin(); it != ours.end(); ++it) {
    std::string p = path + "/" + it.key();
    // The examples are vision-language decoders fed embeddings; a text
    // decoder is fed ids under the sibling key onnxruntime-genai's config
    // reader accepts beside inputs_embeds (src/config.cpp, decoder inputs).
    std::string probe = p == "/model/decoder/inputs/input_ids"
                            ? std::string("/model/decoder/inputs/inputs_embeds")
                            : p;
    bool found = false;
    std::vector<nlohmann::json> sub;
    for (const nlohmann::json &e : examples) {
      nlohmann::json::json_pointer ptr(probe);
      if (!e.contains(ptr))
        continue;
      const nlohmann::json &v = e[ptr];
      bool sameType = v.type() == it->type() ||
                      (v.is_number() && it->is_number()) ||
                      (v.is_array() && it->is_number()) || // eos id or list
                      (v.is_number() && it->is_array());
      found |= sameType;
      if (v.is_object())
        sub.push_back(e);
    }
    if (!found)
      return p;
    if (it->is_object()) {
      std::string deeper = unknownKey(*it, examples, p);
      if (!deeper.empty())
        return deeper;
    }
  }
  return "";
}
} // namespace

TEST(ExternalData, NamesFollowOptimumAndTransformersJs) {
  EXPECT_EQ(externalDataName("model.onnx", 0), "model.onnx_data");
  EXPECT_EQ(externalDataName("model_fp16.onnx", 2), "model_fp16.onnx_data_2");
  EXPECT_TRUE(isExternalDataOf("model.onnx", "model.onnx_data"));
  EXPECT_TRUE(isExternalDataOf("model.onnx", "model.onnx_data_12"));
  EXPECT_TRUE(isExternalDataOf("model.onnx", "model.onnx.data")); // old name
  EXPECT_FALSE(isExternalDataOf("model.onnx", "model.onnx_data_x"));
  EXPECT_FALSE(isExternalDataOf("model.onnx", "model_fp16.onnx_data"));
}

TEST(ExternalData, ChunksStayUnderTheLimitAndAlignOffsets) {
  test::ScratchDir dir;
  SourceMgr sm;
  DiagnosticEngine diags(sm);
  OutputSet set;
  ASSERT_TRUE(set.begin(dir.path.string(), diags));
  ExternalDataWriter w(set, "onnx", "model.onnx", 1000, /*layoutOnly=*/false,
                       nullptr);
  std::vector<uint8_t> bytes(900, 7);
  std::string loc;
  uint64_t off = 0;
  // 100 + 300 fit in one file (300 at offset 128); 700 more would pass 1000.
  ASSERT_TRUE(w.place(100, loc, off, diags));
  EXPECT_EQ(loc, "model.onnx_data");
  EXPECT_EQ(off, 0u);
  ASSERT_TRUE(w.write(bytes.data(), 100, diags));
  ASSERT_TRUE(w.place(300, loc, off, diags));
  EXPECT_EQ(off, 128u);
  ASSERT_TRUE(w.write(bytes.data(), 300, diags));
  ASSERT_TRUE(w.place(700, loc, off, diags));
  EXPECT_EQ(loc, "model.onnx_data_1");
  EXPECT_EQ(off, 0u);
  ASSERT_TRUE(w.write(bytes.data(), 700, diags));
  // Larger than the limit: a file of its own.
  std::vector<uint8_t> huge(1500, 1);
  ASSERT_TRUE(w.place(1500, loc, off, diags));
  EXPECT_EQ(loc, "model.onnx_data_2");
  ASSERT_TRUE(w.write(huge.data(), huge.size(), diags));
  ASSERT_TRUE(w.finish(diags));
  EXPECT_EQ(w.files().size(), 3u);
  ASSERT_TRUE(set.publish(diags));
  EXPECT_EQ(fs::file_size(dir.path / "onnx" / "model.onnx_data"), 428u);
  EXPECT_EQ(fs::file_size(dir.path / "onnx" / "model.onnx_data_1"), 700u);
  EXPECT_EQ(fs::file_size(dir.path / "onnx" / "model.onnx_data_2"), 1500u);
}

TEST(ClientIo, TransformersJsNames) {
  // Gated DeltaNet: past_conv.{i} / past_recurrent.{i}; key/value unchanged.
  onnx::GraphProto g =
      graphWith({"input_ids", "position_ids", "past_key_values.0.conv_state",
                 "past_key_values.0.recurrent_state", "past_key_values.1.key",
                 "past_key_values.1.value"},
                {"logits", "present.0.conv_state", "present.0.recurrent_state",
                 "present.1.key", "present.1.value"});
  ClientIo io = transformersJsIo(g, "qwen3_next");
  ASSERT_TRUE(io.runs) << io.whyNot;
  EXPECT_FALSE(io.positionIds3d);
  applyClientIo(g, io);
  std::vector<std::string> in, out;
  for (const auto &vi : g.input())
    in.push_back(vi.name());
  for (const auto &vi : g.output())
    out.push_back(vi.name());
  EXPECT_EQ(
      in, (std::vector<std::string>{"input_ids", "position_ids", "past_conv.0",
                                    "past_recurrent.0", "past_key_values.1.key",
                                    "past_key_values.1.value"}));
  EXPECT_EQ(out[1], "present_conv.0");
  EXPECT_EQ(out[2], "present_recurrent.0");
  EXPECT_EQ(g.node(0).input(2), "past_conv.0"); // uses renamed too

  // Qwen3.5: [3, batch, seq] positions taken; the graph's text positions
  // come from attention_mask (transformers.js 4.3.1 offsets its text-only
  // decode positions; tjs.qwen3_5-base2 checks the numbers).
  onnx::GraphProto q = graphWith({"input_ids", "position_ids"}, {"logits"});
  q.mutable_input(1)
      ->mutable_type()
      ->mutable_tensor_type()
      ->mutable_shape()
      ->add_dim()
      ->set_dim_param("batch_size");
  ClientIo qio = transformersJsIo(q, "qwen3_5_text");
  ASSERT_TRUE(qio.positionIds3d);
  applyClientIo(q, qio);
  EXPECT_EQ(q.input(1).type().tensor_type().shape().dim(0).dim_value(), 3);
  const onnx::NodeProto *text = nullptr;
  bool readsMask = false, readsPositions = false;
  for (const auto &n : q.node()) {
    if (n.output_size() && n.output(0) == "position_ids/text")
      text = &n;
    for (const auto &in : n.input()) {
      readsMask |= in == "attention_mask";
      readsPositions |= in == "position_ids";
    }
  }
  ASSERT_NE(text, nullptr);
  EXPECT_EQ(text->op_type(), "Max"); // padding clamped to 0
  EXPECT_TRUE(readsMask);
  EXPECT_FALSE(readsPositions);
  EXPECT_EQ(q.node(q.node_size() - 1).input(1), "position_ids/text");

  // MLA: the latent and the rope key take the key/value slots.
  onnx::GraphProto mla =
      graphWith({"past_key_values.0.compressed_kv", "past_key_values.0.k_pe"},
                {"present.0.compressed_kv", "present.0.k_pe"});
  ClientIo mio = transformersJsIo(mla, "deepseek_v3");
  ASSERT_TRUE(mio.runs);
  EXPECT_EQ(mio.rename.at("past_key_values.0.compressed_kv"),
            "past_key_values.0.key");
  EXPECT_EQ(mio.rename.at("present.0.k_pe"), "present.0.value");

  // No class, or no cache slots: reported with the reason.
  ClientIo none = transformersJsIo(mla, "mixtral");
  EXPECT_FALSE(none.runs);
  EXPECT_NE(none.whyNot.find("no causal-LM class for model_type 'mixtral'"),
            std::string::npos);
  onnx::GraphProto v3 = graphWith({"past_key_values.0.kv"}, {"present.0.kv"});
  ClientIo dsv3 = transformersJsIo(v3, "deepseek_v3");
  EXPECT_FALSE(dsv3.runs);
  EXPECT_NE(dsv3.whyNot.find("layer 0's states (kv)"), std::string::npos);
  // Plain key/value graphs are unchanged.
  onnx::GraphProto kv = graphWith({"past_key_values.0.key"}, {"present.0.key"});
  EXPECT_FALSE(transformersJsIo(kv, "llama").changesGraph());
}

/// The names of `list`.
std::vector<std::string>
namesOf(const google::protobuf::RepeatedPtrField<onnx::ValueInfoProto> &list) {
  std::vector<std::string> names;
  for (const auto &vi : list)
    names.push_back(vi.name());
  return names;
}

/// Gives every input and output of `g` the shape [batch_size, 3, last].
void lastDims(onnx::GraphProto &g, const std::map<std::string, int64_t> &dims) {
  for (auto *list : {g.mutable_input(), g.mutable_output()})
    for (auto &vi : *list) {
      auto *shape = vi.mutable_type()->mutable_tensor_type()->mutable_shape();
      shape->add_dim()->set_dim_param("batch_size");
      shape->add_dim()->set_dim_value(3);
      shape->add_dim()->set_dim_value(dims.at(vi.name()));
    }
}

TEST(ClientIo, TransformersJsStateSpaceNames) {
  // getCacheNames: LFM2's conv layers past_conv.{i}; the Mamba-2 hybrids'
  // past_conv.{i} + past_ssm.{i}, Falcon-H1's beside the layer's key and
  // value; outputs present_conv.{i} / present_ssm.{i}.
  onnx::GraphProto lfm2 = graphWith(
      {"input_ids", "past_key_values.0.conv_state", "past_key_values.1.key",
       "past_key_values.1.value"},
      {"logits", "present.0.conv_state", "present.1.key", "present.1.value"});
  ClientIo io = transformersJsIo(lfm2, "lfm2");
  ASSERT_TRUE(io.runs) << io.whyNot;
  applyClientIo(lfm2, io);
  EXPECT_EQ(namesOf(lfm2.input()),
            (std::vector<std::string>{"input_ids", "past_conv.0",
                                      "past_key_values.1.key",
                                      "past_key_values.1.value"}));
  EXPECT_EQ(namesOf(lfm2.output())[1], "present_conv.0");

  for (const char *type : {"granitemoehybrid", "nemotron_h", "falcon_h1"}) {
    onnx::GraphProto g = graphWith(
        {"past_key_values.0.conv_state", "past_key_values.0.ssm_state"},
        {"present.0.conv_state", "present.0.ssm_state"});
    ClientIo m = transformersJsIo(g, type);
    ASSERT_TRUE(m.runs) << type << ": " << m.whyNot;
    applyClientIo(g, m);
    EXPECT_EQ(namesOf(g.input()),
              (std::vector<std::string>{"past_conv.0", "past_ssm.0"}))
        << type;
    EXPECT_EQ(namesOf(g.output()),
              (std::vector<std::string>{"present_conv.0", "present_ssm.0"}))
        << type;
  }
  onnx::GraphProto h1 =
      graphWith({"past_key_values.0.key", "past_key_values.0.value",
                 "past_key_values.0.conv_state", "past_key_values.0.ssm_state"},
                {"present.0.key", "present.0.value", "present.0.conv_state",
                 "present.0.ssm_state"});
  ClientIo hio = transformersJsIo(h1, "falcon_h1");
  ASSERT_TRUE(hio.runs) << hio.whyNot;
  applyClientIo(h1, hio);
  EXPECT_EQ(namesOf(h1.input()),
            (std::vector<std::string>{"past_key_values.0.key",
                                      "past_key_values.0.value", "past_conv.0",
                                      "past_ssm.0"}));
  // Only the families getCacheNames lists: Bamba has no class, and a
  // Mamba-2 layer with both states in a family without these names is not
  // renamed.
  onnx::GraphProto other =
      graphWith({"past_key_values.0.conv_state", "past_key_values.0.ssm_state"},
                {"present.0.conv_state", "present.0.ssm_state"});
  EXPECT_FALSE(transformersJsIo(other, "bamba").runs);
  ClientIo gdn = transformersJsIo(other, "qwen3_next");
  EXPECT_FALSE(gdn.runs);
  EXPECT_NE(gdn.whyNot.find("(conv_state, ssm_state)"), std::string::npos);
}

TEST(ClientIo, TransformersJsDeepSeekV4Names) {
  // Layer 0 sliding (window keys only), layer 1 CSA (compressor and
  // indexer), layer 2 HCA (compressor). transformers.js feeds
  // past_key_values.{i}.key / .value, past_compressor.{i}.kv / .gate and
  // past_indexer.{i}.kv / .gate.
  const std::vector<std::string> states = {"0.kv",
                                           "1.kv",
                                           "1.compressed_kv",
                                           "1.compressed_kv_state",
                                           "1.index_kv",
                                           "1.index_kv_state",
                                           "2.kv",
                                           "2.compressed_kv",
                                           "2.compressed_kv_state"};
  std::vector<std::string> in = {"input_ids"}, out = {"logits"};
  std::map<std::string, int64_t> dims = {{"input_ids", 1}, {"logits", 8}};
  for (const std::string &st : states) {
    int64_t last = st.find("index_kv_state") != std::string::npos ? 64
                   : st.find("kv_state") != std::string::npos     ? 128
                   : st.find("index_kv") != std::string::npos     ? 16
                                                                  : 32;
    in.push_back("past_key_values." + st);
    out.push_back("present." + st);
    dims[in.back()] = dims[out.back()] = last;
  }
  onnx::GraphProto g = graphWith(in, out);
  lastDims(g, dims);
  ClientIo io = transformersJsIo(g, "deepseek_v4");
  ASSERT_TRUE(io.runs) << io.whyNot;
  ASSERT_TRUE(io.changesGraph());
  applyClientIo(g, io);
  EXPECT_EQ(
      namesOf(g.input()),
      (std::vector<std::string>{
          "input_ids", "past_key_values.0.key", "past_key_values.1.key",
          "past_key_values.1.value", "past_compressor.1.kv",
          "past_compressor.1.gate", "past_indexer.1.kv", "past_indexer.1.gate",
          "past_key_values.2.key", "past_key_values.2.value",
          "past_compressor.2.kv", "past_compressor.2.gate"}));
  EXPECT_EQ(namesOf(g.output()),
            (std::vector<std::string>{
                "logits", "present.0.key", "present.1.key", "present.1.value",
                "present_compressor.1.kv", "present_compressor.1.gate",
                "present_indexer.1.kv", "present_indexer.1.gate",
                "present.2.key", "present.2.value", "present_compressor.2.kv",
                "present_compressor.2.gate"}));
  auto last = [](const onnx::ValueInfoProto &vi) {
    const auto &s = vi.type().tensor_type().shape();
    return s.dim(s.dim_size() - 1).dim_value();
  };
  std::map<std::string, int64_t> got;
  for (const auto &vi : g.input())
    got[vi.name()] = last(vi);
  for (const auto &vi : g.output())
    got[vi.name()] = last(vi);
  EXPECT_EQ(got["past_key_values.1.value"], 48); // entries | indexer keys
  EXPECT_EQ(got["present.1.value"], 48);
  EXPECT_EQ(got["past_key_values.2.value"], 32); // renamed only
  EXPECT_EQ(got["past_compressor.1.kv"], 64);    // kv | gate halves
  EXPECT_EQ(got["present_compressor.1.gate"], 64);
  EXPECT_EQ(got["past_indexer.1.gate"], 32);
  // The graph's own names are computed from the client's tensors: the
  // input side joins (Concat) or splits (Split), before every other node;
  // the output side after them.
  std::map<std::string, const onnx::NodeProto *> producer;
  for (const auto &n : g.node())
    for (const auto &o : n.output())
      producer[o] = &n;
  const onnx::NodeProto *state =
      producer.at("past_key_values.1.compressed_kv_state");
  EXPECT_EQ(state->op_type(), "Concat");
  EXPECT_EQ(
      std::vector<std::string>(state->input().begin(), state->input().end()),
      (std::vector<std::string>{"past_compressor.1.kv",
                                "past_compressor.1.gate"}));
  const onnx::NodeProto *entries = producer.at("past_key_values.1.index_kv");
  EXPECT_EQ(entries->op_type(), "Split");
  EXPECT_EQ(entries->input(0), "past_key_values.1.value");
  EXPECT_EQ(entries->output(0), "past_key_values.1.compressed_kv");
  const onnx::NodeProto *gate = producer.at("present_compressor.1.gate");
  EXPECT_EQ(gate->op_type(), "Split");
  EXPECT_EQ(gate->input(0), "present.1.compressed_kv_state");
  const onnx::NodeProto *value = producer.at("present.1.value");
  EXPECT_EQ(value->op_type(), "Concat");
  EXPECT_EQ(value->input(1), "present.1.index_kv");
  // Topological order: the Identity standing for the model between.
  int identity = -1;
  for (int i = 0; i < g.node_size(); ++i)
    if (g.node(i).op_type() == "Identity")
      identity = i;
  for (int i = 0; i < g.node_size(); ++i) {
    bool readsModel = false;
    for (const auto &x : g.node(i).input())
      readsModel |= x.rfind("present.", 0) == 0;
    if (readsModel)
      EXPECT_GT(i, identity) << g.node(i).name();
  }
  EXPECT_EQ(g.node(identity).input(1), "past_key_values.0.key");
}

TEST(ClientIo, TransformersJsMultiQueryKeyValue) {
  // A `multi_query` config (Falcon): transformers.js feeds one key_value
  // tensor per layer; the graph splits it and concatenates the presents.
  onnx::GraphProto g = graphWith(
      {"input_ids", "past_key_values.0.key", "past_key_values.0.value"},
      {"logits", "present.0.key", "present.0.value"});
  for (auto *list : {g.mutable_input(), g.mutable_output()})
    for (auto &vi : *list) {
      auto *shape = vi.mutable_type()->mutable_tensor_type()->mutable_shape();
      shape->add_dim()->set_dim_param("batch_size");
      shape->add_dim()->set_dim_value(1);
      shape->add_dim()->set_dim_param("past_sequence_length");
      shape->add_dim()->set_dim_value(16);
    }
  EXPECT_TRUE(transformersJsIo(g, "falcon").fusedKeyValue.empty());
  ClientIo io = transformersJsIo(g, "falcon", /*multiQuery=*/true);
  ASSERT_TRUE(io.runs) << io.whyNot;
  ASSERT_TRUE(io.changesGraph());
  applyClientIo(g, io);
  ASSERT_EQ(g.input_size(), 2);
  EXPECT_EQ(g.input(1).name(), "past_key_values.0.key_value");
  EXPECT_EQ(g.input(1).type().tensor_type().shape().dim(3).dim_value(), 32);
  EXPECT_EQ(g.input(1).type().tensor_type().shape().dim(2).dim_param(),
            "past_sequence_length");
  ASSERT_EQ(g.output_size(), 2);
  EXPECT_EQ(g.output(1).name(), "present.0.key_value");
  // Split first (after its sizes), the concat last.
  EXPECT_EQ(g.node(1).op_type(), "Split");
  EXPECT_EQ(g.node(1).output(0), "past_key_values.0.key");
  EXPECT_EQ(g.node(1).output(1), "past_key_values.0.value");
  EXPECT_EQ(g.node(g.node_size() - 1).op_type(), "Concat");
  EXPECT_EQ(g.node(g.node_size() - 1).input(1), "present.0.value");
}

TEST(ModelFolder, FileNamesAndLayerTypes) {
  EXPECT_EQ(folderModelFile(ir::DType::F32), "model.onnx");
  EXPECT_EQ(folderModelFile(ir::DType::F16), "model_fp16.onnx");
  EXPECT_EQ(folderModelFile(ir::DType::BF16), "model_bf16.onnx");
  // transformers.js 4.3.1's dtype suffixes (q4 -> _q4, q4f16 -> _q4f16,
  // int8 -> _int8); the block size and symmetry do not change the name.
  ir::QuantOptions int4, int8;
  int4.bits = 4;
  int8.bits = 8;
  auto file = [](ir::DType t, const ir::QuantOptions &q) {
    return folderModelFile(t, ir::quantFileTag(q, t));
  };
  EXPECT_EQ(file(ir::DType::F32, int4), "model_q4.onnx");
  EXPECT_EQ(file(ir::DType::F16, int4), "model_q4f16.onnx");
  EXPECT_EQ(file(ir::DType::F32, int8), "model_int8.onnx");
  int4.block = 128;
  int4.symmetric = false;
  EXPECT_EQ(file(ir::DType::F32, int4), "model_q4.onnx");
  // No transformers.js dtype: distinct names, never another variant's.
  EXPECT_EQ(file(ir::DType::F16, int8), "model_int8f16.onnx");
  EXPECT_EQ(file(ir::DType::BF16, int4), "model_q4bf16.onnx");

  test::Compiled next = compileBundled("qwen3_next", "tiny/qwen3_next.json");
  ASSERT_TRUE(next.ok) << next.diagnostics();
  EXPECT_EQ(deriveLayerTypes(next.module()),
            (std::vector<std::string>{"linear_attention", "linear_attention",
                                      "linear_attention", "full_attention"}));
  nlohmann::json in = next.c->config->root();
  nlohmann::json out =
      outputConfig(in, next.module(), {{"model.onnx", 3}}, nullptr);
  EXPECT_EQ(out["layer_types"].size(), 4u);
  EXPECT_EQ(
      out["transformers.js_config"]["use_external_data_format"]["model.onnx"],
      3);
  // Chunk counts of other model files in the folder are kept; a file now
  // without external data is dropped.
  nlohmann::json previous = {{"transformers.js_config",
                              {{"use_external_data_format",
                                {{"model_fp16.onnx", 2}, {"model.onnx", 9}}}}}};
  out = outputConfig(in, next.module(), {{"model.onnx", 0}}, &previous);
  EXPECT_EQ(out["transformers.js_config"]["use_external_data_format"],
            (nlohmann::json{{"model_fp16.onnx", 2}}));

  // transformers.js's dtype: the model file this run writes; kept from the
  // folder's config where this run's file has none; an input's own dtypes
  // (which name its folder's files) dropped.
  auto dtype = [](ir::DType t, const ir::QuantOptions &q) {
    return transformersJsDtype(t, ir::quantFileTag(q, t));
  };
  EXPECT_EQ(transformersJsDtype(ir::DType::F32), "fp32");
  EXPECT_EQ(transformersJsDtype(ir::DType::F16), "fp16");
  EXPECT_EQ(transformersJsDtype(ir::DType::BF16), "");
  EXPECT_EQ(dtype(ir::DType::F32, int4), "q4");
  EXPECT_EQ(dtype(ir::DType::F16, int4), "q4f16");
  EXPECT_EQ(dtype(ir::DType::F32, int8), "int8");
  EXPECT_EQ(dtype(ir::DType::F16, int8), "");
  EXPECT_EQ(dtype(ir::DType::BF16, int4), "");
  nlohmann::json withDtype = in;
  withDtype["transformers.js_config"] = {
      {"dtype", "q4f16"},
      {"kv_cache_dtype", {{"q4f16", "float16"}}},
      {"device_config", {{"webgpu", {{"dtype", "q4f16"}}}}}};
  out = outputConfig(withDtype, next.module(), {}, nullptr, "fp32");
  EXPECT_EQ(out["transformers.js_config"]["dtype"], "fp32");
  EXPECT_FALSE(
      out["transformers.js_config"]["device_config"]["webgpu"].contains(
          "dtype"));
  EXPECT_TRUE(out["transformers.js_config"].contains("kv_cache_dtype"));
  out = outputConfig(withDtype, next.module(), {}, nullptr, "");
  EXPECT_FALSE(out["transformers.js_config"].contains("dtype"));
  nlohmann::json earlier = {{"transformers.js_config", {{"dtype", "q4"}}}};
  out = outputConfig(in, next.module(), {}, &earlier, "");
  EXPECT_EQ(out["transformers.js_config"]["dtype"], "q4");
  out = outputConfig(in, next.module(), {}, &earlier, "fp16");
  EXPECT_EQ(out["transformers.js_config"]["dtype"], "fp16");

  // Mamba layers: no layer_types derived (the configs say which layers are
  // which in their own fields, and transformers.js names every layer's
  // states when layer_types is absent).
  for (const char *family : {"falcon_h1", "nemotron_h"}) {
    test::Compiled hybrid =
        compileBundled(family, std::string("tiny/") + family + ".json");
    ASSERT_TRUE(hybrid.ok) << hybrid.diagnostics();
    EXPECT_TRUE(deriveLayerTypes(hybrid.module()).empty()) << family;
  }

  // A plain decoder gets no layer_types.
  test::Compiled llama = compileBundled("llama", "tiny/llama.json");
  ASSERT_TRUE(llama.ok);
  EXPECT_FALSE(
      outputConfig(llama.c->config->root(), llama.module(), {}, nullptr)
          .contains("layer_types"));

  // A quantized checkpoint's quantization_config (top level or in
  // text_config) does not describe the folder's models; the rest stays.
  nlohmann::json fp8 = llama.c->config->root();
  fp8["quantization_config"] = {{"quant_method", "fp8"}, {"fmt", "e4m3"}};
  nlohmann::json fp8Out = outputConfig(fp8, llama.module(), {}, nullptr);
  EXPECT_FALSE(fp8Out.contains("quantization_config"));
  EXPECT_EQ(fp8Out["hidden_size"], fp8["hidden_size"]);
  nlohmann::json nested = {
      {"model_type", "m"},
      {"text_config",
       {{"hidden_size", 8},
        {"quantization_config", fp8["quantization_config"]}}}};
  nlohmann::json nestedOut = outputConfig(nested, llama.module(), {}, nullptr);
  EXPECT_FALSE(nestedOut["text_config"].contains("quantization_config"));
  EXPECT_EQ(nestedOut["text_config"]["hidden_size"], 8);

  // Qwen3.5-MoE's text config becomes its composite type's text_config.
  test::Compiled moe = compileBundled("qwen3_5", "tiny/qwen3_5_moe.json");
  ASSERT_TRUE(moe.ok) << moe.diagnostics();
  nlohmann::json moeIn = moe.c->config->root();
  if (moeIn.value("model_type", "") == "qwen3_5_moe_text") {
    nlohmann::json wrapped = outputConfig(moeIn, moe.module(), {}, nullptr);
    EXPECT_EQ(wrapped["model_type"], "qwen3_5_moe");
    EXPECT_EQ(wrapped["text_config"]["model_type"], "qwen3_5_moe_text");
    EXPECT_TRUE(wrapped["text_config"].contains("layer_types"));
    EXPECT_TRUE(wrapped["vision_config"].is_object());
  }
}

// The browser's default device (onnxruntime-web's WASM build, which
// dequantizes a MatMulNBits matrix on every call) loads the folder's float
// model in place of a quantized one: model.onnx, else model_fp16.onnx,
// while its weights as float32 fit the WASM memory bound.
TEST(ModelFolder, WasmLoadsTheFloatModelBesideAQuantizedOne) {
  test::ScratchDir dir;
  EXPECT_EQ(wasmFloatDtype(dir.path), "");
  dir.write("onnx/model_q4.onnx", "q4");
  EXPECT_EQ(wasmFloatDtype(dir.path), "");
  dir.write("onnx/model_fp16.onnx", "fp16");
  dir.write("onnx/model_fp16.onnx_data", std::string(1000, 'x'));
  EXPECT_EQ(wasmFloatDtype(dir.path), "fp16");
  dir.write("onnx/model.onnx", "fp32");
  EXPECT_EQ(wasmFloatDtype(dir.path), "fp32");
  // Past the bound (sparse files: no bytes written): the next candidate,
  // then none. A float16 model counts twice its bytes.
  fs::resize_file(dir.path / "onnx" / "model.onnx", kWasmFloatBytes + 1);
  EXPECT_EQ(wasmFloatDtype(dir.path), "fp16");
  dir.write("onnx/model_fp16.onnx_data_1", "");
  fs::resize_file(dir.path / "onnx" / "model_fp16.onnx_data_1",
                  kWasmFloatBytes / 2);
  EXPECT_EQ(wasmFloatDtype(dir.path), "");

  test::Compiled llama = compileBundled("llama", "tiny/llama.json");
  ASSERT_TRUE(llama.ok) << llama.diagnostics();
  nlohmann::json in = llama.c->config->root();
  nlohmann::json out =
      outputConfig(in, llama.module(), {}, nullptr, "q4", "fp32");
  EXPECT_EQ(out["transformers.js_config"]["dtype"], "q4");
  EXPECT_EQ(out["transformers.js_config"]["device_config"],
            (nlohmann::json{{"wasm", {{"dtype", "fp32"}}}}));
  // A float run (or a quantized one with no float model beside it) writes
  // none; an input's other per-device settings stay.
  EXPECT_FALSE(outputConfig(in, llama.module(), {}, nullptr,
                            "fp32")["transformers.js_config"]
                   .contains("device_config"));
  nlohmann::json withDevices = in;
  withDevices["transformers.js_config"] = {
      {"device_config",
       {{"wasm", {{"dtype", "q8"}}}, {"webgpu", {{"dtype", "q4f16"}}}}}};
  out = outputConfig(withDevices, llama.module(), {}, nullptr, "q4");
  EXPECT_FALSE(out["transformers.js_config"]["device_config"].contains("wasm"));
  EXPECT_TRUE(
      out["transformers.js_config"]["device_config"].contains("webgpu"));
}

TEST(GenaiConfig, ModelTypesTheRuntimeAccepts) {
  EXPECT_EQ(genaiModelType("llama"), "llama");
  EXPECT_EQ(genaiModelType("qwen3"), "qwen3");
  EXPECT_EQ(genaiModelType("gpt_oss"), "gptoss");
  EXPECT_EQ(genaiModelType("gemma3_text"), "gemma3_text");
  EXPECT_EQ(genaiModelType("gemma3"), "gemma3_text");
  EXPECT_EQ(genaiModelType("qwen3_5"), "qwen3_5_text");
  EXPECT_EQ(genaiModelType("phimoe"), "phimoe");
  for (const char *t : {"gptj", "qwen3_moe", "qwen3_next", "deepseek_v3",
                        "deepseek_v4", "mixtral", "minimax_m2"})
    EXPECT_EQ(genaiModelType(t), "decoder") << t;
}

TEST(GenaiConfig, MatchesOnnxruntimeGenaiExamples) {
  fs::path dir = ARCHC_GENAI_EXAMPLES;
  std::vector<nlohmann::json> examples;
  std::error_code ec;
  for (const auto &e : fs::directory_iterator(dir, ec))
    if (e.path().extension() == ".json") {
      std::ifstream in(e.path());
      examples.push_back(nlohmann::json::parse(in));
    }
  if (examples.empty())
    GTEST_SKIP() << "no examples in " << dir;
  struct Case {
    const char *arch, *config, *type;
  } cases[] = {{"qwen2", "tiny/qwen2.json", "qwen2"},
               {"gpt2", "tiny/gpt2.json", "gpt2"},
               {"qwen3_5", "tiny/qwen3_5.json", nullptr},
               {"qwen3_next", "tiny/qwen3_next.json", "decoder"}};
  for (const Case &c : cases) {
    test::Compiled r = compileBundled(c.arch, c.config);
    ASSERT_TRUE(r.ok) << r.diagnostics();
    nlohmann::json generation = {{"do_sample", true},
                                 {"temperature", 0.7},
                                 {"top_k", 20},
                                 {"eos_token_id", {1, 2}}};
    nlohmann::ordered_json g = makeGenaiConfig(
        r.module(), r.c->config->root(), &generation, "onnx/model.onnx", true);
    nlohmann::json plain = nlohmann::json::parse(g.dump());
    EXPECT_EQ(unknownKey(plain, examples), "") << c.arch;
    EXPECT_EQ(plain["model"]["decoder"]["filename"], "onnx/model.onnx");
    EXPECT_EQ(plain["search"]["do_sample"], true);
    EXPECT_EQ(plain["search"]["temperature"], 0.7);
    EXPECT_EQ(plain["search"]["top_k"], 20);
    EXPECT_EQ(plain["model"]["eos_token_id"], (nlohmann::json{1, 2}));
    EXPECT_GT(plain["model"]["decoder"]["head_size"].get<int>(), 0);
    EXPECT_GT(plain["model"]["context_length"].get<int>(), 0);
    if (c.type)
      EXPECT_EQ(plain["model"]["type"], c.type);
    std::string why;
    EXPECT_TRUE(genaiBindsStates(r.module(), why)) << why;
  }
  // The examples' own LLM types map to themselves.
  EXPECT_EQ(genaiModelType("gpt2"), "gpt2");
}

TEST(ArchCatalog, ClosestNames) {
  std::vector<std::string> known = {"LlamaForCausalLM", "MistralForCausalLM",
                                    "Qwen3ForCausalLM", "Qwen3MoeForCausalLM",
                                    "PhiForCausalLM",   "Phi3ForCausalLM"};
  EXPECT_EQ(closestNames("LamaForCausalLM", known),
            (std::vector<std::string>{"LlamaForCausalLM"}));
  EXPECT_EQ(closestNames("Qwen3MoeForSequenceClassification", known)[0],
            "Qwen3MoeForCausalLM");
  EXPECT_EQ(closestNames("qwen3forcausallm", known)[0], "Qwen3ForCausalLM");
  EXPECT_TRUE(closestNames("FooForCausalLM", known).empty());
  EXPECT_LE(closestNames("Phi4ForCausalLM", known).size(), 3u);
}

namespace {
const ir::Module *packageGraph(const test::Compiled &c,
                               const std::string &name) {
  for (const NamedGraph &g : c.c->graphs)
    if (g.name == name)
      return g.module.get();
  return nullptr;
}
} // namespace

TEST(VlmFolder, TransformersJsSessionFiles) {
  // transformers.js 4.3.1's image-text-to-text session names, with the
  // dtype suffixes of its text folders.
  EXPECT_EQ(vlmModelFile("vision_encoder", ir::DType::F32),
            "vision_encoder.onnx");
  EXPECT_EQ(vlmModelFile("embedding", ir::DType::F16),
            "embed_tokens_fp16.onnx");
  EXPECT_EQ(vlmModelFile("decoder", ir::DType::F32),
            "decoder_model_merged.onnx");
  nlohmann::json config = {{"model_type", "llava"}};
  setSessionDtypes(config, nullptr, "fp16",
                   {"vision_encoder", "embedding", "decoder"});
  EXPECT_EQ(config["transformers.js_config"]["dtype"],
            nlohmann::json({{"vision_encoder", "fp16"},
                            {"embed_tokens", "fp16"},
                            {"decoder_model_merged", "fp16"}}));
  // A run whose files have no transformers.js dtype keeps the folder's.
  nlohmann::json bf16 = {{"model_type", "llava"}};
  setSessionDtypes(bf16, config, "", {"vision_encoder"});
  EXPECT_EQ(bf16["transformers.js_config"]["dtype"],
            config["transformers.js_config"]["dtype"]);
}

TEST(VlmFolder, EmbeddingFeaturesDefaultAndFloat32PixelValues) {
  onnx::GraphProto g = graphWith({"input_ids", "image_features"}, {"y"});
  auto *t = g.mutable_input(1)->mutable_type()->mutable_tensor_type();
  t->set_elem_type(onnx::TensorProto_DataType_FLOAT16);
  t->mutable_shape()->add_dim()->set_dim_param("num_image_tokens");
  t->mutable_shape()->add_dim()->set_dim_value(64);
  ASSERT_TRUE(giveZeroRowDefault(g, "image_features"));
  ASSERT_EQ(g.initializer_size(), 1);
  EXPECT_EQ(g.initializer(0).name(), "image_features");
  EXPECT_EQ(g.initializer(0).data_type(), onnx::TensorProto_DataType_FLOAT16);
  EXPECT_EQ(std::vector<int64_t>(g.initializer(0).dims().begin(),
                                 g.initializer(0).dims().end()),
            (std::vector<int64_t>{0, 64}));
  EXPECT_FALSE(giveZeroRowDefault(g, "pixel_values"));

  onnx::GraphProto v = graphWith({"pixel_values"}, {"image_features"});
  v.mutable_input(0)->mutable_type()->mutable_tensor_type()->set_elem_type(
      onnx::TensorProto_DataType_FLOAT16);
  EXPECT_EQ(takeFloat32Inputs(v), std::vector<std::string>{"pixel_values"});
  EXPECT_EQ(v.input(0).type().tensor_type().elem_type(),
            onnx::TensorProto_DataType_FLOAT);
  // The Cast comes first; the graph reads its output.
  EXPECT_EQ(v.node(0).op_type(), "Cast");
  EXPECT_EQ(v.node(0).input(0), "pixel_values");
  EXPECT_EQ(v.node(1).input(0), v.node(0).output(0));
}

TEST(VlmFolder, DecoderInputsTransformersJsDoesNotFeed) {
  // transformers.js feeds inputs_embeds, attention_mask, position_ids and
  // the cache. The bundled decoders read nothing else: Gemma 3's image
  // blocks and Qwen3-VL's deepstack features travel as side channels of
  // inputs_embeds.
  for (const auto &[arch, config] :
       std::vector<std::pair<std::string, std::string>>{
           {"llava", "tiny/llava.json"},
           {"gemma3_multimodal", "tiny/gemma3_multimodal.json"},
           {"qwen3_vl", "tiny/qwen3_vl.json"}}) {
    auto c = compileBundled(arch, config);
    ASSERT_TRUE(c.ok) << c.diagnostics();
    EXPECT_TRUE(
        transformersJsUnfedDecoderInputs(*packageGraph(c, "decoder")).empty())
        << arch;
  }
  // A decoder with another input is reported (the folder note), cache
  // inputs and use_cache_branch are not.
  ir::Module m;
  for (const char *n :
       {"inputs_embeds", "attention_mask", "position_ids", "token_type_ids",
        "past_key_values.0.key", "use_cache_branch", "deepstack_features"})
    m.graph.body.addArgument(ir::TensorType(ir::DType::F32, {}), n);
  EXPECT_EQ(transformersJsUnfedDecoderInputs(m),
            (std::vector<std::string>{"token_type_ids", "deepstack_features"}));
}
