//===- VlmPackage.cpp - Several-graph ONNX packages -----------------------===//
//
// This file implements the emission of a package. Every graph is lowered
// with its own WeightPlan over one checkpoint (a tensor two graphs read,
// such as a tied embedding, is written into each graph's data), checked and
// staged in OUT/onnx/ under transformers.js's session name (VlmFolder.h),
// and the whole folder is published as one
// OutputSet: nothing of a failed emission is left behind. Checkpoint
// tensors no graph declares are reported once; declared tensors no graph
// reads (a CLIP tower's layers past the selected feature layer) are not
// bound.
//
//===----------------------------------------------------------------------===//
#include "emit/package/VlmPackage.h"
#include "emit/package/GenaiConfig.h"

#include "checkpoint/Safetensors.h"
#include "emit/lowering/OnnxLowering.h"
#include "emit/package/ModelFolder.h"
#include "emit/package/OnnxFiles.h"
#include "emit/package/VlmFolder.h"
#include "emit/weights/ExternalData.h"
#include "emit/weights/WeightPlan.h"
#include "ir/WeightQuant.h"
#include "support/OutputSet.h"
#include "support/Progress.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <set>

namespace fs = std::filesystem;

namespace archc {

namespace {
/// Image-processor files a caller needs to prepare pixel values.
const std::vector<std::string> &processorFileNames() {
  static const std::vector<std::string> names = {
      "preprocessor_config.json", "processor_config.json", "chat_template.json",
      "video_preprocessor_config.json"};
  return names;
}

const ir::Module *graphNamed(const std::vector<PackageGraph> &graphs,
                             const std::string &name) {
  for (const PackageGraph &g : graphs)
    if (g.name == name)
      return g.module;
  return nullptr;
}

/// A config value: the top level first, then vision_config, text_config.
nlohmann::json configValue(const nlohmann::json &cfg, const std::string &k) {
  for (const char *section : {"", "vision_config", "text_config"}) {
    const nlohmann::json *obj = &cfg;
    if (*section) {
      auto it = cfg.find(section);
      if (it == cfg.end() || !it->is_object())
        continue;
      obj = &*it;
    }
    auto v = obj->find(k);
    if (v != obj->end() && !v->is_null())
      return *v;
  }
  return nullptr;
}

/// The graph's input names, in order, and its output names.
std::vector<std::string> inputNames(const ir::Module &m) {
  std::vector<std::string> names;
  for (const auto &a : m.graph.body.getArguments())
    names.push_back(a->name);
  return names;
}
} // namespace

nlohmann::ordered_json
makeVlmGenaiConfig(const std::vector<PackageGraph> &graphs,
                   const std::map<std::string, std::string> &files,
                   const nlohmann::json &config,
                   const nlohmann::json *generation, bool kvCache) {
  using nlohmann::ordered_json;
  const ir::Module *decoder = graphNamed(graphs, "decoder");
  ordered_json root = makeGenaiConfig(*decoder, config, generation,
                                      files.at("decoder"), kvCache);
  ordered_json &model = root["model"];
  ordered_json &dec = model["decoder"];
  // The decoder reads embeddings (and its per-model extras), not ids.
  // onnxruntime-genai's order: embeddings, mask, positions, then the
  // model's extra inputs, then the cache templates.
  ordered_json inputs = {{"inputs_embeds", "inputs_embeds"},
                         {"attention_mask", "attention_mask"},
                         {"position_ids", "position_ids"}};
  for (const std::string &n : inputNames(*decoder))
    if (!inputs.contains(n))
      inputs[n] = n;
  for (auto it = dec["inputs"].begin(); it != dec["inputs"].end(); ++it)
    if (it.key() != "input_ids" && !inputs.contains(it.key()))
      inputs[it.key()] = it.value();
  dec["inputs"] = inputs;
  for (const auto &a : decoder->graph.body.getArguments())
    if (a->name == "inputs_embeds")
      dec["hidden_size"] = a->type.dims.back().getConstant().value_or(0);
  if (config.contains("model_type") && config["model_type"].is_string())
    model["type"] = config["model_type"];
  if (const ir::Module *vision = graphNamed(graphs, "vision_encoder")) {
    ordered_json v;
    v["filename"] = files.at("vision_encoder");
    nlohmann::json merge = configValue(config, "spatial_merge_size");
    if (!merge.is_null())
      v["spatial_merge_size"] = merge;
    ordered_json in = ordered_json::object(), out = ordered_json::object();
    for (const std::string &n : inputNames(*vision))
      in[n] = n;
    for (const std::string &n : vision->graph.outputNames)
      out[n] = n;
    v["inputs"] = in;
    v["outputs"] = out;
    model["vision"] = v;
  }
  if (const ir::Module *embedding = graphNamed(graphs, "embedding")) {
    ordered_json e;
    e["filename"] = files.at("embedding");
    ordered_json in = ordered_json::object(), out = ordered_json::object();
    for (const std::string &n : inputNames(*embedding))
      in[n] = n;
    for (const std::string &n : embedding->graph.outputNames)
      out[n] = n;
    e["inputs"] = in;
    e["outputs"] = out;
    model["embedding"] = e;
  }
  // Token ids of the image placeholders, under onnxruntime-genai's names.
  static const std::vector<std::pair<std::string, std::vector<std::string>>>
      tokenKeys = {{"image_token_id", {"image_token_id", "image_token_index"}},
                   {"vision_start_token_id", {"vision_start_token_id"}},
                   {"vision_end_token_id", {"vision_end_token_id"}},
                   {"boi_token_id", {"boi_token_index", "boi_token_id"}},
                   {"eoi_token_id", {"eoi_token_index", "eoi_token_id"}}};
  for (const auto &[key, names] : tokenKeys) {
    for (const std::string &n : names) {
      auto it = config.find(n);
      if (it != config.end() && it->is_number_integer()) {
        model[key] = *it;
        break;
      }
    }
  }
  return root;
}

bool emitOnnxPackage(const std::vector<PackageGraph> &graphs,
                     const OnnxEmitOptions &opts, DiagnosticEngine &diags,
                     std::ostream &textOut) {
  if (!graphNamed(graphs, "decoder")) {
    diags.error(SourceRange(), "a package needs a graph named 'decoder'");
    return false;
  }
  if (opts.quant.enabled()) {
    diags.error(SourceRange(),
                "--quant does not quantize a vision-language package yet; "
                "-o model.onnx writes the quantized text model alone");
    return false;
  }
  Checkpoint ckpt;
  WeightSource source;
  if (!chooseWeightSource(opts.weights, opts.init, opts.text, ckpt, source,
                          diags))
    return false;

  struct Lowered {
    std::string name;
    const ir::Module *module;
    onnx::ModelProto model;
    std::unique_ptr<WeightStorage> storage;
    std::unique_ptr<WeightPlan> plan;
  };
  std::vector<Lowered> lowered;
  bool ok = true;
  for (const PackageGraph &g : graphs) {
    Lowered &l = lowered.emplace_back();
    l.name = g.name;
    l.module = g.module;
    l.model.set_ir_version(onnx::IR_VERSION);
    l.model.set_producer_name("archc");
    l.model.set_producer_version("0.1.0");
    l.model.set_doc_string("Compiled by archc from " + g.module->sourceFile +
                           " with " + g.module->configFile + ": graph " +
                           g.name);
    auto *opset = l.model.add_opset_import();
    opset->set_domain("");
    opset->set_version(kOnnxOpset);
    l.model.mutable_graph()->set_name(g.module->name + "." + g.name);
    // No --quant here (refused above): every weight float.
    l.storage = std::make_unique<WeightStorage>(*g.module, ir::QuantOptions{},
                                                opts.checkpointQuant);
    l.plan = makeWeightPlan(*g.module, source, &ckpt, opts.seed, *l.storage);
    l.plan->setAllowOverflow(opts.allowOverflow);
    OnnxLowering lowering(*g.module, *l.model.mutable_graph(), *l.plan, diags,
                          *l.storage);
    if (!lowering.run())
      return false;
    ok &= l.plan->validate(diags, opts.weights, /*reportUnused=*/false);
  }
  if (!ok)
    return false;
  // Checkpoint tensors the arch does not declare at all (nor any graph's
  // binding read: scale sidecars of a quantized release), once.
  if (source == WeightSource::Checkpoint) {
    std::set<std::string> declared;
    for (const Lowered &l : lowered)
      if (const std::set<std::string> *read = l.plan->consumedTensors())
        declared.insert(read->begin(), read->end());
    for (const PackageGraph &g : graphs)
      for (const ir::WeightDecl &w : g.module->weights) {
        std::vector<int64_t> layers =
            w.layers.empty() ? std::vector<int64_t>{-1} : w.layers;
        for (int64_t layer : layers)
          for (int64_t e = 0; e < std::max<int64_t>(w.experts, 1); ++e)
            declared.insert(w.instantiate(layer, w.experts ? e : -1));
      }
    std::vector<std::string> unused;
    for (const auto &[name, t] : ckpt.tensors())
      if (!declared.count(name))
        unused.push_back(name);
    if (!unused.empty()) {
      std::string list;
      for (size_t i = 0; i < unused.size() && i < 20; ++i)
        list += "\n  " + unused[i];
      if (unused.size() > 20)
        list += fmt::format("\n  ... and {} more", unused.size() - 20);
      diags.warning(SourceRange(),
                    fmt::format("{} checkpoint tensor{} not used by the model "
                                "(ignored):{}",
                                unused.size(),
                                unused.size() == 1 ? " is" : "s are", list));
    }
  }

  if (opts.text) {
    for (Lowered &l : lowered) {
      OutputSet scratch;
      bool fine = scratch.begin(fs::temp_directory_path().string(), diags);
      if (fine) {
        ExternalDataWriter data(scratch, "", "model.onnx", opts.dataChunkBytes,
                                /*layoutOnly=*/true, nullptr);
        WeightStats stats;
        fine = l.plan->writeExternal(*l.model.mutable_graph(), data, diags,
                                     stats) &&
               adaptForClients(l.name, *l.model.mutable_graph(), diags) &&
               checkModel(scratch.stagingDirectory(), l.model, diags);
      }
      scratch.discard();
      if (!fine)
        return false;
      textOut << "// graph " << l.name << "\n";
      printText(l.model, textOut);
    }
    return true;
  }

  fs::path outDir = opts.output;
  OutputSet set;
  if (!set.begin(outDir.string(), diags))
    return false;
  const nlohmann::json emptyConfig = nlohmann::json::object();
  const nlohmann::json &config = opts.config ? *opts.config : emptyConfig;
  uint64_t total = 0;
  for (const Lowered &l : lowered)
    total += l.plan->totalBytes();
  ProgressBar bar("binding weights", total,
                  opts.progress && source != WeightSource::Layout);
  // One set of files for both clients: transformers.js's image-text-to-text
  // sessions in OUT/onnx/, which genai_config.json names as well.
  std::map<std::string, std::string> files;
  std::map<std::string, unsigned> chunks;
  for (Lowered &l : lowered) {
    std::string file = vlmModelFile(l.name, l.module->activationDType);
    std::string rel = "onnx/" + file;
    files[l.name] = rel;
    WeightStats stats;
    if (opts.embedWeights) {
      if (!l.plan->embed(*l.model.mutable_graph(), diags, stats, &bar))
        return false;
      chunks[file] = 0;
    } else {
      ExternalDataWriter data(set, "onnx", file, opts.dataChunkBytes,
                              source == WeightSource::Layout, &bar);
      if (!l.plan->writeExternal(*l.model.mutable_graph(), data, diags, stats))
        return false;
      chunks[file] = static_cast<unsigned>(data.files().size());
    }
    if (!adaptForClients(l.name, *l.model.mutable_graph(), diags))
      return false;
    fs::path stagedDir = fs::path(set.stagingDirectory()) / "onnx";
    if (!checkModel(stagedDir.string(), l.model, diags) ||
        !writeProto(l.model, set.stage(rel), set.finalPath(rel), diags))
      return false;
  }

  // Side files: the input config, generation defaults, genai_config.json,
  // the tokenizer and the image processor's configuration.
  const ir::Module &decoder = *graphNamed(graphs, "decoder");
  std::string tjsDtype = transformersJsDtype(decoder.activationDType);
  nlohmann::json previous = readJsonIfPresent(outDir / "config.json", false);
  nlohmann::json outConfig =
      outputConfig(config, decoder, chunks,
                   previous.is_object() ? &previous : nullptr, tjsDtype);
  std::vector<std::string> graphNames;
  for (const Lowered &l : lowered)
    graphNames.push_back(l.name);
  setSessionDtypes(outConfig, previous, tjsDtype, graphNames);
  if (!writeText(set, "config.json", outConfig.dump(2) + "\n", diags))
    return false;
  // generation_config.json: the input's byte for byte, derived from the
  // config only when the input folder has none.
  nlohmann::json generation = readInputGenerationConfig(opts.inputDir, diags);
  SideFileCopy copiedGeneration =
      opts.inputDir.empty()
          ? SideFileCopy::Absent
          : copySideFile(set, opts.inputDir, "generation_config.json", diags);
  if (copiedGeneration == SideFileCopy::Failed)
    return false;
  if (!generation.is_object())
    generation = generationConfig(nullptr, config);
  if (copiedGeneration == SideFileCopy::Absent &&
      !writeText(set, "generation_config.json", generation.dump(2) + "\n",
                 diags))
    return false;
  bool wroteGenai = false;
  if (opts.genaiConfig) {
    std::vector<PackageGraph> described;
    for (const Lowered &l : lowered)
      described.push_back({l.name, l.module});
    std::string why;
    if (genaiBindsStates(*graphNamed(graphs, "decoder"), why)) {
      nlohmann::ordered_json genai = makeVlmGenaiConfig(
          described, files, config, &generation, opts.kvCache);
      if (!writeText(set, "genai_config.json", genai.dump(4) + "\n", diags))
        return false;
      wroteGenai = true;
    } else {
      diags.report(Severity::Note, SourceRange(),
                   "genai_config.json not written: " + why);
    }
  }
  if (!opts.inputDir.empty()) {
    std::vector<std::string> copy = tokenizerFileNames();
    for (const std::string &n : processorFileNames())
      copy.push_back(n);
    for (const std::string &name : copy)
      if (copySideFile(set, opts.inputDir, name, diags) == SideFileCopy::Failed)
        return false;
  }
  // Earlier data files of these model files that this emission does not
  // write.
  for (const auto &[file, n] : chunks)
    set.removeStale({"onnx"}, [file = file](const std::string &rel) {
      return isExternalDataOf(file, fs::path(rel).filename().string());
    });
  // What transformers.js's image-text-to-text forward cannot feed this
  // decoder, said before the folder is used.
  std::vector<std::string> unfed = transformersJsUnfedDecoderInputs(decoder);
  std::string arch = "its image-text-to-text class";
  auto archs = config.find("architectures");
  if (archs != config.end() && archs->is_array() && !archs->empty() &&
      archs->front().is_string())
    arch = "its " + archs->front().get<std::string>();
  if (!unfed.empty()) {
    std::string names;
    for (const std::string &n : unfed)
      names += (names.empty() ? "" : ", ") + n;
    diags.report(Severity::Note, SourceRange(),
                 fmt::format("{}: transformers.js cannot run this model ({} "
                             "feeds decoder_model_merged only inputs_embeds, "
                             "attention_mask, position_ids and the "
                             "past_key_values cache; this decoder also reads "
                             "{})",
                             outDir.string(), arch, names));
  }
  if (!set.publish(diags))
    return false;
  std::error_code ec;
  if (!fs::is_regular_file(outDir / "tokenizer.json", ec) &&
      !fs::is_regular_file(outDir / "tokenizer.model", ec))
    diags.warning(SourceRange(),
                  fmt::format("'{}' has no tokenizer (tokenizer.json): "
                              "transformers.js processors and "
                              "onnxruntime-genai need one; give the model's "
                              "folder as the input, or copy its tokenizer "
                              "files into '{}'",
                              outDir.string(), outDir.string()));
  diags.flush();
  if (opts.summary) {
    // The graphs in data-flow order, each with its data files.
    std::vector<std::string> rels;
    for (const Lowered &l : lowered)
      rels.push_back(files[l.name]);
    std::string list = describeModelFiles(rels, chunks);
    std::string dir = outDir.string();
    fmt::print(stderr,
               "archc: wrote vision-language model folder '{}': {}, "
               "config.json, ...\n",
               dir, list);
    if (!unfed.empty())
      fmt::print(stderr, "  transformers.js:   cannot run it (see the note "
                         "above)\n");
    else if (tjsDtype.empty())
      fmt::print(stderr,
                 "  transformers.js:   has no dtype for these files; the "
                 "folder's default is config.json's "
                 "transformers.js_config.dtype\n");
    else
      fmt::print(stderr,
                 "  transformers.js:   await AutoModelForImageTextToText."
                 "from_pretrained('{}')  // config.json's dtype '{}'\n",
                 dir, tjsDtype);
    if (wroteGenai)
      fmt::print(stderr, "  onnxruntime-genai: og.Model('{}')\n", dir);
  }
  return true;
}

} // namespace archc
