//===- OnnxEmitter.h - -emit=onnx and -emit=onnx-text -----------*- C++ -*-===//
//
// This file declares the ONNX back end of the driver: lower the expanded IR,
// bind weights, validate the model with onnx::checker and strict ONNX shape
// inference in-process, and write it (model + external data +
// genai_config.json) atomically, or print it as ONNX text.
//
//===----------------------------------------------------------------------===//
#ifndef ARCHC_EMIT_ONNXEMITTER_H
#define ARCHC_EMIT_ONNXEMITTER_H

#include "ir/IR.h"
#include "ir/WeightQuant.h"
#include "support/Diagnostics.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <ostream>
#include <string>

namespace archc {

struct OnnxEmitOptions {
  std::string output;        ///< model path (-o); empty for text
  std::string weights;       ///< checkpoint path, or empty
  std::string init = "none"; ///< none | random | zeros (without weights)
  uint64_t seed = 0;
  bool embedWeights = false;
  bool genaiConfig = true;
  bool kvCache = true;
  bool text = false;
  /// --quant: Linear weights block-quantized (MatMulNBits).
  ir::QuantOptions quant;
  /// The checkpoint's own quantization (config.json quantization_config).
  ir::CheckpointQuant checkpointQuant;
  /// config.json (for genai_config.json: token ids, context length, type).
  const nlohmann::json *config = nullptr;
};

/// Emits the module. For text, prints to `out`.
bool emitOnnx(const ir::Module &m, const OnnxEmitOptions &opts,
              DiagnosticEngine &diags, std::ostream &out);

/// Writes onnxruntime-genai's genai_config.json for the model.
bool writeGenaiConfig(const ir::Module &m, const nlohmann::json &config,
                      const std::string &modelFile, const std::string &path,
                      bool kvCache, DiagnosticEngine &diags);

} // namespace archc

#endif // ARCHC_EMIT_ONNXEMITTER_H
