//===- ClientIo.cpp - Graph I/O as a client runtime names it --------------===//
//
// This file implements the transformers.js I/O convention (see the header
// and docs/onnx.md, "Model folders").
//
//===----------------------------------------------------------------------===//
#include "emit/package/ClientIo.h"

#include <limits>
#include <map>
#include <regex>
#include <set>
#include <vector>

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

// MODEL_MAPPING_NAMES_ENCODER_ONLY (with the masked-LM, sequence- and
// token-classification mappings of the same types): the encoder families
// archc bundles, whose folder holds onnx/model.onnx without decode state.
const std::set<std::string> kEncoderTypes = {
    "bert",  "roberta",    "xlm-roberta", "distilbert",
    "mpnet", "deberta-v2", "modernbert"};

// getCacheNames: the types whose linear-attention layers are
// past_conv.{i} + past_recurrent.{i}.
const std::set<std::string> kGatedDeltaNetTypes = {
    "qwen3_next", "qwen3_5_text", "qwen3_5_moe_text", "qwen3_5", "qwen3_5_moe"};

// getCacheNames: the types whose short-convolution layers are past_conv.{i}
// (LFM2) and whose Mamba-2 layers are past_conv.{i} + past_ssm.{i}.
const std::set<std::string> kShortConvTypes = {"lfm2", "lfm2_moe"};
const std::set<std::string> kMamba2HybridTypes = {"granitemoehybrid",
                                                  "falcon_h1", "nemotron_h"};

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
                          const std::string &modelType, bool multiQuery) {
  ClientIo io;
  bool stateless = true;
  for (const auto &vi : graph.input())
    stateless &= vi.name().rfind("past_key_values.", 0) != 0;
  // An encoder: AutoModel, AutoModelForMaskedLM, ... feed it by name.
  if (stateless && kEncoderTypes.count(modelType))
    return io;
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
    if (names == std::set<std::string>{"key", "value"}) {
      // getKeyValueNames: `multi_query` configs cache one key_value tensor.
      if (multiQuery)
        io.fusedKeyValue.insert(layer);
      continue;
    }
    if (names == std::set<std::string>{"conv_state", "recurrent_state"} &&
        kGatedDeltaNetTypes.count(modelType)) {
      both(layer, "conv_state", "past_conv." + layer, "present_conv." + layer);
      both(layer, "recurrent_state", "past_recurrent." + layer,
           "present_recurrent." + layer);
      continue;
    }
    if (names == std::set<std::string>{"conv_state"} &&
        kShortConvTypes.count(modelType)) {
      both(layer, "conv_state", "past_conv." + layer, "present_conv." + layer);
      continue;
    }
    if (names == std::set<std::string>{"conv_state", "ssm_state"} &&
        kMamba2HybridTypes.count(modelType)) {
      both(layer, "conv_state", "past_conv." + layer, "present_conv." + layer);
      both(layer, "ssm_state", "past_ssm." + layer, "present_ssm." + layer);
      continue;
    }
    if (names ==
            std::set<std::string>{"conv_state", "ssm_state", "key", "value"} &&
        modelType == "falcon_h1") {
      // Falcon-H1's parallel layers: attention and Mamba-2 side by side.
      both(layer, "conv_state", "past_conv." + layer, "present_conv." + layer);
      both(layer, "ssm_state", "past_ssm." + layer, "present_ssm." + layer);
      continue;
    }
    if (modelType == "deepseek_v4" && names.count("kv") &&
        (names.size() == 1 ||
         names == std::set<std::string>{"kv", "compressed_kv",
                                        "compressed_kv_state"} ||
         names == std::set<std::string>{"kv", "compressed_kv",
                                        "compressed_kv_state", "index_kv",
                                        "index_kv_state"})) {
      // DeepSeek-V4 (getCacheNames): the window keys take the key slot (its
      // cached length is their second-to-last dimension); the compressed
      // entries, the indexer's beside them, the value slot; each
      // compressor's open window [batch, W - 1, kv | gate] the client's
      // kv and gate halves.
      const std::string past = "past_key_values." + layer + ".";
      const std::string present = "present." + layer + ".";
      both(layer, "kv", past + "key", present + "key");
      if (names.size() == 1)
        continue;
      if (names.count("index_kv"))
        io.regrouped.push_back(
            {{past + "compressed_kv", past + "index_kv"},
             {present + "compressed_kv", present + "index_kv"},
             {past + "value"},
             {present + "value"}});
      else
        both(layer, "compressed_kv", past + "value", present + "value");
      // (clang 14 cannot capture a structured binding: the layer by name.)
      auto window = [&, &n = layer](const std::string &state,
                                    const std::string &client) {
        io.regrouped.push_back({{past + state},
                                {present + state},
                                {"past_" + client + "." + n + ".kv",
                                 "past_" + client + "." + n + ".gate"},
                                {"present_" + client + "." + n + ".kv",
                                 "present_" + client + "." + n + ".gate"}});
      };
      window("compressed_kv_state", "compressor");
      if (names.count("index_kv_state"))
        window("index_kv_state", "indexer");
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
    io.regrouped.clear();
    return io;
  }
  io.positionIds3d = hasPositions && kQwenVlTypes.count(modelType);
  return io;
}

