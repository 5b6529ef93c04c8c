//===- GenaiConfig.cpp - onnxruntime-genai's genai_config.json ------------===//
//
// This file builds genai_config.json in the schema of onnxruntime-genai's
// model builder: a model type its runtime accepts, token ids and context
// length from config.json; head counts, head size, hidden size, layer count
// and vocabulary from the compiled graph; the input/output name templates of
// the KV cache (from which the runtime also derives the Gated DeltaNet
// state names); search defaults from generation_config.json.
//
//===----------------------------------------------------------------------===//
#include "emit/package/GenaiConfig.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <set>

namespace archc {

std::string genaiModelType(const std::string &t) {
  // onnxruntime-genai's ModelType::IsLLM list (src/models/model_type.h).
  static const std::set<std::string> accepted = {"chatglm",
                                                 "ernie4_5",
                                                 "gemma",
                                                 "gemma2",
                                                 "gemma3_text",
                                                 "gemma4_text",
                                                 "gpt2",
                                                 "granite",
                                                 "granitemoehybrid",
                                                 "internlm2",
                                                 "lfm2",
                                                 "llama",
                                                 "mistral",
                                                 "nemotron",
                                                 "olmo",
                                                 "phi",
                                                 "phimoe",
                                                 "phi3",
                                                 "phi3small",
                                                 "qwen2",
                                                 "qwen3",
                                                 "qwen3_5_moe_text",
                                                 "qwen3_5_text",
                                                 "smollm3"};
  if (accepted.count(t))
    return t;
  if (t == "gpt_oss")
    return "gptoss";
  if (t == "hunyuan_v1_dense")
    return "hunyuandensev1";
  // archc compiles the text model of a multimodal config.
  if (t == "gemma3" || t == "gemma4" || t == "qwen3_5" || t == "qwen3_5_moe") {
    std::string text = t + "_text";
    if (accepted.count(text))
      return text;
  }
  return "decoder";
}

bool isGenerative(const ir::Module &m) {
  bool generative = false;
  ir::walk(m.graph.body, [&](const ir::Op &op) {
    generative |= op.getKind() == ir::OpKind::Cache ||
                  op.getFamily() == ir::OpFamily::Recurrent ||
                  op.getFamily() == ir::OpFamily::StateSpace;
  });
  return generative;
}

bool genaiBindsStates(const ir::Module &m, std::string &whyNot) {
  // An encoder (no decode state at all, whatever the passes) generates
  // nothing for onnxruntime-genai to drive.
  if (!isGenerative(m)) {
    whyNot = "onnxruntime-genai runs generative models; this one is an "
             "encoder (no decode state)";
    return false;
  }
  bool ok = true;
  ir::walk(m.graph.body, [&](const ir::Op &op) {
    if (!ok || op.getKind() != ir::OpKind::StateIn)
      return;
    std::string n = op.attr<std::string>("name");
    std::string suffix = n.substr(n.rfind('.') + 1);
    if (suffix == "key" || suffix == "value" || suffix == "conv_state" ||
        suffix == "recurrent_state")
      return;
    ok = false;
    whyNot = "onnxruntime-genai binds key/value caches and Gated DeltaNet "
             "conv/recurrent states only; this model also keeps '" +
             suffix + "' (" + n + ")";
  });
  return ok;
}

namespace {
/// onnxruntime-genai's search section: the model's generation_config.json,
/// with the model builder's fallbacks.
nlohmann::ordered_json searchDefaults(const nlohmann::json *generation,
                                      const nlohmann::json &maxLength) {
  auto gen = [&](const char *key, nlohmann::json fallback) -> nlohmann::json {
    if (generation && generation->is_object()) {
      auto it = generation->find(key);
      if (it != generation->end() && !it->is_null())
        return *it;
    }
    return fallback;
  };
  return {{"diversity_penalty", gen("diversity_penalty", 0.0)},
          {"do_sample", gen("do_sample", false)},
          {"early_stopping", true},
          {"length_penalty", gen("length_penalty", 1.0)},
          {"max_length", maxLength},
          {"min_length", 0},
          {"no_repeat_ngram_size", gen("no_repeat_ngram_size", 0)},
          {"num_beams", gen("num_beams", 1)},
          {"num_return_sequences", gen("num_return_sequences", 1)},
          {"past_present_share_buffer", false},
          {"repetition_penalty", gen("repetition_penalty", 1.0)},
          {"temperature", gen("temperature", 1.0)},
          {"top_k", gen("top_k", generation ? 50 : 1)},
          {"top_p", gen("top_p", 1.0)}};
}
} // namespace

nlohmann::ordered_json makeGenaiConfig(const ir::Module &m,
                                       const nlohmann::json &cfg,
                                       const nlohmann::json *generation,
                                       const std::string &modelFile,
                                       bool kvCache) {
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
  // Token ids: generation_config.json's (what generate() uses), else
  // config.json's.
  auto token = [&](const char *k) {
    if (generation && generation->is_object() && generation->contains(k) &&
        !(*generation)[k].is_null())
      return (*generation)[k];
    return field(k);
  };
  if (!token("bos_token_id").is_null())
    model["bos_token_id"] = token("bos_token_id");
  if (!context.is_null())
    model["context_length"] = context;
  model["decoder"] = decoder;
  for (const char *k : {"eos_token_id", "pad_token_id"})
    if (!token(k).is_null())
      model[k] = token(k);
  std::string hfType =
      cfg.contains("model_type") && cfg["model_type"].is_string()
          ? cfg["model_type"].get<std::string>()
          : m.name;
  model["type"] = genaiModelType(hfType);
  model["vocab_size"] = vocab;
  nlohmann::json maxLength = context.is_null() ? nlohmann::json(4096) : context;
  ordered_json search = searchDefaults(generation, maxLength);
  ordered_json root = {{"model", model}, {"search", search}};
  return root;
}

namespace {
/// An integer config field the graph bound, or 0.
int64_t boundInt(const ir::Module &m, const char *key) {
  auto it = m.info.find(key);
  if (it == m.info.end())
    return 0;
  const int64_t *v = std::get_if<int64_t>(&it->second);
  return v ? *v : 0;
}

/// A token id: generation_config.json's (what generate() uses), else
/// config.json's; null when neither has one.
nlohmann::json tokenId(const nlohmann::json *generation,
                       const nlohmann::json &config, const char *key) {
  if (generation && generation->is_object() && generation->contains(key) &&
      !(*generation)[key].is_null())
    return (*generation)[key];
  return config.is_object() && config.contains(key) ? config[key]
                                                    : nlohmann::json();
}
} // namespace

nlohmann::ordered_json makeWhisperGenaiConfig(const ir::Module &encoder,
                                              const ir::Module &decoder,
                                              const nlohmann::json &config,
                                              const nlohmann::json *generation,
                                              const std::string &encoderFile,
                                              const std::string &decoderFile) {
  using nlohmann::ordered_json;
  int64_t hidden = boundInt(decoder, "d_model");
  int64_t decoderHeads = boundInt(decoder, "decoder_attention_heads");
  int64_t encoderHeads = boundInt(encoder, "encoder_attention_heads");
  const ordered_json session = {{"log_id", "onnxruntime-genai"},
                                {"provider_options", ordered_json::array()}};
  ordered_json enc;
  enc["session_options"] = session;
  enc["filename"] = encoderFile;
  enc["head_size"] = encoderHeads ? hidden / encoderHeads : 0;
  enc["hidden_size"] = hidden;
  enc["inputs"] = {{"audio_features", "input_features"}};
  enc["outputs"] = {{"encoder_hidden_states", "encoder_hidden_states"},
                    {"cross_present_key_names", "present.%d.encoder.key"},
                    {"cross_present_value_names", "present.%d.encoder.value"}};
  enc["num_attention_heads"] = encoderHeads;
  enc["num_hidden_layers"] = boundInt(encoder, "encoder_layers");
  ordered_json dec;
  dec["session_options"] = session;
  dec["filename"] = decoderFile;
  dec["head_size"] = decoderHeads ? hidden / decoderHeads : 0;
  dec["hidden_size"] = hidden;
  dec["inputs"] = {
      {"input_ids", "input_ids"},
      {"past_key_names", "past_key_values.%d.decoder.key"},
      {"past_value_names", "past_key_values.%d.decoder.value"},
      {"cross_past_key_names", "past_key_values.%d.encoder.key"},
      {"cross_past_value_names", "past_key_values.%d.encoder.value"}};
  dec["outputs"] = {{"logits", "logits"},
                    {"present_key_names", "present.%d.decoder.key"},
                    {"present_value_names", "present.%d.decoder.value"}};
  dec["num_attention_heads"] = decoderHeads;
  dec["num_hidden_layers"] = boundInt(decoder, "decoder_layers");
  dec["num_key_value_heads"] = decoderHeads;
  ordered_json model;
  nlohmann::json bos = tokenId(generation, config, "bos_token_id");
  if (!bos.is_null())
    model["bos_token_id"] = bos;
  int64_t context = boundInt(decoder, "max_target_positions");
  model["context_length"] = context;
  model["decoder"] = dec;
  model["encoder"] = enc;
  for (const char *k : {"eos_token_id", "pad_token_id"}) {
    nlohmann::json id = tokenId(generation, config, k);
    if (!id.is_null())
      model[k] = id;
  }
  model["type"] = "whisper";
  model["vocab_size"] = boundInt(decoder, "vocab_size");
  return {{"model", model},
          {"search", searchDefaults(generation, nlohmann::json(context))}};
}

nlohmann::ordered_json
makeWhisperAudioProcessorConfig(const nlohmann::json *preprocessor,
                                int64_t melBins,
                                std::vector<std::string> &notUsed) {
  using nlohmann::ordered_json;
  // WhisperFeatureExtractor's defaults, overridden by the model's file.
  auto field = [&](const char *key, int64_t fallback) -> int64_t {
    if (preprocessor && preprocessor->is_object()) {
      auto it = preprocessor->find(key);
      if (it == preprocessor->end() || it->is_null())
        return fallback;
      if (it->is_number_integer() && it->get<int64_t>() > 0)
        return it->get<int64_t>();
      notUsed.push_back(
          fmt::format("{} ({}: not a positive integer)", key, it->dump()));
    }
    return fallback;
  };
  if (preprocessor && preprocessor->is_object()) {
    auto it = preprocessor->find("feature_size");
    if (it != preprocessor->end() &&
        !(it->is_number_integer() && it->get<int64_t>() == melBins))
      notUsed.push_back(fmt::format("feature_size ({}: the model's "
                                    "num_mel_bins is {})",
                                    it->dump(), melBins));
  }
  int64_t nFft = field("n_fft", 400), hop = field("hop_length", 160);
  int64_t chunk = field("chunk_length", 30);
  ordered_json decoder = {
      {"operation", {{"name", "audio_decoder"}, {"type", "AudioDecoder"}}}};
  ordered_json stft = {
      {"operation",
       {{"name", "STFT"},
        {"type", "STFTNorm"},
        {"attrs",
         {{"n_fft", nFft}, {"frame_length", nFft}, {"hop_length", hop}}}}}};
  ordered_json mel = {{"operation",
                       {{"name", "log_mel_spectrogram"},
                        {"type", "LogMelSpectrum"},
                        {"attrs",
                         {{"chunk_size", chunk},
                          {"hop_length", hop},
                          {"n_fft", nFft},
                          {"n_mel", melBins}}}}}};
  return {{"feature_extraction",
           {{"sequence", ordered_json::array({decoder, stft, mel})}}}};
}

} // namespace archc
