//===- OnnxEmitter.cpp - -emit=onnx and -emit=onnx-text -------------------===//
//
// This file implements ONNX emission. Every file of one emission is staged
// in an OutputSet inside the output directory (the external data under its
// final name beside the model, so the model's relative references resolve
// there), checked with onnx::checker and strict shape inference, then
// published together. Any failure removes the staging directory: no partial
// output. A model folder (`-o OUT/`) also gets the transformers.js view of
// the graph, config.json, generation_config.json and the tokenizer.
//
//===----------------------------------------------------------------------===//
#include "emit/package/OnnxEmitter.h"
#include "emit/package/GenaiConfig.h"

#include "checkpoint/Safetensors.h"
#include "emit/lowering/OnnxLowering.h"
#include "emit/onnx/OnnxContribSchemas.h"
#include "emit/package/ClientIo.h"
#include "emit/package/ModelFolder.h"
#include "emit/package/OnnxFiles.h"
#include "emit/weights/ExternalData.h"
#include "support/FileRead.h"
#include "support/OutputSet.h"
#include "support/Progress.h"
#include "support/StagedFile.h"

#include <fmt/format.h>
#include <onnx/checker.h>
#include <onnx/defs/printer.h>
#include <onnx/shape_inference/implementation.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

namespace fs = std::filesystem;