namespace {
/// Replaces layer `layer`'s key and value inputs and outputs by one
/// `key_value` tensor each, concatenated along the last axis: the input is
/// split back into the original names, the outputs are concatenated.
void fuseKeyValue(onnx::GraphProto &graph, const std::string &layer) {
  const std::string past = "past_key_values." + layer + ".";
  const std::string present = "present." + layer + ".";
  auto lastDim = [](const onnx::ValueInfoProto &vi) {
    const auto &shape = vi.type().tensor_type().shape();
    return shape.dim(shape.dim_size() - 1).dim_value();
  };
  // Merges the pair `prefix` key/value of `list` into `prefix`key_value at
  // the key's position; returns the last dims of key and value.
  auto merge =
      [&](google::protobuf::RepeatedPtrField<onnx::ValueInfoProto> &list,
          const std::string &prefix) {
        int keyAt = -1, valueAt = -1;
        for (int i = 0; i < list.size(); ++i) {
          if (list[i].name() == prefix + "key")
            keyAt = i;
          if (list[i].name() == prefix + "value")
            valueAt = i;
        }
        std::pair<int64_t, int64_t> dims{lastDim(list[keyAt]),
                                         lastDim(list[valueAt])};
        onnx::ValueInfoProto fused = list[keyAt];
        fused.set_name(prefix + "key_value");
        auto *shape =
            fused.mutable_type()->mutable_tensor_type()->mutable_shape();
        shape->mutable_dim(shape->dim_size() - 1)
            ->set_dim_value(dims.first + dims.second);
        list[keyAt] = fused;
        list.DeleteSubrange(valueAt, 1);
        return dims;
      };
  auto [dk, dv] = merge(*graph.mutable_input(), past);
  merge(*graph.mutable_output(), present);

  onnx::NodeProto sizes;
  sizes.set_op_type("Constant");
  sizes.set_name(past + "key_value/sizes");
  sizes.add_output(past + "key_value/sizes");
  auto *value = sizes.add_attribute();
  value->set_name("value");
  value->set_type(onnx::AttributeProto::TENSOR);
  auto *t = value->mutable_t();
  t->set_data_type(onnx::TensorProto::INT64);
  t->add_dims(2);
  t->add_int64_data(dk);
  t->add_int64_data(dv);
  onnx::NodeProto split;
  split.set_op_type("Split");
  split.set_name(past + "key_value/split");
  split.add_input(past + "key_value");
  split.add_input(past + "key_value/sizes");
  split.add_output(past + "key");
  split.add_output(past + "value");
  onnx::NodeProto concat;
  concat.set_op_type("Concat");
  concat.set_name(present + "key_value/concat");
  concat.add_input(present + "key");
  concat.add_input(present + "value");
  concat.add_output(present + "key_value");
  for (onnx::NodeProto *n : {&split, &concat}) {
    auto *axis = n->add_attribute();
    axis->set_name("axis");
    axis->set_type(onnx::AttributeProto::INT);
    axis->set_i(-1);
  }
  // Kept in topological order: the split first, the concat last.
  google::protobuf::RepeatedPtrField<onnx::NodeProto> nodes;
  *nodes.Add() = std::move(sizes);
  *nodes.Add() = std::move(split);
  for (auto &node : *graph.mutable_node())
    *nodes.Add() = std::move(node);
  *nodes.Add() = std::move(concat);
  graph.mutable_node()->Swap(&nodes);
}

/// Gives the graph the client's grouping of one state (RegroupedState):
/// its inputs become the client's past tensors, concatenated and split
/// into the graph's; its outputs the client's present tensors, split from
/// the concatenation of the graph's. Every tensor splits on the last axis,
/// the client's into equal parts.
void regroupState(onnx::GraphProto &graph, const RegroupedState &r) {
  auto lastDim = [](const onnx::ValueInfoProto &vi) {
    const auto &shape = vi.type().tensor_type().shape();
    return shape.dim(shape.dim_size() - 1).dim_value();
  };
  std::vector<onnx::NodeProto> front, back;
  auto axisNode = [](const std::string &op, const std::string &name) {
    onnx::NodeProto n;
    n.set_op_type(op);
    n.set_name(name);
    auto *axis = n.add_attribute();
    axis->set_name("axis");
    axis->set_type(onnx::AttributeProto::INT);
    axis->set_i(-1);
    return n;
  };
  auto sizesNode = [](const std::string &name,
                      const std::vector<int64_t> &sizes) {
    onnx::NodeProto c;
    c.set_op_type("Constant");
    c.set_name(name);
    c.add_output(name);
    auto *value = c.add_attribute();
    value->set_name("value");
    value->set_type(onnx::AttributeProto::TENSOR);
    auto *t = value->mutable_t();
    t->set_data_type(onnx::TensorProto::INT64);
    t->add_dims(static_cast<int64_t>(sizes.size()));
    for (int64_t v : sizes)
      t->add_int64_data(v);
    return c;
  };
  // Replaces the graph's `from` entries of `list` by the client's `to`
  // (at the first one's position, its type with the last dim the total
  // split evenly); `fromSizes`, `toSizes`: the last dims of both.
  auto replace =
      [&](google::protobuf::RepeatedPtrField<onnx::ValueInfoProto> &list,
          const std::vector<std::string> &from,
          const std::vector<std::string> &to, std::vector<int64_t> &fromSizes,
          std::vector<int64_t> &toSizes) {
        int first = -1;
        int64_t total = 0;
        onnx::ValueInfoProto proto;
        for (const std::string &name : from)
          for (int i = 0; i < list.size(); ++i)
            if (list[i].name() == name) {
              if (first < 0) {
                first = i;
                proto = list[i];
              }
              fromSizes.push_back(lastDim(list[i]));
              total += fromSizes.back();
            }
        google::protobuf::RepeatedPtrField<onnx::ValueInfoProto> kept;
        for (int i = 0; i < list.size(); ++i) {
          if (i == first)
            for (const std::string &name : to) {
              onnx::ValueInfoProto vi = proto;
              vi.set_name(name);
              auto *shape =
                  vi.mutable_type()->mutable_tensor_type()->mutable_shape();
              int64_t part = total / static_cast<int64_t>(to.size());
              shape->mutable_dim(shape->dim_size() - 1)->set_dim_value(part);
              toSizes.push_back(part);
              *kept.Add() = vi;
            }
          bool dropped = false;
          for (const std::string &name : from)
            dropped |= list[i].name() == name;
          if (!dropped)
            *kept.Add() = list[i];
        }
        list.Swap(&kept);
      };
  // Joins `parts` into one tensor and splits it into `outs` (of `sizes`),
  // in `nodes`; a side of one tensor needs no node.
  auto regroup = [&](std::vector<onnx::NodeProto> &nodes,
                     const std::vector<std::string> &parts,
                     const std::vector<std::string> &outs,
                     const std::vector<int64_t> &sizes,
                     const std::string &tag) {
    std::string joined = parts.size() == 1 ? parts[0] : tag + "/joined";
    if (parts.size() > 1 && outs.size() == 1)
      joined = outs[0];
    if (parts.size() > 1) {
      onnx::NodeProto concat = axisNode("Concat", tag + "/concat");
      for (const std::string &p : parts)
        concat.add_input(p);
      concat.add_output(joined);
      nodes.push_back(std::move(concat));
    }
    if (outs.size() > 1) {
      nodes.push_back(sizesNode(tag + "/sizes", sizes));
      onnx::NodeProto split = axisNode("Split", tag + "/split");
      split.add_input(joined);
      split.add_input(tag + "/sizes");
      for (const std::string &o : outs)
        split.add_output(o);
      nodes.push_back(std::move(split));
    }
  };
  std::vector<int64_t> pastGraph, pastClient, presentGraph, presentClient;
  replace(*graph.mutable_input(), r.graphPast, r.clientPast, pastGraph,
          pastClient);
  regroup(front, r.clientPast, r.graphPast, pastGraph, r.clientPast[0]);
  replace(*graph.mutable_output(), r.graphPresent, r.clientPresent,
          presentGraph, presentClient);
  regroup(back, r.graphPresent, r.clientPresent, presentClient,
          r.clientPresent[0]);
  // Kept in topological order: the inputs' nodes first, the outputs' last.
  google::protobuf::RepeatedPtrField<onnx::NodeProto> nodes;
  for (auto &n : front)
    *nodes.Add() = std::move(n);
  for (auto &node : *graph.mutable_node())
    *nodes.Add() = std::move(node);
  for (auto &n : back)
    *nodes.Add() = std::move(n);
  graph.mutable_node()->Swap(&nodes);
}
} // namespace

