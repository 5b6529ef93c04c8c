//===- VlmFolder.cpp - transformers.js's side of a VLM folder -------------===//
//
// This file implements the names and contracts a vision-language package
// takes so that transformers.js 4.3.1 loads it with
// AutoModelForImageTextToText.from_pretrained(OUT): its session names
// (read from its session configuration for image-text-to-text models), the
// embedding graph's optional image features, and the decoder inputs its
// forward does not pass.
//
//===----------------------------------------------------------------------===//
#include "emit/package/VlmFolder.h"

#include "emit/package/ModelFolder.h"

#include <algorithm>
#include <set>

namespace archc {

std::string vlmSessionName(const std::string &graph) {
  if (graph == "embedding")
    return "embed_tokens";
  if (graph == "decoder")
    return "decoder_model_merged";
  return graph;
}

std::string vlmModelFile(const std::string &graph, ir::DType dtype) {
  // folderModelFile's "model<suffix>.onnx" with the session's name.
  std::string file = folderModelFile(dtype);
  return vlmSessionName(graph) + file.substr(std::string("model").size());
}

void setSessionDtypes(nlohmann::json &config, const nlohmann::json &previous,
                      const std::string &dtype,
                      const std::vector<std::string> &graphs) {
  nlohmann::json &tjs = config["transformers.js_config"];
  if (!tjs.is_object())
    tjs = nlohmann::json::object();
  tjs.erase("dtype");
  if (dtype.empty()) {
    const nlohmann::json *old = nullptr;
    if (previous.is_object()) {
      auto c = previous.find("transformers.js_config");
      if (c != previous.end() && c->is_object()) {
        auto d = c->find("dtype");
        if (d != c->end() && d->is_object())
          old = &*d;
      }
    }
    if (old)
      tjs["dtype"] = *old;
    return;
  }
  nlohmann::json perSession = nlohmann::json::object();
  for (const std::string &g : graphs)
    perSession[vlmSessionName(g)] = dtype;
  tjs["dtype"] = perSession;
}

bool giveZeroRowDefault(onnx::GraphProto &graph, const std::string &name) {
  for (const onnx::ValueInfoProto &in : graph.input()) {
    if (in.name() != name || !in.type().has_tensor_type())
      continue;
    const onnx::TypeProto_Tensor &t = in.type().tensor_type();
    if (!t.has_shape() || t.shape().dim_size() == 0)
      return false;
    onnx::TensorProto *init = graph.add_initializer();
    init->set_name(name);
    init->set_data_type(t.elem_type());
    init->add_dims(0);
    for (int i = 1; i < t.shape().dim_size(); ++i) {
      if (!t.shape().dim(i).has_dim_value())
        return false;
      init->add_dims(t.shape().dim(i).dim_value());
    }
    return true;
  }
  return false;
}

namespace {
/// Renames every read of `from` to `to` in the graph's nodes and in the
/// subgraphs of their attributes (which read outer values by name).
void renameReads(onnx::GraphProto &graph, const std::string &from,
                 const std::string &to) {
  for (onnx::NodeProto &n : *graph.mutable_node()) {
    for (std::string &in : *n.mutable_input())
      if (in == from)
        in = to;
    for (onnx::AttributeProto &a : *n.mutable_attribute()) {
      if (a.has_g())
        renameReads(*a.mutable_g(), from, to);
      for (onnx::GraphProto &g : *a.mutable_graphs())
        renameReads(g, from, to);
    }
  }
}
} // namespace

std::vector<std::string> takeFloat32Inputs(onnx::GraphProto &graph) {
  std::vector<std::string> changed;
  for (onnx::ValueInfoProto &in : *graph.mutable_input()) {
    if (!in.type().has_tensor_type())
      continue;
    int32_t type = in.type().tensor_type().elem_type();
    if (type != onnx::TensorProto_DataType_FLOAT16 &&
        type != onnx::TensorProto_DataType_BFLOAT16)
      continue;
    std::string half =
        in.name() + "_" +
        (type == onnx::TensorProto_DataType_FLOAT16 ? "fp16" : "bf16");
    renameReads(graph, in.name(), half);
    in.mutable_type()->mutable_tensor_type()->set_elem_type(
        onnx::TensorProto_DataType_FLOAT);
    onnx::NodeProto *cast = graph.add_node();
    cast->set_op_type("Cast");
    cast->set_name(half);
    cast->add_input(in.name());
    cast->add_output(half);
    onnx::AttributeProto *to = cast->add_attribute();
    to->set_name("to");
    to->set_type(onnx::AttributeProto::INT);
    to->set_i(type);
    // First in the node list (topological order).
    auto *nodes = graph.mutable_node();
    std::rotate(nodes->begin(), nodes->end() - 1, nodes->end());
    changed.push_back(in.name());
  }
  return changed;
}

bool adaptForClients(const std::string &graph, onnx::GraphProto &g,
                     DiagnosticEngine &diags) {
  // Image processors give float32 pixel values, also to a half-precision
  // vision encoder.
  if (graph == "vision_encoder")
    takeFloat32Inputs(g);
  // transformers.js calls embed_tokens with input_ids alone and merges the
  // image features itself; onnxruntime-genai feeds them.
  if (graph == "embedding" && !giveZeroRowDefault(g, "image_features")) {
    diags.error(SourceRange(), "internal error: the embedding graph has no "
                               "image_features input of constant width");
    return false;
  }
  return true;
}

std::vector<std::string>
transformersJsUnfedDecoderInputs(const ir::Module &decoder) {
  // generic_text_to_text_forward -> decoder_forward: inputs_embeds,
  // attention_mask, position_ids and the cache, picked by the session's
  // input names (use_cache_branch and num_logits_to_keep where declared).
  static const std::set<std::string> fed = {"inputs_embeds", "attention_mask",
                                            "position_ids", "use_cache_branch",
                                            "num_logits_to_keep"};
  std::vector<std::string> unfed;
  for (const auto &a : decoder.graph.body.getArguments())
    if (!fed.count(a->name) && a->name.rfind("past_key_values.", 0) != 0)
      unfed.push_back(a->name);
  return unfed;
}

} // namespace archc
