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

std::vector<std::string>
transformersJsUnfedDecoderInputs(const ir::Module &decoder) {
  // generic_text_to_text_forward -> decoder_forward: inputs_embeds,
  // attention_mask, position_ids and the cache, picked by the session's
  // input names (use_cache_branch and num_logits_to_keep where declared).
  static const std::set<std::string> fed = {
      "inputs_embeds", "attention_mask", "position_ids", "use_cache_branch",
      "num_logits_to_keep"};
  std::vector<std::string> unfed;
  for (const auto &a : decoder.graph.body.getArguments())
    if (!fed.count(a->name) && a->name.rfind("past_key_values.", 0) != 0)
      unfed.push_back(a->name);
  return unfed;
}

} // namespace archc
