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

} // namespace archc

#endif // ARCHC_EMIT_PACKAGE_GENAICONFIG_H