namespace archc {

namespace {
/// The transformers.js Auto class that loads the folder: a generative
/// model's AutoModelForCausalLM; an encoder's, its head's (as transformers.js
/// maps the architectures[0] class), AutoModel for a base model.
std::string transformersJsAutoClass(const nlohmann::json &config,
                                    const ir::Module &m) {
  if (isGenerative(m))
    return "AutoModelForCausalLM";
  std::string cls;
  auto archs = config.find("architectures");
  if (archs != config.end() && archs->is_array() && !archs->empty() &&
      archs->front().is_string())
    cls = archs->front().get<std::string>();
  for (const char *head :
       {"ForMaskedLM", "ForSequenceClassification", "ForTokenClassification"})
    if (cls.find(head) != std::string::npos)
      return std::string("AutoModel") + head;
  return "AutoModel";
}

/// After a model folder run (stderr): the files it wrote and how each
/// client loads the folder; for a quantized model (`wasmDtype` given), the
/// model a browser's WASM device loads instead, or that it has none.
void printFolderSummary(const OutputSet &set, const fs::path &outDir,
                        const fs::path &modelRel, size_t dataFiles,
                        const std::string &tjsDtype, bool tjsRuns, bool genai,
                        const std::string *wasmDtype,
                        const std::string &autoClass) {
  std::string modelFile = modelRel.filename().string();
  // The model first, then the other files by name.
  std::vector<std::string> files = set.stagedFiles();
  std::sort(files.begin(), files.end(),
            [&](const std::string &a, const std::string &b) {
              bool ma = a == modelRel.string(), mb = b == modelRel.string();
              return ma != mb ? ma : a < b;
            });
  std::string list;
  for (const std::string &rel : files) {
    if (isExternalDataOf(modelFile, fs::path(rel).filename().string()))
      continue;
    list += (list.empty() ? "" : ", ") + rel;
    if (rel == modelRel.string() && dataFiles)
      list += fmt::format(" (+ {} external data file{})", dataFiles,
                          dataFiles == 1 ? "" : "s");
  }
  std::string dir = outDir.string();
  fmt::print(stderr, "archc: wrote model folder '{}': {}\n", dir, list);
  if (!tjsRuns)
    fmt::print(stderr, "  transformers.js:   cannot run it (see the note "
                       "above)\n");
  else if (tjsDtype.empty())
    fmt::print(stderr,
               "  transformers.js:   has no dtype for {}; the folder's "
               "default is config.json's transformers.js_config.dtype\n",
               modelRel.string());
  else
    fmt::print(stderr,
               "  transformers.js:   await {}."
               "from_pretrained('{}')  // {}: config.json's dtype '{}'\n",
               autoClass, dir, modelRel.string(), tjsDtype);
  // A quantized model: what a browser's default device (WASM, no fast
  // MatMulNBits) loads.
  if (tjsRuns && wasmDtype && !wasmDtype->empty())
    fmt::print(
        stderr,
        "                     // in a browser (device 'wasm'): "
        "onnx/{}, config.json's device_config.wasm.dtype '{}'\n",
        folderModelFile(*wasmDtype == "fp16" ? ir::DType::F16 : ir::DType::F32),
        *wasmDtype);
  else if (tjsRuns && wasmDtype)
    fmt::print(stderr,
               "                     // in a browser (device 'wasm') "
               "MatMulNBits runs several times slower than a float model: "
               "add one to the folder (docs/performance.md)\n");
  if (genai)
    fmt::print(stderr, "  onnxruntime-genai: og.Model('{}')\n", dir);
}
} // namespace

bool emitOnnx(const ir::Module &m, const OnnxEmitOptions &opts,
              DiagnosticEngine &diags, std::ostream &textOut) {
  Checkpoint ckpt;
  WeightSource source;
  if (!chooseWeightSource(opts.weights, opts.init, opts.text, ckpt, source,
                          diags))
    return false;

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

  WeightStorage storage(m, opts.quant, opts.checkpointQuant,
                        source == WeightSource::Checkpoint ? &ckpt : nullptr);
  if (opts.quant.readerOptionsGiven && !storage.anyQuantized()) {
    diags.error(SourceRange(),
                "--quant-accuracy, --quant-unroll-experts and --quant-qmoe "
                "apply to quantized weights, and this model has none (no "
                "--quant; the checkpoint stores no GPTQ, AWQ or "
                "compressed-tensors codes a matmul reads)");
    return false;
  }
  std::unique_ptr<WeightPlan> planned =
      makeWeightPlan(m, source, &ckpt, opts.seed, storage);
  WeightPlan &plan = *planned;
  plan.setAllowOverflow(opts.allowOverflow);
  OnnxLowering lowering(m, *graph, plan, diags, storage, opts.target);
  if (!lowering.run())
    return false;
  if (lowering.usesContribOps()) {
    registerContribSchemas();
    auto *contrib = model.add_opset_import();
    contrib->set_domain(kContribDomain);
    contrib->set_version(kContribOpset);
  }
  if (!plan.validate(diags, opts.weights, /*reportUnused=*/true,
                     &opts.declaredElsewhere))
    return false;

  if (opts.text) {
    // Checked like a written model, its layout staged in a scratch set in
    // the temporary folder (removed on return, on a signal, or by the next
    // run's sweep).
    OutputSet scratch;
    bool ok = scratch.begin(fs::temp_directory_path().string(), diags);
    if (ok) {
      ExternalDataWriter data(scratch, "", "model.onnx", opts.dataChunkBytes,
                              /*layoutOnly=*/true, nullptr);
      WeightStats stats;
      ok = plan.writeExternal(*graph, data, diags, stats) &&
           checkModel(scratch.stagingDirectory(), model, diags);
    }
    scratch.discard();
    if (!ok)
      return false;
    printText(model, textOut);
    return true;
  }

  // Where the files go.
  const nlohmann::json emptyConfig = nlohmann::json::object();
  const nlohmann::json &config = opts.config ? *opts.config : emptyConfig;
  fs::path outDir, modelRel;
  if (opts.folder) {
    outDir = opts.output;
    modelRel =
        fs::path("onnx") /
        folderModelFile(m.activationDType, storage.fileTag(m.activationDType));
  } else {
    fs::path target(opts.output);
    outDir = target.parent_path();
    modelRel = target.filename();
  }
  if (outDir.empty())
    outDir = ".";
  const std::string modelFile = modelRel.filename().string();
  const fs::path modelDirRel = modelRel.parent_path();

  if (!opts.folder && !checkDestination(opts.output, diags))
    return false;
  OutputSet set;
  if (!set.begin(outDir.string(), diags))
    return false;

  // Weights: external data files first (published before the model).
  WeightStats stats;
  bool embed = opts.embedWeights;
  std::vector<std::string> dataFiles;
  if (embed) {
    if (plan.totalBytes() > (uint64_t(2) << 30) - (uint64_t(64) << 20)) {
      diags.error(SourceRange(),
                  "--embed-weights: {} bytes of weights do not "
                  "fit in one protobuf (2 GiB limit)",
                  plan.totalBytes());
      return false;
    }
    ProgressBar bar("binding weights", plan.totalBytes(),
                    opts.progress && source != WeightSource::Layout);
    if (!plan.embed(*graph, diags, stats, &bar))
      return false;
  } else {
    bool layout = source == WeightSource::Layout;
    ProgressBar bar("binding weights", plan.totalBytes(),
                    opts.progress && !layout);
    ExternalDataWriter data(set, modelDirRel.string(), modelFile,
                            opts.dataChunkBytes, layout, &bar);
    if (!plan.writeExternal(*graph, data, diags, stats))
      return false;
    dataFiles = data.files();
  }
  fs::path stagedModelDir = fs::path(set.stagingDirectory()) / modelDirRel;

  // Side files of a model folder; its config.json names the model type
  // transformers.js sees.
  nlohmann::json generation = readInputGenerationConfig(opts.inputDir, diags);
  std::string modelType = modelTypeOf(config, m);
  const std::string genaiVariant = modelRel.stem().string() + ".genai.onnx";
  std::string wasmDtype; // device_config.wasm.dtype written, if any
  if (opts.folder) {
    nlohmann::json previous =
        readJsonIfPresent(outDir / "config.json", /*input=*/false);
    std::map<std::string, unsigned> chunks = {
        {modelFile, static_cast<unsigned>(dataFiles.size())},
        {genaiVariant, 0}};
    // A quantized model's MatMulNBits run slowly on onnxruntime-web's WASM
    // build: a browser's default device loads the folder's float model.
    const std::string tag = storage.fileTag(m.activationDType);
    if (!tag.empty())
      wasmDtype = wasmFloatDtype(outDir);
    nlohmann::json outConfig = outputConfig(
        config, m, chunks, previous.is_object() ? &previous : nullptr,
        transformersJsDtype(m.activationDType, tag), wasmDtype);
    modelType = modelTypeOf(outConfig, m);
    if (!writeText(set, "config.json", outConfig.dump(2) + "\n", diags))
      return false;
    // The input's, byte for byte; derived from the config only when the
    // input folder has none (one it has but that is refused is not
    // replaced).
    SideFileCopy copied =
        opts.inputDir.empty()
            ? SideFileCopy::Absent
            : copySideFile(set, opts.inputDir, "generation_config.json", diags);
    if (copied == SideFileCopy::Failed)
      return false;
    // An encoder generates nothing: no generation_config.json of its own.
    if (copied == SideFileCopy::Absent && isGenerative(m) &&
        !writeText(set, "generation_config.json",
                   generationConfig(nullptr, config).dump(2) + "\n", diags))
      return false;
  }

  // The model as the folder's clients see it: transformers.js names in a
  // model folder, onnxruntime-genai's (archc's own) otherwise.
  ClientIo tjs;
  if (opts.folder) {
    auto mq = config.find("multi_query");
    tjs = transformersJsIo(*graph, modelType,
                           mq != config.end() && mq->is_boolean() &&
                               mq->get<bool>());
    if (!tjs.runs)
      diags.report(Severity::Note, SourceRange(),
                   fmt::format("{}: transformers.js cannot run this model "
                               "({})",
                               set.finalPath(modelRel.string()), tjs.whyNot));
  }
  std::string genaiWhyNot;
  bool writeGenai = opts.genaiConfig;
  if (writeGenai && !genaiBindsStates(m, genaiWhyNot)) {
    diags.report(Severity::Note, SourceRange(),
                 "genai_config.json not written: " + genaiWhyNot);
    writeGenai = false;
  }
  onnx::ModelProto genaiModel;
  std::string genaiRel = modelRel.string();
  // onnxruntime-genai's graph beside the client's only where a
  // genai_config.json names it.
  bool twoGraphs = opts.folder && tjs.runs && tjs.changesGraph();
  bool genaiGraph = twoGraphs && writeGenai;
  if (twoGraphs) {
    // onnxruntime-genai's graph: the same weights (same data files), its
    // own names, beside the model.
    if (genaiGraph)
      genaiModel = model;
    genaiRel =
        (modelDirRel / (modelRel.stem().string() + ".genai.onnx")).string();
    applyClientIo(*model.mutable_graph(), tjs);
  }
  if (!checkModel(stagedModelDir.string(), model, diags) ||
      !writeProto(model, set.stage(modelRel.string()),
                  set.finalPath(modelRel.string()), diags))
    return false;
  if (genaiGraph && (!checkModel(stagedModelDir.string(), genaiModel, diags) ||
                     !writeProto(genaiModel, set.stage(genaiRel),
                                 set.finalPath(genaiRel), diags)))
    return false;

  if (writeGenai) {
    nlohmann::ordered_json genai = makeGenaiConfig(
        m, config, generation.is_object() ? &generation : nullptr, genaiRel,
        opts.kvCache);
    if (!writeText(set, "genai_config.json", genai.dump(4) + "\n", diags))
      return false;
  }
  // The tokenizer of the input folder.
  bool copiedTokenizer = false;
  if (opts.folder && !opts.inputDir.empty()) {
    // An embedding model's sentence-transformers configuration (pooling,
    // normalisation) travels with it.
    for (const std::string &name :
         sentenceTransformersFiles(opts.inputDir, diags))
      if (copySideFile(set, opts.inputDir, name, diags) == SideFileCopy::Failed)
        return false;
    for (const std::string &name : tokenizerFileNames()) {
      SideFileCopy copied = copySideFile(set, opts.inputDir, name, diags);
      if (copied == SideFileCopy::Failed)
        return false;
      copiedTokenizer = copiedTokenizer || copied == SideFileCopy::Copied;
    }
  }

  // Files of an earlier emission of this model that this one does not
  // produce: its data files (another chunk count, --embed-weights, the
  // old model.onnx.data name), its genai graph, the genai_config.json that
  // described it, and (when this emission brings a tokenizer) the old one.
  std::string modelRelStr = modelRel.string();
  fs::path genaiPath = outDir / "genai_config.json";
  set.removeStale({modelDirRel.string()}, [=](const std::string &rel) {
    std::string name = fs::path(rel).filename().string();
    return isExternalDataOf(modelFile, name) || name == genaiVariant;
  });
  set.removeStale({""}, [=](const std::string &rel) {
    if (rel == "genai_config.json") {
      std::string file = genaiDecoderFile(genaiPath);
      return !file.empty() &&
             (file == modelRelStr || fs::path(file).filename() == genaiVariant);
    }
    if (copiedTokenizer) {
      const auto &names = tokenizerFileNames();
      return std::find(names.begin(), names.end(), rel) != names.end();
    }
    return false;
  });
  if (!set.publish(diags))
    return false;
  if (opts.folder) {
    std::error_code ec;
    bool tokenizer = copiedTokenizer ||
                     fs::is_regular_file(outDir / "tokenizer.json", ec) ||
                     fs::is_regular_file(outDir / "tokenizer.model", ec);
    if (!tokenizer)
      diags.warning(SourceRange(),
                    fmt::format("'{}' has no tokenizer (tokenizer.json): "
                                "transformers.js pipelines and "
                                "onnxruntime-genai need one; give the model's "
                                "folder as the input, or copy its tokenizer "
                                "files into '{}'",
                                outDir.string(), outDir.string()));
    diags.flush(); // the notes and warnings first, the summary last
    if (opts.summary)
      printFolderSummary(
          set, outDir, modelRel, dataFiles.size(),
          tjs.runs ? transformersJsDtype(m.activationDType,
                                         storage.fileTag(m.activationDType))
                   : std::string(),
          tjs.runs, writeGenai,
          storage.fileTag(m.activationDType).empty() ? nullptr : &wasmDtype,
          transformersJsAutoClass(config, m));
  }
  return true;
}

} // namespace archc
