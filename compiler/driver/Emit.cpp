//===- Emit.cpp - Back ends of the driver ---------------------------------===//
//
// This file implements emit(): IR and weight-list printing; the profile and
// ONNX back ends are called from here.
//
//===----------------------------------------------------------------------===//
#include "driver/Emit.h"

#include "analysis/ProfilePlot.h"
#include "analysis/ProfileReport.h"
#include "driver/ConfigReport.h"
#include "driver/OnnxLoader.h"
#include "driver/Package.h"
#include "driver/QuantConfig.h"
#include "ir/Printer.h"
#include "support/FileRead.h"
#include "support/OutputSet.h"
#include "support/Progress.h"

#include <fmt/format.h>

#include <filesystem>
#include <unistd.h>

#include <iostream>
#include <sstream>

namespace archc {

/// Whether -o names a folder: a trailing '/' or an existing directory;
/// for -emit=onnx also a name without an extension that is not an
/// existing file (`-o out` is the model folder out/, never a file `out`
/// beside an `out_data` and a genai_config.json in the current directory).
static bool namesFolder(const std::string &output, EmitTarget emit) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (output.empty() || output == "-")
    return false;
  if (output.back() == '/' || fs::is_directory(output, ec))
    return true;
  return emit == EmitTarget::Onnx && !fs::exists(output, ec) &&
         fs::path(output).extension().empty();
}

