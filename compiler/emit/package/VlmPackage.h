//===- VlmPackage.h - Several-graph ONNX packages ---------------*- C++ -*-===//
//
// This file declares the emission of a package: the named graphs of an
// arch (a vision-language model's vision_encoder, embedding and decoder),
// each lowered and checked as its own ONNX model in OUT/onnx/ (under
// transformers.js's session names: vision_encoder.onnx, embed_tokens.onnx,
// decoder_model_merged.onnx) with its external data, published together with
// genai_config.json (its vision and embedding sections), config.json,
// generation_config.json, the tokenizer and the image processor's
// configuration, in one OutputSet.
//
//===----------------------------------------------------------------------===//
#ifndef ARCHC_EMIT_VLMPACKAGE_H
#define ARCHC_EMIT_VLMPACKAGE_H

#include "emit/package/OnnxEmitter.h"

#include <vector>

namespace archc {

/// One graph of a package.
struct PackageGraph {
  std::string name;
  const ir::Module *module = nullptr;
};

/// Emits the package into the folder `opts.output` (or, with opts.text,
/// prints every graph as ONNX text).
bool emitOnnxPackage(const std::vector<PackageGraph> &graphs,
                     const OnnxEmitOptions &opts, DiagnosticEngine &diags,
                     std::ostream &out);

/// genai_config.json of a vision-language package: onnxruntime-genai's
/// decoder section for the decoder graph (inputs_embeds in, its extra
/// inputs), plus `vision` and `embedding` sections naming each graph's file
/// and I/O, and the image token ids. `files` maps graph names to their
/// model files relative to the output folder.
nlohmann::ordered_json
makeVlmGenaiConfig(const std::vector<PackageGraph> &graphs,
                   const std::map<std::string, std::string> &files,
                   const nlohmann::json &config,
                   const nlohmann::json *generation, bool kvCache = true);

} // namespace archc

#endif // ARCHC_EMIT_VLMPACKAGE_H
