//===- ClientIo.cpp - Graph I/O as a client runtime names it --------------===//
//
// This file implements the transformers.js I/O convention (see the header
// and docs/onnx.md, "Model folders").
//
//===----------------------------------------------------------------------===//
#include "emit/ClientIo.h"

#include <map>
#include <regex>
#include <set>

namespace archc {

namespace {
// transformers.js 4.3.1, src/models/registry.js:
// MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.
const std::set<std::string> kCausalLmTypes = {"bloom",
                                              "gpt2",
                                              "gpt_oss",
                                              "jais",
                                              "gptj",
                                              "gpt_bigcode",
                                              "gpt_neo",
                                              "gpt_neox",
                                              "codegen",
                                              "llama",
                                              "nanochat",
                                              "apertus",
                                              "llama4_text",
                                              "arcee",
                                              "afmoe",
                                              "lfm2",
                                              "lfm2_moe",
                                              "smollm3",
                                              "exaone",
                                              "olmo",
                                              "olmo2",
                                              "olmo3",
                                              "olmo_hybrid",
                                              "mobilellm",
                                              "granite",
                                              "granitemoehybrid",
                                              "cohere",
                                              "cohere2",
                                              "gemma",
                                              "gemma2",
                                              "vaultgemma",
                                              "gemma3_text",
                                              "gemma3",
                                              "helium",
                                              "glm",
                                              "glm_moe_dsa",
                                              "openelm",
                                              "qwen2",
                                              "qwen2_moe",
                                              "qwen3",
                                              "qwen3_moe",
                                              "qwen3_next",
                                              "qwen2_vl",
                                              "qwen2_5_vl",
                                              "qwen3_vl",
                                              "qwen3_vl_moe",
                                              "qwen3_5",
                                              "qwen3_5_text",
                                              "qwen3_5_moe",
                                              "gemma3n",
                                              "gemma4",
                                              "phi",
                                              "phi3",
                                              "mpt",
                                              "opt",
                                              "mbart",
                                              "mistral",
                                              "mistral4",
                                              "ministral",
                                              "ministral3",
                                              "ernie4_5",
                                              "starcoder2",
                                              "deepseek_v3",
                                              "deepseek_v4",
                                              "falcon",
                                              "falcon_h1",
                                              "nemotron_h",
                                              "trocr",
                                              "solar_open",
                                              "stablelm",
                                              "modernbert-decoder",
                                              "hunyuan_v1_dense",
                                              "youtu",
                                              "zaya",
                                              "hrm_text",
                                              "phi3_v"};

// getCacheNames: the types whose linear-attention layers are
// past_conv.{i} + past_recurrent.{i}.
const std::set<std::string> kGatedDeltaNetTypes = {
    "qwen3_next", "qwen3_5_text", "qwen3_5_moe_text", "qwen3_5", "qwen3_5_moe"};

// Classes derived from Qwen2VLForConditionalGeneration: their
// prepare_inputs_for_generation passes position_ids [3, batch, seq].
const std::set<std::string> kQwenVlTypes = {
    "qwen2_vl", "qwen2_5_vl",   "qwen3_vl",   "qwen3_vl_moe",
    "qwen3_5",  "qwen3_5_text", "qwen3_5_moe"};
} // namespace

bool transformersJsKnowsModelType(const std::string &modelType) {
  return kCausalLmTypes.count(modelType) != 0;
}

ClientIo transformersJsIo(const onnx::GraphProto &graph,
                          const std::string &modelType) {
  ClientIo io;
  if (!transformersJsKnowsModelType(modelType)) {
    io.runs = false;
    io.whyNot =
        "transformers.js 4.3.1 has no causal-LM class for model_type '" +
        modelType + "'";
    return io;
  }
  static const std::regex state(R"((past_key_values|present)\.(\d+)\.(\w+))");
  // Per layer: its state names.
  std::map<std::string, std::set<std::string>> layers;
  auto scan = [&](const std::string &name) {
    std::smatch m;
    if (std::regex_match(name, m, state))
      layers[m[2]].insert(m[3]);
  };
  bool hasPositions = false;
  for (const auto &vi : graph.input()) {
    scan(vi.name());
    hasPositions |= vi.name() == "position_ids";
  }
  for (const auto &vi : graph.output())
    scan(vi.name());
  auto both = [&](const std::string &layer, const std::string &from,
                  const std::string &past, const std::string &present) {
    io.rename["past_key_values." + layer + "." + from] = past;
    io.rename["present." + layer + "." + from] = present;
  };
  for (const auto &[layer, names] : layers) {
    if (names == std::set<std::string>{"key", "value"})
      continue;
    if (names == std::set<std::string>{"conv_state", "recurrent_state"} &&
        kGatedDeltaNetTypes.count(modelType)) {
      both(layer, "conv_state", "past_conv." + layer, "present_conv." + layer);
      both(layer, "recurrent_state", "past_recurrent." + layer,
           "present_recurrent." + layer);
      continue;
    }
    if (names == std::set<std::string>{"compressed_kv", "k_pe"} &&
        modelType == "deepseek_v3") {
      // MLA: the two cached tensors take the two slots transformers.js
      // creates per layer (it reads only their names and, for the cached
      // length, their second-to-last dimension).
      both(layer, "compressed_kv", "past_key_values." + layer + ".key",
           "present." + layer + ".key");
      both(layer, "k_pe", "past_key_values." + layer + ".value",
           "present." + layer + ".value");
      continue;
    }
    std::string list;
    for (const std::string &n : names)
      list += (list.empty() ? "" : ", ") + n;
    io.runs = false;
    io.whyNot = "transformers.js 4.3.1 creates no cache inputs for layer " +
                layer + "'s states (" + list + ") of model_type '" + modelType +
                "'";
    io.rename.clear();
    return io;
  }
  io.positionIds3d = hasPositions && kQwenVlTypes.count(modelType);
  return io;
}

void applyClientIo(onnx::GraphProto &graph, const ClientIo &io) {
  auto renamed = [&](const std::string &n) -> const std::string * {
    auto it = io.rename.find(n);
    return it == io.rename.end() ? nullptr : &it->second;
  };
  for (auto &vi : *graph.mutable_input())
    if (const std::string *r = renamed(vi.name()))
      vi.set_name(*r);
  for (auto &vi : *graph.mutable_output())
    if (const std::string *r = renamed(vi.name()))
      vi.set_name(*r);
  for (auto &vi : *graph.mutable_value_info())
    if (const std::string *r = renamed(vi.name()))
      vi.set_name(*r);
  const std::string textPositions = "position_ids/text";
  for (auto &node : *graph.mutable_node()) {
    for (auto &in : *node.mutable_input()) {
      if (const std::string *r = renamed(in))
        in = *r;
      else if (io.positionIds3d && in == "position_ids")
        in = textPositions;
    }
    for (auto &out : *node.mutable_output())
      if (const std::string *r = renamed(out))
        out = *r;
  }
  if (!io.positionIds3d)
    return;
  // position_ids [3, batch_size, sequence_length]: M-RoPE's temporal,
  // height and width rows. For text they are equal; the graph's rotary
  // (exact for text positions) reads row 0.
  for (auto &vi : *graph.mutable_input()) {
    if (vi.name() != "position_ids")
      continue;
    auto *shape = vi.mutable_type()->mutable_tensor_type()->mutable_shape();
    onnx::TensorShapeProto old = *shape;
    shape->clear_dim();
    shape->add_dim()->set_dim_value(3);
    for (const auto &d : old.dim())
      *shape->add_dim() = d;
  }
  onnx::NodeProto index;
  index.set_op_type("Constant");
  index.set_name("position_ids/row0_index");
  index.add_output("position_ids/row0_index");
  auto *attr = index.add_attribute();
  attr->set_name("value");
  attr->set_type(onnx::AttributeProto::TENSOR);
  auto *t = attr->mutable_t();
  t->set_data_type(onnx::TensorProto::INT64);
  t->add_int64_data(0);
  onnx::NodeProto gather;
  gather.set_op_type("Gather");
  gather.set_name("position_ids/row0");
  gather.add_input("position_ids");
  gather.add_input("position_ids/row0_index");
  gather.add_output(textPositions);
  auto *axis = gather.add_attribute();
  axis->set_name("axis");
  axis->set_type(onnx::AttributeProto::INT);
  axis->set_i(0);
  // Prepend (nodes are kept in topological order).
  google::protobuf::RepeatedPtrField<onnx::NodeProto> nodes;
  *nodes.Add() = std::move(index);
  *nodes.Add() = std::move(gather);
  for (auto &node : *graph.mutable_node())
    *nodes.Add() = std::move(node);
  graph.mutable_node()->Swap(&nodes);
}

} // namespace archc
