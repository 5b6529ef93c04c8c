//===- OnnxEmitter.h - -emit=onnx and -emit=onnx-text -----------*- C++ -*-===//
//
// This file declares the ONNX back end of the driver: lower the expanded IR,
// bind weights, validate the model with onnx::checker and strict ONNX shape
// inference in-process, and write it through an OutputSet (model, external
// data, genai_config.json; for a model folder also config.json,
// generation_config.json and the tokenizer), or print it as ONNX text.
//
//===----------------------------------------------------------------------===//
#ifndef ARCHC_EMIT_ONNXEMITTER_H
#define ARCHC_EMIT_ONNXEMITTER_H

#include "emit/onnx/OnnxTarget.h"
#include "ir/IR.h"
#include "ir/WeightQuant.h"
#include "support/Diagnostics.h"
#include "support/FileRead.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <ostream>
#include <set>
#include <string>
#include <vector>

namespace archc {

struct OnnxEmitOptions {
  std::string output;  ///< model path (-o) or model folder; empty for text
  bool folder = false; ///< `output` is a model folder (docs/onnx.md)
  std::string
      inputDir; ///< the input model folder (tokenizer, generation config)
  std::string weights;       ///< checkpoint path, or empty
  std::string init = "none"; ///< none | random | zeros (without weights)
  uint64_t seed = 0;
  bool embedWeights = false;
  bool genaiConfig = true;
  bool kvCache = true;
  bool text = false;
  bool progress = false; ///< draw a progress bar while writing weights
  /// After a model folder is written: list its files and how each client
  /// loads it (stderr). (A folder without a tokenizer is always a warning.)
  bool summary = false;
  uint64_t dataChunkBytes = 0; ///< external data file limit (0 = < 2 GiB)
  /// --quant: Linear weights block-quantized (MatMulNBits).
  ir::QuantOptions quant;
  /// --target: portable standard ONNX, or ONNX Runtime's contrib ops.
  OnnxTarget target = OnnxTarget::Portable;
  /// The checkpoint's own quantization (config.json quantization_config).
  ir::CheckpointQuant checkpointQuant;
  /// config.json (for genai_config.json: token ids, context length, type).
  const nlohmann::json *config = nullptr;
  /// --allow-overflow: a weight that overflows its stored dtype becomes inf
  /// instead of an error.
  bool allowOverflow = false;
  /// The files the driver read (config, .arch files): no output replaces
  /// them (the back end records them as inputs of its own).
  std::vector<InputFile> inputFiles;
  /// Checkpoint tensors the arch's other graphs read (a vision-language
  /// model's vision tower when its text model is emitted alone): not
  /// reported as unused.
  std::set<std::string> declaredElsewhere;
};

/// Emits the module. For text, prints to `out`.
bool emitOnnx(const ir::Module &m, const OnnxEmitOptions &opts,
              DiagnosticEngine &diags, std::ostream &out);

} // namespace archc

#endif // ARCHC_EMIT_ONNXEMITTER_H
