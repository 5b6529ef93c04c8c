//===- FuzzFolder.cpp - Fuzz target: a model folder's side files ----------===//
//
// The first byte picks a side file of the input folder (a tokenizer file,
// generation_config.json, a processor file) or the output folder's
// previous config.json, and whether it is a symlink to a file outside the
// input folder; the rest is its content. The folder writer copies it
// (copySideFile), reads generation_config.json for genai_config.json and
// merges a previous config.json (outputConfig). Invariants: a file that
// leads outside the folder is never copied, a copied file is byte for byte
// the input, and every parse is bounded.
//
//===----------------------------------------------------------------------===//
#include "FuzzCommon.h"

#include "emit/package/ModelFolder.h"
#include "emit/package/OnnxFiles.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>

namespace {
namespace fs = std::filesystem;

const archc::ir::Module *tinyModule() {
  using namespace archc;
  static Compilation c;
  static const ir::Module *m = [] {
    Options opts;
    opts.input = (fs::path(bundledArchsDir()) / "llama.arch").string();
    opts.config = fuzz::tinyConfig("llama");
    return fuzz::compileQuietly(opts, c) ? c.module.get() : nullptr;
  }();
  return m;
}

std::string readAll(const fs::path &p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}
} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  using namespace archc;
  const ir::Module *m = tinyModule();
  if (!m)
    __builtin_trap();
  if (size < 1)
    return 0;
  static const char *names[] = {
      "generation_config.json",   "tokenizer.json",  "tokenizer_config.json",
      "special_tokens_map.json",  "tokenizer.model", "chat_template.jinja",
      "preprocessor_config.json", "config.json"};
  const size_t pick = data[0] % (sizeof names / sizeof *names);
  const bool outside = data[0] & 0x80;
  const std::string name = names[pick];
  const bool previousConfig = name == "config.json";
  fs::path root = fuzz::scratchPath("folder");
  std::error_code ec;
  fs::remove_all(root, ec);
  fs::path in = root / "in", out = root / "out", away = root / "away";
  fs::create_directories(in, ec);
  fs::create_directories(out, ec);
  fs::create_directories(away, ec);
  fs::path where = previousConfig ? out / name : (outside ? away : in) / name;
  if (!fuzz::writeBytes(where.string(), data + 1, size - 1))
    return 0;
  if (outside && !previousConfig)
    fs::create_symlink(where, in / name, ec);

  SourceMgr sm;
  DiagnosticEngine diags(sm);
  diags.setCapture(true);
  diags.setErrorLimit(0);
  OutputSet set;
  if (!set.begin(out.string(), diags))
    return 0;
  if (previousConfig) {
    nlohmann::json previous =
        readJsonIfPresent(out / "config.json", /*input=*/false);
    nlohmann::json config = {{"model_type", "llama"}};
    nlohmann::json merged =
        outputConfig(config, *m, {{"model.onnx", 2}},
                     previous.is_object() ? &previous : nullptr);
    (void)merged.dump(2);
    set.discard();
    return 0;
  }
  SideFileCopy copied = copySideFile(set, in.string(), name, diags);
  if (copied == SideFileCopy::Copied) {
    // Never a file from outside, and always the same bytes.
    if (outside)
      __builtin_trap();
    std::string staged = readAll(fs::path(set.stagingDirectory()) / name);
    if (staged !=
        std::string(reinterpret_cast<const char *>(data + 1), size - 1))
      __builtin_trap();
  }
  nlohmann::json generation = readInputGenerationConfig(in.string(), diags);
  // What genai_config.json takes from it is finite.
  if (generation.is_object())
    for (const char *k : {"diversity_penalty", "length_penalty",
                          "repetition_penalty", "temperature", "top_p"})
      if (generation.contains(k) && generation[k].is_number() &&
          !std::isfinite(generation[k].get<double>()))
        __builtin_trap();
  if (!generation.is_object())
    generation = generationConfig(nullptr, {{"eos_token_id", 2}});
  (void)generation.dump(2);
  set.discard();
  return 0;
}