void applyClientIo(onnx::GraphProto &graph, const ClientIo &io) {
  for (const std::string &layer : io.fusedKeyValue)
    fuseKeyValue(graph, layer);
  for (const RegroupedState &r : io.regrouped)
    regroupState(graph, r);
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
  // height and width rows, equal for text. transformers.js 4.3.1 builds
  // them for its Qwen-VL-derived classes, but its text-only rope index
  // offsets every decode step by twice the prompt length (a sign slip in
  // _get_text_only_rope_index), so the graph takes them and derives the
  // text positions from attention_mask instead, as Hugging Face's text-only
  // positions are: cumsum(mask) - 1 over the whole sequence, the last
  // sequence_length columns (padding clamped to 0; it is masked anyway).
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
  std::vector<onnx::NodeProto> added;
  auto constant = [&](const std::string &name, std::vector<int64_t> values,
                      bool scalar) {
    onnx::NodeProto c;
    c.set_op_type("Constant");
    c.set_name(name);
    c.add_output(name);
    auto *attr = c.add_attribute();
    attr->set_name("value");
    attr->set_type(onnx::AttributeProto::TENSOR);
    auto *t = attr->mutable_t();
    t->set_data_type(onnx::TensorProto::INT64);
    if (!scalar)
      t->add_dims(static_cast<int64_t>(values.size()));
    for (int64_t v : values)
      t->add_int64_data(v);
    added.push_back(std::move(c));
  };
  added.reserve(16); // addNode's pointers stay valid
  auto addNode = [&](const std::string &op, const std::string &name,
                     std::vector<std::string> inputs) {
    onnx::NodeProto n;
    n.set_op_type(op);
    n.set_name(name);
    for (auto &i : inputs)
      n.add_input(i);
    n.add_output(name);
    added.push_back(std::move(n));
    return &added.back();
  };
  const std::string p = "position_ids/text/";
  constant(p + "one", {1}, true);
  constant(p + "zero", {0}, true);
  constant(p + "axis", {1}, true);
  constant(p + "axes", {1}, false);
  constant(p + "end", {std::numeric_limits<int64_t>::max()}, false);
  constant(p + "seq_index", {1}, false);
  auto *cast = addNode("Cast", p + "mask", {"attention_mask"});
  auto *to = cast->add_attribute();
  to->set_name("to");
  to->set_type(onnx::AttributeProto::INT);
  to->set_i(onnx::TensorProto::INT64);
  addNode("CumSum", p + "cumsum", {p + "mask", p + "axis"});
  addNode("Sub", p + "all", {p + "cumsum", p + "one"});
  addNode("Shape", p + "ids_shape", {"input_ids"});
  addNode("Gather", p + "seq", {p + "ids_shape", p + "seq_index"});
  addNode("Neg", p + "start", {p + "seq"});
  addNode("Slice", p + "last", {p + "all", p + "start", p + "end", p + "axes"});
  auto *clamp = addNode("Max", p + "clamped", {p + "last", p + "zero"});
  clamp->set_output(0, textPositions);
  google::protobuf::RepeatedPtrField<onnx::NodeProto> nodes;
  for (auto &n : added)
    *nodes.Add() = std::move(n);
  // Prepended (nodes are kept in topological order).
  for (auto &node : *graph.mutable_node())
    *nodes.Add() = std::move(node);
  graph.mutable_node()->Swap(&nodes);
}

} // namespace archc
