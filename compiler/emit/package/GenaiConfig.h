//===- GenaiConfig.h - onnxruntime-genai's genai_config.json ----*- C++ -*-===//
//
// This file declares the onnxruntime-genai side of a package:
// genai_config.json and which models the runtime can bind.
//
//===----------------------------------------------------------------------===//
#ifndef ARCHC_EMIT_PACKAGE_GENAICONFIG_H
#define ARCHC_EMIT_PACKAGE_GENAICONFIG_H

#include "ir/IR.h"

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace archc {

/// onnxruntime-genai's model.type for a Hugging Face model_type: the same
/// name where the runtime accepts it (gpt_oss -> gptoss, the text model of
/// a multimodal config -> its *_text type), else "decoder".
std::string genaiModelType(const std::string &hfModelType);

/// Whether the model keeps decode state (a key/value cache, a recurrent or
/// state-space state): a generative model, not an encoder.
bool isGenerative(const ir::Module &m);

/// Whether onnxruntime-genai can bind every state input of the graph (it
/// binds key/value caches and Gated DeltaNet conv/recurrent states);
/// otherwise `whyNot` names the first state it cannot.
bool genaiBindsStates(const ir::Module &m, std::string &whyNot);

/// onnxruntime-genai's genai_config.json for the model in `modelFile`
/// (relative to the config's folder). `generation` is the model's
/// generation_config.json (search defaults), or null.
nlohmann::ordered_json makeGenaiConfig(const ir::Module &m,
                                       const nlohmann::json &config,
                                       const nlohmann::json *generation,
                                       const std::string &modelFile,
                                       bool kvCache);

/// onnxruntime-genai's genai_config.json for a Whisper package: the
/// encoder graph in `encoderFile` (input_features -> encoder_hidden_states
/// and every decoder layer's present.{i}.encoder.key / .value) and the
/// decoder in `decoderFile` (fed those as past_key_values.{i}.encoder.*),
/// both relative to the config's folder. Sizes come from the graphs' bound
/// config fields, token ids as for makeGenaiConfig.
nlohmann::ordered_json makeWhisperGenaiConfig(const ir::Module &encoder,
                                              const ir::Module &decoder,
                                              const nlohmann::json &config,
                                              const nlohmann::json *generation,
                                              const std::string &encoderFile,
                                              const std::string &decoderFile);

/// onnxruntime-genai's audio_processor_config.json for Whisper (its log-mel
/// front end: STFT and mel filter sizes), from the model's
/// preprocessor_config.json (`preprocessor`, may be null) or Whisper's
/// defaults, with the model's `melBins` filters. Fields of `preprocessor`
/// it cannot use (not a positive integer; a feature_size other than
/// `melBins`) are added to `notUsed`, each with its value and why.
nlohmann::ordered_json
makeWhisperAudioProcessorConfig(const nlohmann::json *preprocessor,
                                int64_t melBins,
                                std::vector<std::string> &notUsed);

} // namespace archc

#endif // ARCHC_EMIT_PACKAGE_GENAICONFIG_H
