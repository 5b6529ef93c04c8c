//===- OnnxFiles.cpp - Checking and writing the files of an emission ------===//
//
// This file implements the steps every ONNX emission shares (OnnxFiles.h):
// the full check of a model, writing a model or a text file into the
// staging folder, reading an optional JSON file, printing ONNX text.
//
//===----------------------------------------------------------------------===//
#include "emit/package/OnnxFiles.h"

#include "support/BoundedJson.h"
#include "support/FileRead.h"
#include "support/StagedFile.h"

#include <fmt/format.h>
#include <onnx/checker.h>
#include <onnx/defs/printer.h>
#include <onnx/shape_inference/implementation.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace fs = std::filesystem;

// onnx 1.12 exports the checker entry that takes a context (for the
// model directory of external data) without declaring it in checker.h.
namespace onnx::checker {
void check_model(const ModelProto &model, CheckerContext &ctx);
} // namespace onnx::checker

namespace archc {

bool checkModel(const std::string &modelDir, onnx::ModelProto &model,
                DiagnosticEngine &diags) {
  try {
    // Full check of the in-memory model; external data resolves against the
    // directory it was written to.
    onnx::checker::CheckerContext ctx;
    ctx.set_model_dir(modelDir + "/");
    onnx::checker::check_model(model, ctx);
    onnx::ShapeInferenceOptions opts(/*check_type=*/true, /*strict=*/1,
                                     /*data_prop=*/false);
    onnx::shape_inference::InferShapes(
        model, onnx::OpSchemaRegistry::Instance(), opts);
  } catch (const std::exception &e) {
    diags.error(SourceRange(),
                "internal error: the emitted ONNX model is "
                "invalid: {}",
                e.what());
    return false;
  }
  return true;
}

bool writeProto(const onnx::ModelProto &model, const std::string &staged,
                const std::string &shown, DiagnosticEngine &diags) {
  std::string bytes;
  if (!model.SerializeToString(&bytes)) {
    diags.error(SourceRange(),
                "cannot write '{}': the model does not "
                "serialise (over 2 GiB?)",
                shown);
    return false;
  }
  StagedFile f;
  return f.open(staged, shown, diags) &&
         f.write(bytes.data(), bytes.size(), diags) && f.close(diags);
}

bool writeText(OutputSet &set, const std::string &rel, const std::string &text,
               DiagnosticEngine &diags) {
  StagedFile f;
  return f.open(set.stage(rel), set.finalPath(rel), diags) &&
         f.write(text.data(), text.size(), diags) && f.close(diags);
}

/// Reads a JSON file if it exists; null if absent or unreadable.
nlohmann::json readJsonIfPresent(const fs::path &path, bool input) {
  std::string text, error;
  if (!readRegularFile(path.string(), kMaxConfigBytes, text, error, input))
    return nullptr;
  nlohmann::json j;
  JsonParseOptions opts;
  opts.allowNonFinite = true;
  if (!parseBoundedJson(text, j, error, opts))
    return nullptr;
  return j;
}

std::string genaiDecoderFile(const fs::path &genaiConfig) {
  nlohmann::json old = readJsonIfPresent(genaiConfig, /*input=*/false);
  const nlohmann::json::json_pointer at("/model/decoder/filename");
  if (!old.is_object() || !old.contains(at) || !old[at].is_string())
    return "";
  return old[at].get<std::string>();
}

std::string modelTypeOf(const nlohmann::json &config, const ir::Module &m) {
  auto it = config.find("model_type");
  if (it != config.end() && it->is_string())
    return it->get<std::string>();
  return m.name;
}

void printText(const onnx::ModelProto &model, std::ostream &out) {
  // Printed without initializer data (layout only).
  onnx::GraphProto printed = model.graph();
  printed.clear_initializer();
  for (const auto &init : model.graph().initializer()) {
    auto *vi = printed.add_input();
    vi->set_name(init.name());
    auto *tt = vi->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(init.data_type());
    for (int64_t d : init.dims())
      tt->mutable_shape()->add_dim()->set_dim_value(d);
  }
  out << "<ir_version: " << model.ir_version() << ", opset_import: [";
  for (int i = 0; i < model.opset_import_size(); ++i)
    out << (i ? ", " : "") << "\"" << model.opset_import(i).domain()
        << "\" : " << model.opset_import(i).version();
  out << "], producer_name: \"archc\">\n";
  out << printed << "\n";
}

} // namespace archc
