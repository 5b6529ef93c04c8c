//===- ModelFolder.cpp - The side files of a model folder -----------------===//
//
// This file implements the model-folder naming and config files.
//
//===----------------------------------------------------------------------===//
#include "emit/package/ModelFolder.h"

#include "support/BoundedJson.h"
#include "support/FileRead.h"
#include "support/StagedFile.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>
#include <sys/stat.h>
#include <tuple>
#include <unistd.h>

namespace fs = std::filesystem;

namespace archc {

std::string folderModelFile(ir::DType dtype, const std::string &quantTag) {
  if (!quantTag.empty())
    return "model_" + quantTag + ".onnx";
  if (dtype == ir::DType::F16)
    return "model_fp16.onnx";
  if (dtype == ir::DType::BF16)
    return "model_bf16.onnx";
  return "model.onnx";
}

std::string describeModelFiles(const std::vector<std::string> &rels,
                               const std::map<std::string, unsigned> &chunks) {
  std::string list;
  for (const std::string &rel : rels) {
    auto it = chunks.find(fs::path(rel).filename().string());
    unsigned n = it == chunks.end() ? 0 : it->second;
    list += (list.empty() ? "" : ", ") + rel;
    if (n)
      list += fmt::format(" (+ {} external data file{})", n, n == 1 ? "" : "s");
  }
  return list;
}

std::string transformersJsDtype(ir::DType dtype, const std::string &tag) {
  if (tag == "q4" || tag == "q4f16" || tag == "int8")
    return tag;
  if (!tag.empty())
    return "";
  if (dtype == ir::DType::F32)
    return "fp32";
  if (dtype == ir::DType::F16)
    return "fp16";
  return "";
}

std::vector<std::string> deriveLayerTypes(const ir::Module &m) {
  // Layer index -> the state names it keeps.
  std::map<int64_t, std::set<std::string>> layers;
  const std::string prefix = "past_key_values.";
  ir::walk(m.graph.body, [&](const ir::Op &op) {
    if (op.getKind() != ir::OpKind::StateIn)
      return;
    std::string n = op.attr<std::string>("name");
    if (n.rfind(prefix, 0) != 0)
      return;
    size_t dot = n.find('.', prefix.size());
    if (dot == std::string::npos)
      return;
    std::string index = n.substr(prefix.size(), dot - prefix.size());
    if (index.empty() ||
        index.find_first_not_of("0123456789") != std::string::npos)
      return;
    layers[std::stoll(index)].insert(n.substr(dot + 1));
  });
  std::vector<std::string> types;
  int64_t expect = 0;
  for (const auto &[i, names] : layers) {
    if (i != expect++)
      return {}; // not one entry per layer
    // Mamba layers (Bamba, Falcon-H1, Granite-4, Nemotron-H): their configs
    // say which layers are which in their own fields, and transformers.js
    // 4.3.1 names their states for every layer when layer_types is absent
    // (getCacheNames); "linear_attention" would hide them from it.
    if (names.count("ssm_state"))
      return {};
    if (names.count("conv_state") || names.count("recurrent_state"))
      types.push_back("linear_attention");
    else if (names.count("index_kv"))
      types.push_back("compressed_sparse_attention");
    else if (names.count("compressed_kv_state"))
      types.push_back("heavily_compressed_attention");
    else if (names.count("kv"))
      types.push_back("sliding_attention");
    else
      types.push_back("full_attention");
  }
  return types;
}

nlohmann::json outputConfig(const nlohmann::json &input, const ir::Module &m,
                            const std::map<std::string, unsigned> &dataChunks,
                            const nlohmann::json *previous,
                            const std::string &dtype,
                            const std::string &wasmDtype) {
  nlohmann::json out = input;
  // The folder's models hold the checkpoint's weights dequantized (or
  // re-quantized by --quant, which the file name says), never in the
  // checkpoint's own format: its quantization_config does not describe them.
  out.erase("quantization_config");
  if (out.contains("text_config") && out["text_config"].is_object())
    out["text_config"].erase("quantization_config");
  // transformers.js 4.3.1 has the composite Qwen3.5-MoE type (its
  // text_config is exactly this config), not the text one: the folder's
  // config is that composite, holding the input as its text model.
  if (out.value("model_type", "") == "qwen3_5_moe_text") {
    nlohmann::json text = out;
    text.erase("transformers.js_config");
    out = nlohmann::json::object();
    out["architectures"] = {"Qwen3_5MoeForCausalLM"};
    out["model_type"] = "qwen3_5_moe";
    out["text_config"] = text;
    if (input.contains("transformers.js_config"))
      out["transformers.js_config"] = input["transformers.js_config"];
  }
  // transformers.js 4.3.1's Qwen3.5 classes read vision_config (for its
  // spatial_merge_size, which only images use) even for a text-only model:
  // an empty one lets them fall back to their default.
  std::string type = out.value("model_type", "");
  if ((type == "qwen3_5_text" || type == "qwen3_5_moe") &&
      !out.contains("vision_config"))
    out["vision_config"] = nlohmann::json::object();
  nlohmann::json *target = &out;
  if (out.contains("text_config") && out["text_config"].is_object())
    target = &out["text_config"];
  if (!target->contains("layer_types")) {
    std::vector<std::string> types = deriveLayerTypes(m);
    std::set<std::string> kinds(types.begin(), types.end());
    if (kinds.size() > 1 ||
        (kinds.size() == 1 && *kinds.begin() != "full_attention"))
      (*target)["layer_types"] = types;
  }
  // transformers.js loads external data in a browser only when config.json
  // names the number of chunks per model file.
  nlohmann::json chunks = nlohmann::json::object();
  nlohmann::json previousDtype = nullptr;
  if (previous && previous->is_object()) {
    auto it = previous->find("transformers.js_config");
    if (it != previous->end() && it->is_object()) {
      auto u = it->find("use_external_data_format");
      if (u != it->end() && u->is_object())
        chunks = *u;
      auto d = it->find("dtype");
      if (d != it->end() && d->is_string())
        previousDtype = *d;
    }
  }
  for (const auto &[file, n] : dataChunks) {
    if (n)
      chunks[file] = n;
    else
      chunks.erase(file);
  }
  nlohmann::json tjs = out.contains("transformers.js_config") &&
                               out["transformers.js_config"].is_object()
                           ? out["transformers.js_config"]
                           : nlohmann::json::object();
  if (chunks.empty())
    tjs.erase("use_external_data_format");
  else
    tjs["use_external_data_format"] = chunks;
  // The dtype from_pretrained(OUT) loads without one: this run's file (the
  // input's own dtype, and its per-device ones, name its folder's files).
  tjs.erase("dtype");
  if (tjs.contains("device_config") && tjs["device_config"].is_object())
    for (auto &[device, c] : tjs["device_config"].items())
      if (c.is_object())
        c.erase("dtype");
  if (!dtype.empty())
    tjs["dtype"] = dtype;
  else if (previousDtype.is_string())
    tjs["dtype"] = previousDtype;
  // The browser's default device runs the folder's float model in place of
  // a quantized one (wasmFloatDtype); a float run's own file serves it too.
  if (!wasmDtype.empty()) {
    if (!tjs.contains("device_config") || !tjs["device_config"].is_object())
      tjs["device_config"] = nlohmann::json::object();
    tjs["device_config"]["wasm"]["dtype"] = wasmDtype;
  } else if (tjs.contains("device_config") &&
             tjs["device_config"].is_object()) {
    nlohmann::json &devices = tjs["device_config"];
    if (devices.contains("wasm") && devices["wasm"].is_object() &&
        devices["wasm"].empty())
      devices.erase("wasm");
    if (devices.empty())
      tjs.erase("device_config");
  }
  if (tjs.empty())
    out.erase("transformers.js_config");
  else
    out["transformers.js_config"] = tjs;
  return out;
}

std::string wasmFloatDtype(const fs::path &dir) {
  // The model file, its external data (model.onnx_data[_N]) and how many
  // bytes each stored weight byte becomes in float32.
  auto floatBytes = [&](const std::string &file, uint64_t widen) {
    std::error_code ec;
    if (!fs::is_regular_file(dir / "onnx" / file, ec))
      return uint64_t(0);
    uint64_t total = 0;
    for (const auto &e : fs::directory_iterator(dir / "onnx", ec)) {
      std::string name = e.path().filename().string();
      if (name == file || name.rfind(file + "_data", 0) == 0) {
        uint64_t size = e.file_size(ec);
        total += ec ? 0 : size;
      }
    }
    return total * widen;
  };
  for (auto [file, dtype, widen] :
       {std::tuple<const char *, const char *, uint64_t>{"model.onnx", "fp32",
                                                         1},
        {"model_fp16.onnx", "fp16", 2}}) {
    uint64_t bytes = floatBytes(file, widen);
    if (bytes && bytes <= kWasmFloatBytes)
      return dtype;
  }
  return "";
}

nlohmann::json generationConfig(const nlohmann::json *inputGeneration,
                                const nlohmann::json &config) {
  if (inputGeneration && inputGeneration->is_object())
    return *inputGeneration;
  // Hugging Face's GenerationConfig.from_model_config: the token ids.
  nlohmann::json g = nlohmann::json::object();
  auto field = [&](const char *key) -> const nlohmann::json * {
    if (config.contains("text_config") && config["text_config"].is_object() &&
        config["text_config"].contains(key))
      return &config["text_config"][key];
    auto it = config.find(key);
    return it == config.end() ? nullptr : &*it;
  };
  for (const char *key : {"bos_token_id", "eos_token_id", "pad_token_id"})
    if (const nlohmann::json *v = field(key); v && !v->is_null())
      g[key] = *v;
  g["_from_model_config"] = true;
  return g;
}

const std::vector<std::string> &tokenizerFileNames() {
  static const std::vector<std::string> names = {"tokenizer.json",
                                                 "tokenizer_config.json",
                                                 "special_tokens_map.json",
                                                 "vocab.json",
                                                 "vocab.txt",
                                                 "merges.txt",
                                                 "tokenizer.model",
                                                 "added_tokens.json",
                                                 "chat_template.jinja",
                                                 "chat_template.json",
                                                 "spiece.model",
                                                 "sentencepiece.bpe.model",
                                                 "source.spm",
                                                 "target.spm",
                                                 "spm.model",
                                                 "normalizer.json"};
  return names;
}

namespace {
/// Reads a side file under copySideFile's rule into `bytes`; false with
/// `why` set when it is not allowed.
bool readSideFile(const fs::path &from, const std::string &inputDir,
                  uint64_t maxBytes, std::string &bytes, std::string &why) {
  if (!staysInFolder(from.string(), inputDir, why))
    return false;
  // The resolved file itself: what is checked is what is read.
  std::string real = realPath(from.string());
  if (!readRegularFile(real, maxBytes, bytes, why))
    return false;
  if (from.extension() == ".json") {
    JsonParseOptions opts;
    opts.allowNonFinite = true;
    std::string error;
    if (!isBoundedJson(bytes, error, opts)) {
      why = "it is not valid JSON (" + error + ")";
      return false;
    }
  }
  return true;
}
} // namespace

SideFileCopy copySideFile(OutputSet &set, const std::string &inputDir,
                          const std::string &name, DiagnosticEngine &diags) {
  fs::path from = fs::path(inputDir) / name;
  struct stat st;
  if (::lstat(from.c_str(), &st) != 0)
    return SideFileCopy::Absent;
  std::string bytes, why;
  if (!readSideFile(from, inputDir, kMaxSideFileBytes, bytes, why)) {
    diags.warning(SourceRange(),
                  fmt::format("'{}' is not copied into the model folder: {}",
                              from.string(), why));
    return SideFileCopy::Skipped;
  }
  StagedFile f;
  if (!f.open(set.stage(name), set.finalPath(name), diags) ||
      !f.write(bytes.data(), bytes.size(), diags) || !f.close(diags))
    return SideFileCopy::Failed;
  return SideFileCopy::Copied;
}

nlohmann::json readInputGenerationConfig(const std::string &inputDir,
                                         DiagnosticEngine &diags) {
  fs::path from = fs::path(inputDir) / "generation_config.json";
  std::string bytes, why;
  struct stat st;
  if (inputDir.empty() || ::lstat(from.c_str(), &st) != 0 ||
      !readSideFile(from, inputDir, kMaxConfigBytes, bytes, why))
    return nullptr;
  JsonParseOptions opts;
  opts.allowNonFinite = true;
  nlohmann::json j;
  if (!parseBoundedJson(bytes, j, why, opts) || !j.is_object())
    return nullptr;
  // The values genai_config.json takes must be of the kind onnxruntime-genai
  // reads: finite numbers, counts, a flag, token ids. Another (NaN, valid
  // for Hugging Face; a string; a list) is left out with a warning, and
  // genai_config.json keeps its default; the file itself is still copied
  // byte for byte.
  auto tokenId = [](const nlohmann::json &v) {
    return v.is_number_integer() && v.get<int64_t>() >= 0;
  };
  for (auto it = j.begin(); it != j.end();) {
    const std::string &k = it.key();
    const nlohmann::json &v = *it;
    const char *want = nullptr;
    bool ok = true;
    if (k == "diversity_penalty" || k == "length_penalty" ||
        k == "repetition_penalty" || k == "temperature" || k == "top_p") {
      want = "a finite number";
      ok = v.is_number() && std::isfinite(v.get<double>());
    } else if (k == "no_repeat_ngram_size" || k == "num_beams" ||
               k == "num_return_sequences" || k == "top_k") {
      want = "a count (an integer, 0 or more)";
      ok = tokenId(v);
    } else if (k == "do_sample") {
      want = "true or false";
      ok = v.is_boolean();
    } else if (k == "bos_token_id" || k == "eos_token_id" ||
               k == "pad_token_id") {
      want = "a token id or a list of them";
      ok = tokenId(v) || (v.is_array() && !v.empty() &&
                          std::all_of(v.begin(), v.end(), tokenId));
    }
    if (ok || v.is_null()) {
      ++it;
      continue;
    }
    std::string shown = v.is_number_float() && !std::isfinite(v.get<double>())
                            ? (std::isnan(v.get<double>()) ? "NaN"
                               : v.get<double>() > 0       ? "Infinity"
                                                           : "-Infinity")
                            : v.dump();
    if (shown.size() > 40)
      shown = shown.substr(0, 40) + "...";
    diags.warning(SourceRange(),
                  fmt::format("'{}': '{}' is {}, not {}; genai_config.json "
                              "does not take it (the default stays)",
                              from.string(), k, shown, want));
    it = j.erase(it);
  }
  return j;
}

std::vector<std::string> sentenceTransformersFiles(const std::string &inputDir,
                                                   DiagnosticEngine &diags) {
  std::vector<std::string> out = {"modules.json",
                                  "config_sentence_transformers.json",
                                  "sentence_bert_config.json"};
  // Each module's configuration (1_Pooling/config.json, 2_Dense/config.json,
  // ...): the modules.json entries with a folder of their own, modules.json
  // read under copySideFile's rule.
  fs::path from = fs::path(inputDir) / "modules.json";
  std::string bytes, why;
  struct stat st;
  if (inputDir.empty() || ::lstat(from.c_str(), &st) != 0 ||
      !readSideFile(from, inputDir, kMaxConfigBytes, bytes, why))
    return out;
  JsonParseOptions opts;
  nlohmann::json modules;
  if (!parseBoundedJson(bytes, modules, why, opts) || !modules.is_array())
    return out;
  for (const nlohmann::json &m : modules) {
    if (!m.is_object() || !m.contains("path") || !m["path"].is_string())
      continue;
    std::string dir = m["path"].get<std::string>();
    // A plain relative folder name: nothing that climbs out of the folder.
    if (dir.empty() || dir.find("..") != std::string::npos || dir[0] == '/' ||
        dir.find('\\') != std::string::npos)
      continue;
    out.push_back(dir + "/config.json");
  }
  (void)diags;
  return out;
}

} // namespace archc
