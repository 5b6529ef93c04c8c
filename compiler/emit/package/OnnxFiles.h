//===- OnnxFiles.h - Checking and writing the files of an emission -*- C++
//-*-===//
//
// This file declares the steps every ONNX emission shares (OnnxEmitter.cpp
// for one graph, VlmPackage.cpp for a package): the full check of a model
// against its staged external data, writing a model or a text file into an
// OutputSet's staging folder, reading an optional JSON file, printing a
// model as ONNX text.
//
//===----------------------------------------------------------------------===//
#ifndef ARCHC_EMIT_ONNXFILES_H
#define ARCHC_EMIT_ONNXFILES_H

#include "ir/IR.h"
#include "support/Diagnostics.h"
#include "support/OutputSet.h"

#include <nlohmann/json.hpp>
#include <onnx/onnx_pb.h>

#include <filesystem>
#include <ostream>
#include <string>

namespace archc {

/// onnx::checker (full, external data resolved in `modelDir`) and strict
/// shape inference; an invalid model is reported as an internal error.
bool checkModel(const std::string &modelDir, onnx::ModelProto &model,
                DiagnosticEngine &diags);

/// Serialises `model` to the staged path (`shown` in messages).
bool writeProto(const onnx::ModelProto &model, const std::string &staged,
                const std::string &shown, DiagnosticEngine &diags);

/// Stages a text file at `rel` of the set.
bool writeText(OutputSet &set, const std::string &rel, const std::string &text,
               DiagnosticEngine &diags);

/// A JSON file if it exists; null if absent, unreadable, over 4 MiB or
/// nested over 64 levels (support/BoundedJson.h). `input`: the file is an
/// input of the run (false for an earlier output read back, which the new
/// one may replace).
nlohmann::json readJsonIfPresent(const std::filesystem::path &path,
                                 bool input = true);

/// The model.decoder.filename of an earlier genai_config.json (an output
/// read back), or "" when it has none.
std::string genaiDecoderFile(const std::filesystem::path &genaiConfig);

/// config.json's model_type, else the module's name.
std::string modelTypeOf(const nlohmann::json &config, const ir::Module &m);

/// The model as ONNX text, initializers as typed inputs (layout only).
void printText(const onnx::ModelProto &model, std::ostream &out);

} // namespace archc

#endif // ARCHC_EMIT_ONNXFILES_H
