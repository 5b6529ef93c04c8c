//===- Seq2SeqPackage.cpp - Encoder-decoder model folders -----------------===//
//
// This file implements the emission of an encoder-decoder package. Both
// graphs are lowered with their own WeightPlan over one checkpoint (the
// shared embedding table is written into each graph's data), quantized as
// --quant says, checked and staged in OUT/onnx/, and published with the side
// files as one OutputSet: nothing of a failed emission is left behind.
//
//===----------------------------------------------------------------------===//
#include "emit/package/Seq2SeqPackage.h"
#include "emit/package/GenaiConfig.h"

#include "checkpoint/Safetensors.h"
#include "emit/lowering/OnnxLowering.h"
#include "emit/onnx/OnnxContribSchemas.h"
#include "emit/package/ModelFolder.h"
#include "emit/package/OnnxFiles.h"
#include "emit/weights/ExternalData.h"
#include "emit/weights/WeightPlan.h"
#include "support/OutputSet.h"
#include "support/Progress.h"

#include <fmt/format.h>

#include <filesystem>
#include <optional>
#include <set>

namespace fs = std::filesystem;

namespace archc {

namespace {
const ir::Module *graphNamed(const std::vector<PackageGraph> &graphs,
                             const std::string &name) {
  for (const PackageGraph &g : graphs)
    if (g.name == name)
      return g.module;
  return nullptr;
}

/// The feature extractor's files (Whisper's log-mel parameters).
const std::vector<std::string> &processorFiles() {
  static const std::vector<std::string> names = {"preprocessor_config.json",
                                                 "processor_config.json",
                                                 "audio_processor_config.json"};
  return names;
}

/// An integer config value the graph bound (the arch's config field).
std::optional<int64_t> bound(const ir::Module &m, const std::string &key) {
  auto it = m.info.find(key);
  if (it == m.info.end())
    return std::nullopt;
  if (const int64_t *v = std::get_if<int64_t>(&it->second))
    return *v;
  return std::nullopt;
}
} // namespace

namespace {
/// onnxruntime-genai's graph of `stem` beside transformers.js' files:
/// encoder_model_fp16.genai.onnx.
std::string genaiModelFile(const std::string &stem, ir::DType dtype,
                           const ir::QuantOptions &quant) {
  std::string file = seq2seqModelFile(stem, dtype, quant);
  return file.substr(0, file.size() - std::string(".onnx").size()) +
         ".genai.onnx";
}
} // namespace

bool isSeq2SeqPackage(const std::vector<PackageGraph> &graphs) {
  return graphNamed(graphs, "encoder") && graphNamed(graphs, "decoder");
}

std::string seq2seqModelFile(const std::string &stem, ir::DType dtype,
                             const ir::QuantOptions &quant) {
  // folderModelFile's "model<suffix>.onnx" with the graph's stem.
  std::string file = folderModelFile(
      dtype, quant.enabled() ? ir::quantFileTag(quant, dtype) : "");
  return stem + file.substr(std::string("model").size());
}

void addSeq2SeqClientFields(nlohmann::json &config, const ir::Module &decoder) {
  // transformers.js's getNormalizedConfig picks is_encoder_decoder from
  // config.json and names the cache from these fields; a key Hugging Face
  // defaults (T5's num_decoder_layers = num_layers) is absent there.
  if (!config.contains("is_encoder_decoder"))
    config["is_encoder_decoder"] = true;
  for (const char *key :
       {"num_layers", "num_decoder_layers", "num_heads", "d_kv",
        "encoder_layers", "decoder_layers", "encoder_attention_heads",
        "decoder_attention_heads", "d_model"})
    if (!config.contains(key))
      if (auto v = bound(decoder, key))
        config[key] = *v;
}

bool emitSeq2SeqPackage(const std::vector<PackageGraph> &graphs,
                        const OnnxEmitOptions &opts, DiagnosticEngine &diags,
                        std::ostream &textOut) {
  Checkpoint ckpt;
  WeightSource source;
  if (!chooseWeightSource(opts.weights, opts.init, opts.text, ckpt, source,
                          diags))
    return false;
  struct Lowered {
    std::string name, stem;
    const ir::Module *module;
    onnx::ModelProto model;
    std::unique_ptr<WeightStorage> storage;
    std::unique_ptr<WeightPlan> plan;
  };
  std::vector<Lowered> lowered;
  bool ok = true;
  // onnxruntime-genai runs Whisper only, from its own pair of graphs (the
  // arch's genai_encoder / genai_decoder): an encoder that also outputs
  // every layer's cross-attention keys and values, and a decoder fed them
  // (no encoder_hidden_states, no use_cache_branch).
  const nlohmann::json emptyConfig = nlohmann::json::object();
  const nlohmann::json &config = opts.config ? *opts.config : emptyConfig;
  std::string type = config.value("model_type", "");
  bool genaiGraphs = graphNamed(graphs, "genai_encoder") &&
                     graphNamed(graphs, "genai_decoder");
  // Without the caches (--no-kv-cache) the runtime's pair has nothing to
  // carry between its graphs.
  bool genai = opts.genaiConfig && opts.kvCache && genaiGraphs;
  std::vector<std::string> names = {"encoder", "decoder"};
  if (genai) {
    names.push_back("genai_encoder");
    names.push_back("genai_decoder");
  }
  for (const std::string &name : names) {
    Lowered &l = lowered.emplace_back();
    l.name = name;
    l.stem = l.name == "encoder"         ? "encoder_model"
             : l.name == "decoder"       ? "decoder_model_merged"
             : l.name == "genai_encoder" ? "encoder_model"
                                         : "decoder_model";
    l.module = graphNamed(graphs, name);
    l.model.set_ir_version(onnx::IR_VERSION);
    l.model.set_producer_name("archc");
    l.model.set_producer_version("0.1.0");
    l.model.set_doc_string("Compiled by archc from " + l.module->sourceFile +
                           " with " + l.module->configFile + ": graph " +
                           l.name);
    auto *opset = l.model.add_opset_import();
    opset->set_domain("");
    opset->set_version(kOnnxOpset);
    l.model.mutable_graph()->set_name(l.module->name + "." + l.name);
    l.storage = std::make_unique<WeightStorage>(*l.module, opts.quant,
                                                opts.checkpointQuant);
    l.plan = makeWeightPlan(*l.module, source, &ckpt, opts.seed, *l.storage);
    OnnxLowering lowering(*l.module, *l.model.mutable_graph(), *l.plan, diags,
                          *l.storage, opts.target);
    if (!lowering.run())
      return false;
    if (lowering.usesContribOps()) {
      registerContribSchemas();
      auto *contrib = l.model.add_opset_import();
      contrib->set_domain(kContribDomain);
      contrib->set_version(kContribOpset);
    }
    ok &= l.plan->validate(diags, opts.weights, /*reportUnused=*/false);
  }
  if (!ok)
    return false;
  // Checkpoint tensors neither graph reads, once.
  if (source == WeightSource::Checkpoint) {
    std::set<std::string> read;
    for (const Lowered &l : lowered)
      if (const std::set<std::string> *r = l.plan->consumedTensors())
        read.insert(r->begin(), r->end());
    for (const PackageGraph &g : graphs)
      for (const ir::WeightDecl &w : g.module->weights) {
        std::vector<int64_t> layers =
            w.layers.empty() ? std::vector<int64_t>{-1} : w.layers;
        for (int64_t layer : layers)
          for (int64_t e = 0; e < std::max<int64_t>(w.experts, 1); ++e)
            read.insert(w.instantiate(layer, w.experts ? e : -1));
      }
    std::vector<std::string> unused;
    for (const auto &[name, t] : ckpt.tensors())
      if (!read.count(name))
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
        ExternalDataWriter data(scratch, "", l.stem + ".onnx",
                                opts.dataChunkBytes, /*layoutOnly=*/true,
                                nullptr);
        WeightStats stats;
        fine = l.plan->writeExternal(*l.model.mutable_graph(), data, diags,
                                     stats) &&
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
  uint64_t total = 0;
  // onnxruntime-genai's graphs normally write nothing (shareExternal).
  for (const Lowered &l : lowered)
    if (!l.name.starts_with("genai_"))
      total += l.plan->totalBytes();
  ProgressBar bar("binding weights", total,
                  opts.progress && source != WeightSource::Layout);
  // Data file counts per model file: transformers.js' (config.json lists
  // them) and all of them (stale files, the summary).
  std::map<std::string, unsigned> chunks, allChunks;
  std::set<std::string> sharedFiles; // read transformers.js' data files
  std::map<std::string, std::string> files;
  for (Lowered &l : lowered) {
    std::string file =
        l.name.starts_with("genai_")
            ? genaiModelFile(l.stem, l.module->activationDType, opts.quant)
            : seq2seqModelFile(l.stem, l.module->activationDType, opts.quant);
    std::string rel = "onnx/" + file;
    files[l.name] = rel;
    WeightStats stats;
    // onnxruntime-genai's graphs read the bytes transformers.js' pair wrote
    // (the encoder's and the decoder's files, same folder) where every
    // weight is stored the same way; else their own data files.
    std::vector<WeightPlan::Written> written;
    if (l.name.starts_with("genai_") && !opts.embedWeights)
      for (const Lowered &w : lowered)
        if (!w.name.starts_with("genai_"))
          written.push_back({w.plan.get(), &w.model.graph()});
    if (!written.empty() &&
        l.plan->shareExternal(*l.model.mutable_graph(), written)) {
      allChunks[file] = 0;
      sharedFiles.insert(rel);
    } else if (opts.embedWeights) {
      if (!l.plan->embed(*l.model.mutable_graph(), diags, stats, &bar))
        return false;
      allChunks[file] = 0;
    } else {
      ExternalDataWriter data(set, "onnx", file, opts.dataChunkBytes,
                              source == WeightSource::Layout, &bar);
      if (!l.plan->writeExternal(*l.model.mutable_graph(), data, diags, stats))
        return false;
      allChunks[file] = static_cast<unsigned>(data.files().size());
    }
    if (!l.name.starts_with("genai_"))
      chunks[file] = allChunks[file];
    fs::path stagedDir = fs::path(set.stagingDirectory()) / "onnx";
    if (!checkModel(stagedDir.string(), l.model, diags) ||
        !writeProto(l.model, set.stage(rel), set.finalPath(rel), diags))
      return false;
  }

  // config.json: the input's, with what transformers.js reads.
  const ir::Module &decoder = *graphNamed(graphs, "decoder");
  // An earlier output (another dtype's graphs in the same folder) read
  // back, not an input: this run replaces it.
  nlohmann::json previous =
      readJsonIfPresent(outDir / "config.json", /*input=*/false);
  // transformers.js_config.dtype: the dtype from_pretrained(OUT) loads
  // without one is this run's graphs' (a folder of --quant graphs alone has
  // no encoder_model.onnx for transformers.js' default fp32).
  std::string tag = opts.quant.enabled()
                        ? ir::quantFileTag(opts.quant, decoder.activationDType)
                        : "";
  nlohmann::json outConfig = outputConfig(
      config, decoder, chunks, previous.is_object() ? &previous : nullptr,
      transformersJsDtype(decoder.activationDType, tag));
  addSeq2SeqClientFields(outConfig, decoder);
  if (!writeText(set, "config.json", outConfig.dump(2) + "\n", diags))
    return false;
  // generation_config.json: the input folder's, byte for byte (under the
  // side-file rule); else the token ids, with the decoder's start token.
  nlohmann::json generation = readInputGenerationConfig(opts.inputDir, diags);
  SideFileCopy copied =
      opts.inputDir.empty()
          ? SideFileCopy::Absent
          : copySideFile(set, opts.inputDir, "generation_config.json", diags);
  if (copied == SideFileCopy::Failed)
    return false;
  if (!generation.is_object())
    generation = generationConfig(nullptr, config);
  if (copied == SideFileCopy::Absent) {
    auto start = config.find("decoder_start_token_id");
    if (start != config.end() && !start->is_null())
      generation["decoder_start_token_id"] = *start;
    if (!writeText(set, "generation_config.json", generation.dump(2) + "\n",
                   diags))
      return false;
  }
  if (genai) {
    const ir::Module &encoder = *graphNamed(graphs, "genai_encoder");
    nlohmann::ordered_json genaiConfig = makeWhisperGenaiConfig(
        encoder, *graphNamed(graphs, "genai_decoder"), config,
        generation.is_object() ? &generation : nullptr, files["genai_encoder"],
        files["genai_decoder"]);
    if (!writeText(set, "genai_config.json", genaiConfig.dump(4) + "\n", diags))
      return false;
    // onnxruntime-genai's own log-mel front end, unless the input folder
    // brings one (copied below).
    std::error_code ec;
    if (opts.inputDir.empty() ||
        !fs::exists(fs::path(opts.inputDir) / "audio_processor_config.json",
                    ec)) {
      fs::path preprocessorPath =
          fs::path(opts.inputDir) / "preprocessor_config.json";
      nlohmann::json preprocessor =
          opts.inputDir.empty()
              ? nlohmann::json()
              : readJsonIfPresent(preprocessorPath, /*input=*/true);
      std::vector<std::string> notUsed;
      if (!opts.inputDir.empty() && !preprocessor.is_object() &&
          fs::exists(preprocessorPath, ec))
        notUsed.push_back("the whole file (not a readable JSON object)");
      nlohmann::ordered_json audio = makeWhisperAudioProcessorConfig(
          preprocessor.is_object() ? &preprocessor : nullptr,
          bound(encoder, "num_mel_bins").value_or(0), notUsed);
      if (!notUsed.empty()) {
        std::string list;
        for (const std::string &n : notUsed)
          list += (list.empty() ? "" : ", ") + n;
        diags.warning(SourceRange(),
                      fmt::format("'{}': not used for onnxruntime-genai's "
                                  "audio_processor_config.json, which takes "
                                  "Whisper's defaults and the model's "
                                  "num_mel_bins instead: {}",
                                  preprocessorPath.string(), list));
      }
      if (!writeText(set, "audio_processor_config.json", audio.dump(4) + "\n",
                     diags))
        return false;
    }
    // onnxruntime-genai reads 30 s of audio (3000 frames) into Whisper's
    // encoder, whatever the model's size.
    int64_t frames = 2 * bound(encoder, "max_source_positions").value_or(0);
    if (frames != 3000)
      diags.warning(SourceRange(),
                    fmt::format("onnxruntime-genai feeds Whisper 3000 frames "
                                "of audio features; this model's encoder "
                                "takes {} (max_source_positions {}), so "
                                "onnxruntime-genai will refuse its input",
                                frames, frames / 2));
  } else if (opts.genaiConfig && genaiGraphs) {
    diags.report(Severity::Note, SourceRange(),
                 "genai_config.json not written: onnxruntime-genai's " + type +
                     " passes the cross-attention keys and values and the "
                     "self-attention cache between its graphs, which "
                     "--no-kv-cache leaves out");
  } else if (opts.genaiConfig) {
    diags.report(Severity::Note, SourceRange(),
                 "genai_config.json not written: onnxruntime-genai runs "
                 "Whisper among the encoder-decoders, not '" +
                     type + "'");
  }
  if (!opts.inputDir.empty()) {
    std::vector<std::string> copy = tokenizerFileNames();
    for (const std::string &n : processorFiles())
      copy.push_back(n);
    for (const std::string &name : copy)
      if (copySideFile(set, opts.inputDir, name, diags) == SideFileCopy::Failed)
        return false;
  }
  // Earlier data files of these model files that this emission does not
  // write.
  for (const auto &[file, n] : allChunks)
    set.removeStale({"onnx"}, [file = file](const std::string &rel) {
      return isExternalDataOf(file, fs::path(rel).filename().string());
    });
  if (!genai) {
    // An earlier run's onnxruntime-genai pair of this dtype (its graphs
    // point into the data files this run rewrote) and the
    // genai_config.json that names it go.
    std::set<std::string> stale;
    for (const char *stem : {"encoder_model", "decoder_model"})
      stale.insert(genaiModelFile(
          stem, graphNamed(graphs, "decoder")->activationDType, opts.quant));
    set.removeStale({"onnx"}, [stale](const std::string &rel) {
      std::string name = fs::path(rel).filename().string();
      for (const std::string &f : stale)
        if (name == f || isExternalDataOf(f, name))
          return true;
      return false;
    });
    // It names the pair's decoder (and the encoder of the same dtype).
    fs::path genaiPath = outDir / "genai_config.json";
    set.removeStale({""}, [stale, genaiPath](const std::string &rel) {
      return rel == "genai_config.json" &&
             stale.count(
                 fs::path(genaiDecoderFile(genaiPath)).filename().string());
    });
  }
  if (!set.publish(diags))
    return false;
  // A folder without a tokenizer: the text pipelines cannot run it.
  std::error_code ec;
  bool tokenizer = false;
  for (const std::string &name : tokenizerFileNames())
    tokenizer |= name != "tokenizer_config.json" &&
                 name != "special_tokens_map.json" &&
                 fs::is_regular_file(outDir / name, ec);
  if (!tokenizer)
    diags.warning(SourceRange(),
                  fmt::format("'{}' has no tokenizer (tokenizer.json, "
                              "spiece.model, ...): transformers.js pipelines "
                              "need one; give the model's folder as the "
                              "input, or copy its tokenizer files into '{}'",
                              outDir.string(), outDir.string()));
  diags.flush(); // the notes and warnings first, the summary last
  if (opts.summary) {
    std::vector<std::string> modelFiles = {files["encoder"], files["decoder"]};
    if (genai) {
      modelFiles.push_back(files["genai_encoder"]);
      modelFiles.push_back(files["genai_decoder"]);
    }
    std::string list = describeModelFiles(modelFiles, allChunks);
    std::string dir = outDir.string();
    fmt::print(stderr,
               "archc: wrote encoder-decoder model folder '{}': {}, "
               "config.json, generation_config.json, ...\n",
               dir, list);
    fmt::print(stderr,
               "  transformers.js:   await {}.from_pretrained('{}')  // "
               "config.json's dtype '{}'\n",
               type == "whisper" ? "AutoModelForSpeechSeq2Seq"
                                 : "AutoModelForSeq2SeqLM",
               dir, transformersJsDtype(decoder.activationDType, tag));
    if (genai)
      fmt::print(stderr,
                 "  onnxruntime-genai: og.Model('{}')  // genai_config.json: "
                 "{} and {}{}\n",
                 dir, files["genai_encoder"], files["genai_decoder"],
                 sharedFiles.size() == 2
                     ? " (reading the data files of the pair above)"
                     : "");
  }
  return true;
}

} // namespace archc