bool emit(const Options &opts, Compilation &c, std::ostream &out) {
  DiagnosticEngine &diags = *c.diags;
  bool folder = namesFolder(opts.output, opts.emit);
  if (folder && opts.emit != EmitTarget::Onnx) {
    diags.error(SourceRange(),
                "-o '{}' names a folder; this -emit target writes one file",
                opts.output);
    return false;
  }
  std::ostringstream text;
  if (opts.quantBits && opts.emit != EmitTarget::Onnx &&
      opts.emit != EmitTarget::OnnxText && opts.emit != EmitTarget::Profile) {
    diags.error(SourceRange(), "--quant applies to -emit=onnx, -emit=onnx-text "
                               "and -emit=profile");
    return false;
  }
  std::map<std::string, double> storedBytes;
  switch (opts.emit) {
  case EmitTarget::Config:
    if (c.config)
      printBoundConfig(c, opts.format, text);
    else
      printConfigSchema(c, opts.format, text);
    break;
  case EmitTarget::IR: {
    ir::PrintOptions po;
    po.printLocations = opts.printLoc;
    po.sourceMgr = &c.sourceMgr;
    ir::printModule(*c.module, text, po);
    // A package's graphs follow the main one.
    for (const NamedGraph &g : c.graphs) {
      text << "\n// graph " << g.name << "\n";
      ir::printModule(*g.module, text, po);
    }
    break;
  }
  case EmitTarget::Weights: {
    // Every checkpoint tensor of the arch: those of the main graph and of a
    // package's graphs (vision tower, projector), once each.
    if (c.graphs.empty())
      ir::printWeightList(*c.module, text);
    else
      ir::printWeightList(*packageWeights(c), text);
    // The list is the dequantised layout the model binds; a quantized
    // release stores (some of) these tensors in its own format.
    const nlohmann::json &root = c.config->root();
    const nlohmann::json *qc =
        root.contains("quantization_config")
            ? &root["quantization_config"]
            : (root.contains("text_config") &&
                       root["text_config"].is_object() &&
                       root["text_config"].contains("quantization_config")
                   ? &root["text_config"]["quantization_config"]
                   : nullptr);
    if (qc && qc->is_object() && qc->contains("quant_method"))
      text << "// checkpoint format: quantization_config.quant_method "
           << (*qc)["quant_method"].dump()
           << "; the tensors above are the dequantised layout (binding "
              "reads fp8 / fp4 / mxfp4 tensors and their scales, and gptq / "
              "awq / compressed-tensors codes)\n";
    break;
  }
  case EmitTarget::Profile: {
    ProfileRequest req;
    req.batches = opts.batch;
    req.seqs = opts.seq;
    req.pasts = opts.past;
    req.devices = opts.devices;
    req.runtime = opts.runtime;
    req.format = opts.format;
    req.perOp = opts.perOp;
    req.profileDir = opts.profileDir;
    // A vision-language package: its vision encoder too.
    for (const NamedGraph &g : c.graphs) {
      if (g.name == "vision_encoder")
        req.vision = g.module.get();
      // An encoder-decoder package: encoder once, decoder per token.
      if (g.name == "encoder")
        req.encoder = g.module.get();
      if (g.name == "decoder")
        req.decoder = g.module.get();
    }
    if (!req.encoder)
      req.decoder = nullptr; // a vision-language model's text decoder
    req.images = opts.images;
    req.quant = quantOptions(opts);
    if (!opts.weights.empty() && !req.quant.enabled()) {
      // The bytes a (quantized) checkpoint really stores.
      ir::CheckpointQuant cq;
      if (!readCheckpointQuant(*c.config, diags, cq) ||
          !checkpointBytes(*c.module, opts.weights, cq, diags, storedBytes))
        return false;
      req.checkpointBytes = &storedBytes;
      req.checkpointFormat = cq.any() ? cq.describe() : "unquantized";
    }
    nlohmann::ordered_json profile;
    if (!computeProfile(*c.module, req, c.sourceMgr, diags, profile))
      return false;
    renderProfile(profile, opts.format, opts.perOp, text);
    if (!opts.plot.empty() &&
        !writeOutputFile(opts.plot, renderProfilePlot(profile), diags))
      return false;
    break;
  }
  case EmitTarget::Onnx:
  case EmitTarget::OnnxText: {
    OnnxEmitOptions o;
    o.text = opts.emit == EmitTarget::OnnxText;
    o.output = opts.output;
    o.folder = folder;
    o.inputDir = opts.modelDir;
    o.progress = !opts.quiet && ProgressBar::stderrIsTerminal();
    o.summary = !opts.quiet;
    o.dataChunkBytes = opts.dataChunkBytes;
    o.weights = opts.weights;
    o.init = opts.init;
    o.seed = opts.seed;
    o.embedWeights = opts.embedWeights;
    o.genaiConfig = opts.genaiConfig;
    o.kvCache = opts.kvCache;
    o.allowOverflow = opts.allowOverflow;
    o.inputFiles = inputFilesRead();
    o.quant = quantOptions(opts);
    o.target = opts.target == "ort" ? OnnxTarget::Ort : OnnxTarget::Portable;
    if (!opts.weights.empty() &&
        !readCheckpointQuant(*c.config, diags, o.checkpointQuant))
      return false;
    o.config = &c.config->root();
    if (!o.text && (opts.output.empty() || opts.output == "-")) {
      diags.error(SourceRange(), "-emit=onnx needs an output: -o "
                                 "model.onnx, or -o OUT/ for a model folder");
      return false;
    }
    // A package (named graphs) is a folder of graphs; a single model file
    // of a package arch is its main graph (a vision-language model's text
    // model).
    bool package = !c.graphs.empty() && (folder || o.text);
    if (!package && !c.graphs.empty() && !o.text)
      diags.report(Severity::Note, SourceRange(),
                   fmt::format("'{}' is the text model (the arch's main "
                               "graph); -o DIR/ writes the {}-graph package",
                               opts.output, c.graphs.size()));
    if (!package && !c.graphs.empty()) {
      std::unique_ptr<ir::Module> all = packageWeights(c);
      for (const ir::WeightDecl &w : all->weights)
        o.declaredElsewhere.insert(w.pattern);
    }
    if (!o.text)
      return package ? runOnnxPackageBackend(c, o, diags, out)
                     : runOnnxBackend(*c.module, o, diags, out);
    if (!(package ? runOnnxPackageBackend(c, o, diags, text)
                  : runOnnxBackend(*c.module, o, diags, text)))
      return false;
    break;
  }
  default:
    diags.error(SourceRange(), "this -emit target is not available yet");
    return false;
  }
  if (opts.output.empty() || opts.output == "-") {
    if (&out == &std::cout)
      return writeStandardOutput(text.str(), diags);
    out << text.str();
    out.flush();
    return out.good();
  }
  return writeOutputFile(opts.output, text.str(), diags);
}

} // namespace archc
