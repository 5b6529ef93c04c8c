//===- OnnxEmitter.cpp - -emit=onnx and -emit=onnx-text -------------------===//
//
// This file implements ONNX emission. Files are first written into a
// private temporary directory next to the output (the external data file
// under its final name, so the model's relative reference resolves), checked
// there with onnx::checker and strict shape inference, then renamed into
// place. Any failure removes the temporary directory: no partial output.
//
//===----------------------------------------------------------------------===//
#include "emit/OnnxEmitter.h"

#include "emit/OnnxContribSchemas.h"
#include "emit/OnnxLowering.h"
#include "emit/Safetensors.h"
#include "support/AtomicFile.h"

#include <onnx/checker.h>
#include <onnx/defs/printer.h>
#include <onnx/shape_inference/implementation.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

namespace fs = std::filesystem;

// onnx 1.12 exports the checker entry that takes a context (for the
// model directory of external data) without declaring it in checker.h.
namespace onnx::checker {
void check_model(const ModelProto &model, CheckerContext &ctx);
} // namespace onnx::checker

namespace archc {

namespace {
/// A temporary directory removed on destruction unless released.
class TempDir {
public:
  bool create(const fs::path &near, DiagnosticEngine &diags) {
    fs::path dir =
        near.parent_path().empty() ? fs::path(".") : near.parent_path();
    std::string tmpl =
        (dir / ("." + near.filename().string() + ".tmp-XXXXXX")).string();
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    if (!mkdtemp(buf.data())) {
      diags.error(SourceRange(), "cannot write '{}': {}", near.string(),
                  std::strerror(errno));
      return false;
    }
    path = buf.data();
    return true;
  }
  ~TempDir() {
    if (!path.empty()) {
      std::error_code ec;
      fs::remove_all(path, ec);
    }
  }
  fs::path path;
};

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

bool writeProto(const onnx::ModelProto &model, const fs::path &path,
                DiagnosticEngine &diags) {
  std::ofstream out(path, std::ios::binary);
  if (!out || !model.SerializeToOstream(&out) || !out.flush()) {
    diags.error(SourceRange(), "cannot write '{}'", path.string());
    return false;
  }
  return true;
}
} // namespace

bool emitOnnx(const ir::Module &m, const OnnxEmitOptions &opts,
              DiagnosticEngine &diags, std::ostream &textOut) {
  Checkpoint ckpt;
  WeightSource source = WeightSource::Layout;
  if (!opts.weights.empty()) {
    if (!ckpt.open(opts.weights, diags))
      return false;
    source = WeightSource::Checkpoint;
  } else if (opts.init == "random") {
    source = WeightSource::Random;
  } else if (opts.init == "zeros") {
    source = WeightSource::Zeros;
  }
  if (opts.text)
    source = WeightSource::Layout;

  onnx::ModelProto model;
  model.set_ir_version(onnx::IR_VERSION);
  model.set_producer_name("archc");
  model.set_producer_version("0.1.0");
  model.set_doc_string("Compiled by archc from " + m.sourceFile + " with " +
                       m.configFile);
  auto *opset = model.add_opset_import();
  opset->set_domain("");
  opset->set_version(kOnnxOpset);
  onnx::GraphProto *graph = model.mutable_graph();
  graph->set_name(m.name);

  WeightPlan plan(source, source == WeightSource::Checkpoint ? &ckpt : nullptr,
                  opts.seed, opts.checkpointQuant);
  // Stacked expert weights the model reads as [in, out] matrices (how
  // MXFP4 blocks, stored [out, in], map onto them).
  std::set<std::string> inOut;
  for (const ir::LinearWeightUse &u : ir::findLinearWeightUses(m))
    if (u.slice && u.inOut)
      inOut.insert(u.param->attr<std::string>("name"));
  plan.setInOutWeights(std::move(inOut));
  OnnxLowering lowering(m, *graph, plan, diags, opts.quant);
  if (!lowering.run())
    return false;
  if (lowering.usesContribOps()) {
    registerContribSchemas();
    auto *contrib = model.add_opset_import();
    contrib->set_domain(kContribDomain);
    contrib->set_version(kContribOpset);
  }
  if (!plan.validate(diags, opts.weights))
    return false;

  fs::path target = opts.text ? fs::path("model.onnx") : fs::path(opts.output);
  TempDir tmp;
  if (!tmp.create(opts.text ? fs::temp_directory_path() / "archc.onnx" : target,
                  diags))
    return false;
  std::string dataName = target.filename().string() + ".data";
  WeightStats stats;
  bool embed = opts.embedWeights && !opts.text;
  if (embed) {
    if (plan.totalBytes() > (uint64_t(2) << 30) - (uint64_t(64) << 20)) {
      diags.error(SourceRange(),
                  "--embed-weights: {} bytes of weights do not "
                  "fit in one protobuf (2 GiB limit)",
                  plan.totalBytes());
      return false;
    }
    if (!plan.embed(*graph, diags, stats))
      return false;
  } else {
    AtomicFile data;
    if (!data.open((tmp.path / dataName).string(), diags))
      return false;
    if (!plan.writeExternal(*graph, dataName, data, diags, stats) ||
        !data.commit(diags))
      return false;
  }
  fs::path tmpModel = tmp.path / target.filename();
  if (!writeProto(model, tmpModel, diags))
    return false;
  if (!checkModel(tmp.path.string(), model, diags))
    return false;

  if (opts.text) {
    // Print without initializer data (layout only).
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
    textOut << "<ir_version: " << model.ir_version()
            << ", opset_import: [\"\" : " << kOnnxOpset;
    if (lowering.usesContribOps())
      textOut << ", \"" << kContribDomain << "\" : " << kContribOpset;
    textOut << "], producer_name: \"archc\">\n";
    textOut << printed << "\n";
    return true;
  }

  if (opts.genaiConfig) {
    static const nlohmann::json empty = nlohmann::json::object();
    if (!writeGenaiConfig(
            m, opts.config ? *opts.config : empty, target.filename().string(),
            (tmp.path / "genai_config.json").string(), opts.kvCache, diags))
      return false;
  }

  // Move into place: data and genai config first, then the model.
  std::error_code ec;
  fs::path finalData = target.parent_path() / dataName;
  if (!embed) {
    fs::rename(tmp.path / dataName, finalData, ec);
    if (ec) {
      diags.error(SourceRange(), "cannot write '{}': {}", finalData.string(),
                  ec.message());
      return false;
    }
  }
  fs::rename(tmpModel, target, ec);
  if (ec) {
    // Undo: nothing partial stays behind.
    if (!embed)
      fs::remove(finalData);
    diags.error(SourceRange(), "cannot write '{}': {}", target.string(),
                ec.message());
    return false;
  }
  if (opts.genaiConfig) {
    fs::rename(tmp.path / "genai_config.json",
               target.parent_path() / "genai_config.json", ec);
    if (ec) {
      diags.error(SourceRange(), "cannot write genai_config.json: {}",
                  ec.message());
      return false;
    }
  }
  return true;
}

} // namespace archc
