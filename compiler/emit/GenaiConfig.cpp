//===- GenaiConfig.cpp - onnxruntime-genai's genai_config.json ------------===//
//
// This file writes genai_config.json beside an emitted model, in the schema
// of onnxruntime-genai's model builder: model type, token ids and context
// length from config.json; head counts, head size, hidden size, layer count
// and vocabulary from the compiled graph; the input/output name patterns of
// the KV cache.
//
//===----------------------------------------------------------------------===//
#include "emit/OnnxEmitter.h"

#include "support/AtomicFile.h"

#include <nlohmann/json.hpp>

#include <set>

namespace archc {

bool writeGenaiConfig(const ir::Module &m, const nlohmann::json &cfg,
                      const std::string &modelFile, const std::string &path,
                      bool kvCache, DiagnosticEngine &diags) {
  using nlohmann::ordered_json;
  // Facts from the graph.
  int64_t heads = 0, kvHeads = 0, headSize = 0, hidden = 0, vocab = 0;
  std::set<std::string> layers;
  bool keyValue = false;
  ir::walk(m.graph.body, [&](const ir::Op &op) {
    if (op.getKind() == ir::OpKind::Attention && heads == 0) {
      heads = op.getOperand(0)->type.dims[2].getConstant().value_or(0);
      headSize = op.getOperand(0)->type.dims[3].getConstant().value_or(0);
      kvHeads = op.getOperand(1)->type.dims[2].getConstant().value_or(0);
    }
    if (op.getKind() == ir::OpKind::MlaAttention && heads == 0) {
      // MLA: the latent is one key/value "head" shared by all query heads.
      heads = op.getOperand(0)->type.dims[2].getConstant().value_or(0);
      headSize = op.getOperand(0)->type.dims[3].getConstant().value_or(0) +
                 op.getOperand(1)->type.dims[3].getConstant().value_or(0);
      kvHeads = 1;
    }
    if (op.getKind() == ir::OpKind::Gather && hidden == 0)
      hidden = op.getResult()->type.dims.back().getConstant().value_or(0);
    if (op.getKind() == ir::OpKind::StateIn) {
      std::string n = op.attr<std::string>("name");
      layers.insert(n.substr(0, n.rfind('.')));
      keyValue |= n.size() > 4 && n.substr(n.size() - 4) == ".key";
    }
    if (op.getKind() == ir::OpKind::Return && op.getNumOperands())
      vocab = op.getOperand(0)->type.dims.back().getConstant().value_or(0);
  });
  // Facts from config.json (text_config first).
  auto field = [&](const char *key) -> nlohmann::json {
    if (cfg.contains("text_config") && cfg["text_config"].is_object() &&
        cfg["text_config"].contains(key))
      return cfg["text_config"][key];
    return cfg.contains(key) ? cfg[key] : nlohmann::json();
  };
  nlohmann::json context = field("max_position_embeddings");
  if (context.is_null())
    context = field("n_positions");
  ordered_json decoder;
  decoder["session_options"] = {{"log_id", "onnxruntime-genai"},
                                {"provider_options", ordered_json::array()}};
  decoder["filename"] = modelFile;
  decoder["head_size"] = headSize;
  decoder["hidden_size"] = hidden;
  // The graph's own inputs: models without positions (Mamba, Jamba,
  // Nemotron-H) take no position_ids.
  ordered_json inputs;
  for (const char *name : {"input_ids", "attention_mask", "position_ids"})
    for (const auto &arg : m.graph.body.getArguments())
      if (arg->name == name)
        inputs[name] = name;
  ordered_json outputs = {{"logits", "logits"}};
  // onnxruntime-genai's schema names key/value caches only; other states
  // (MLA latents, linear-attention states) follow the past_key_values.{i}.*
  // convention of docs/onnx.md.
  if (kvCache && keyValue) {
    inputs["past_key_names"] = "past_key_values.%d.key";
    inputs["past_value_names"] = "past_key_values.%d.value";
    outputs["present_key_names"] = "present.%d.key";
    outputs["present_value_names"] = "present.%d.value";
  }
  decoder["inputs"] = inputs;
  decoder["outputs"] = outputs;
  decoder["num_attention_heads"] = heads;
  decoder["num_hidden_layers"] = static_cast<int64_t>(layers.size());
  decoder["num_key_value_heads"] = kvHeads;
  ordered_json model;
  for (const char *k : {"bos_token_id"})
    if (!field(k).is_null())
      model[k] = field(k);
  if (!context.is_null())
    model["context_length"] = context;
  model["decoder"] = decoder;
  for (const char *k : {"eos_token_id", "pad_token_id"})
    if (!field(k).is_null())
      model[k] = field(k);
  nlohmann::json type =
      cfg.contains("model_type") ? cfg["model_type"] : nlohmann::json(m.name);
  model["type"] = type;
  model["vocab_size"] = vocab;
  ordered_json search = {
      {"diversity_penalty", 0.0},
      {"do_sample", false},
      {"early_stopping", true},
      {"length_penalty", 1.0},
      {"max_length", context.is_null() ? nlohmann::json(4096) : context},
      {"min_length", 0},
      {"no_repeat_ngram_size", 0},
      {"num_beams", 1},
      {"num_return_sequences", 1},
      {"past_present_share_buffer", false},
      {"repetition_penalty", 1.0},
      {"temperature", 1.0},
      {"top_k", 1},
      {"top_p", 1.0}};
  ordered_json root = {{"model", model}, {"search", search}};
  return writeFileAtomically(path, root.dump(4) + "\n", diags);
}

} // namespace archc
