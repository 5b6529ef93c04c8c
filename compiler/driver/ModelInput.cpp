//===- ModelInput.cpp - A model folder as input ---------------------------===//
//
// This file implements resolveModelInput().
//
//===----------------------------------------------------------------------===//
#include "driver/ModelInput.h"

#include "support/FileRead.h"

#include <fmt/format.h>

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <vector>

namespace fs = std::filesystem;

namespace archc {

bool folderHasWeights(const std::string &dir) {
  std::error_code ec;
  if (fs::is_regular_file(fs::path(dir) / "model.safetensors.index.json", ec))
    return true;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end;
       it.increment(ec)) {
    std::string name = it->path().filename().string();
    if (it->path().extension() == ".safetensors" &&
        name != "expected.safetensors" && fs::is_regular_file(it->path(), ec))
      return true;
  }
  return false;
}

namespace {
/// Whether `s` has the form of a Hugging Face model id: ORG/NAME of
/// letters, digits, '-', '_' and '.', neither part '.' or '..', and not
/// named like one of archc's input files.
bool looksLikeHubId(const std::string &s) {
  size_t slash = s.find('/');
  if (slash == std::string::npos || slash == 0 || slash + 1 == s.size() ||
      s.find('/', slash + 1) != std::string::npos)
    return false;
  // A missing file, not a model.
  for (const char *ext : {".arch", ".json", ".safetensors", ".onnx"})
    if (fs::path(s).extension() == ext)
      return false;
  for (const std::string &part : {s.substr(0, slash), s.substr(slash + 1)}) {
    if (part == "." || part == "..")
      return false;
    for (char c : part)
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' &&
          c != '_' && c != '.')
        return false;
  }
  return true;
}

/// The Hugging Face hub cache: $HF_HUB_CACHE, else $HF_HOME/hub, else
/// $XDG_CACHE_HOME/huggingface/hub, else ~/.cache/huggingface/hub.
fs::path hubCache() {
  if (const char *c = std::getenv("HF_HUB_CACHE"); c && *c)
    return c;
  if (const char *h = std::getenv("HF_HOME"); h && *h)
    return fs::path(h) / "hub";
  if (const char *x = std::getenv("XDG_CACHE_HOME"); x && *x)
    return fs::path(x) / "huggingface" / "hub";
  if (const char *home = std::getenv("HOME"); home && *home)
    return fs::path(home) / ".cache" / "huggingface" / "hub";
  return {};
}
} // namespace

std::optional<std::string> resolveHubId(const std::string &id,
                                        std::string &error) {
  if (!looksLikeHubId(id))
    return std::nullopt;
  std::error_code ec;
  fs::path cache = hubCache();
  std::string repo = "models--" + id.substr(0, id.find('/')) + "--" +
                     id.substr(id.find('/') + 1);
  fs::path root = cache / repo;
  std::string download =
      fmt::format("archc reads the local cache only (no network): "
                  "`huggingface-cli download {}` fetches it, or pass the "
                  "model's folder",
                  id);
  if (cache.empty() || !fs::is_directory(root, ec)) {
    error = fmt::format("'{}' is not a file or folder, and the Hugging Face "
                        "cache has no model '{}' (looked for '{}'); {}",
                        id, id, root.string(), download);
    return std::string();
  }
  // The revision refs/main names, as huggingface_hub resolves `main`.
  std::string revision;
  if (std::FILE *f = std::fopen((root / "refs" / "main").c_str(), "rb")) {
    char buf[128] = {0};
    size_t n = std::fread(buf, 1, sizeof(buf) - 1, f);
    std::fclose(f);
    revision.assign(buf, n);
    while (!revision.empty() &&
           std::isspace(static_cast<unsigned char>(revision.back())))
      revision.pop_back();
  }
  if (revision.empty()) {
    error = fmt::format("the Hugging Face cache of '{}' ('{}') has no "
                        "refs/main naming its snapshot; {}",
                        id, root.string(), download);
    return std::string();
  }
  fs::path snapshot = root / "snapshots" / revision;
  if (!fs::is_regular_file(snapshot / "config.json", ec)) {
    error = fmt::format("the Hugging Face cache of '{}' has no config.json "
                        "in its main snapshot '{}'; {}",
                        id, snapshot.string(), download);
    return std::string();
  }
  return snapshot.string();
}

bool resolveModelInput(Options &o) {
  std::error_code ec;
  std::string dir;
  // A Hugging Face id (ORG/NAME, not a path here): its snapshot in the
  // local cache, as a model folder.
  for (std::string *given : {&o.input, &o.config}) {
    if (given->empty() || fs::exists(*given, ec))
      continue;
    std::string error;
    std::optional<std::string> snapshot = resolveHubId(*given, error);
    if (!snapshot)
      continue;
    if (snapshot->empty()) {
      fmt::print(stderr, "archc: error: {}\n", error);
      return false;
    }
    *given = *snapshot;
  }
  // A config.json given as the input: as --config.
  if (!o.input.empty() && fs::path(o.input).extension() == ".json" &&
      fs::is_regular_file(o.input, ec)) {
    if (!o.config.empty()) {
      fmt::print(stderr,
                 "archc: error: two configs given ('{}' and --config '{}')\n",
                 o.input, o.config);
      return false;
    }
    o.config = o.input;
    o.input.clear();
  }
  if (!o.input.empty() && fs::is_directory(o.input, ec)) {
    dir = o.input;
    o.input.clear();
  }
  if (!o.config.empty() && fs::is_directory(o.config, ec)) {
    if (!dir.empty() &&
        fs::weakly_canonical(dir, ec) != fs::weakly_canonical(o.config, ec)) {
      fmt::print(stderr,
                 "archc: error: two model folders given ('{}' and "
                 "--config '{}')\n",
                 dir, o.config);
      return false;
    }
    dir = o.config;
    o.config.clear();
  }
  if (dir.empty())
    return true;
  if (!o.config.empty()) {
    fmt::print(stderr,
               "archc: error: a model folder ('{}') and --config '{}' "
               "both name a config\n",
               dir, o.config);
    return false;
  }
  fs::path config = fs::path(dir) / "config.json";
  if (!fs::is_regular_file(config, ec)) {
    fmt::print(stderr,
               "archc: error: '{}' is a folder without a config.json (a "
               "model folder holds config.json and its safetensors)\n",
               dir);
    return false;
  }
  o.config = config.string();
  o.modelDir = dir;
  // Its safetensors are the weights -emit=onnx binds and the bytes
  // -emit=profile counts (a quantized checkpoint's real bytes).
  if (o.weights.empty() && !o.initGiven) {
    bool hasWeights = folderHasWeights(dir);
    if (o.emit == EmitTarget::Onnx && !hasWeights) {
      // A model of zeros is never what a folder without weights asked for.
      fmt::print(stderr,
                 "archc: error: model folder '{}' holds no weights (no "
                 "model.safetensors, model.safetensors.index.json or "
                 "*.safetensors); give --weights, or --init=none|random|zeros "
                 "for a model without them\n",
                 dir);
      return false;
    }
    if ((o.emit == EmitTarget::Onnx || o.emit == EmitTarget::Profile) &&
        hasWeights)
      o.weights = dir;
  }
  return true;
}

namespace {
/// Whether `name` is of a kind a model folder holds (its config, weights,
/// tokenizer, processor and side files): what an output never replaces in
/// an input folder.
bool isModelFolderFileName(const std::string &name) {
  static const char *kinds[] = {".json", ".safetensors", ".bin",     ".model",
                                ".txt",  ".jinja",       ".pt",      ".pth",
                                ".gguf", ".tiktoken",    ".msgpack", ".h5"};
  std::string ext = fs::path(name).extension().string();
  for (const char *k : kinds)
    if (ext == k)
      return true;
  return name.rfind("tokenizer", 0) == 0;
}

/// Whether -o names a folder: a trailing '/' or an existing directory.
bool outputIsFolder(const std::string &output) {
  std::error_code ec;
  return !output.empty() &&
         (output.back() == '/' || fs::is_directory(output, ec));
}
} // namespace

bool checkOutputsAgainstInputs(const Options &o) {
  // The folders the run reads as a whole: the model folder (or the folder
  // of a config.json), and the folder of the checkpoint (its shards, its
  // index); each with how messages name it.
  std::vector<std::pair<std::string, std::string>> folders;
  std::error_code ec;
  auto parentOf = [](const std::string &file) {
    std::string p = fs::path(file).parent_path().string();
    return p.empty() ? std::string(".") : p;
  };
  if (!o.modelDir.empty())
    folders.push_back(
        {o.modelDir, fmt::format("the input model folder '{}'", o.modelDir)});
  else if (fs::path(o.config).filename() == "config.json")
    folders.push_back(
        {parentOf(o.config), fmt::format("the folder '{}' of the config '{}'",
                                         parentOf(o.config), o.config)});
  if (!o.weights.empty()) {
    if (fs::is_directory(o.weights, ec))
      folders.push_back(
          {o.weights, fmt::format("the checkpoint folder '{}'", o.weights)});
    else
      folders.push_back({parentOf(o.weights),
                         fmt::format("the folder '{}' of the checkpoint '{}'",
                                     parentOf(o.weights), o.weights)});
  }
  bool output = !o.output.empty() && o.output != "-";
  if (output && o.emit == EmitTarget::Onnx && outputIsFolder(o.output)) {
    std::string out = realPath(o.output);
    for (const auto &[folder, what] : folders) {
      std::string in = realPath(folder);
      if (in == out) {
        fmt::print(stderr,
                   "archc: error: -o '{}' is {}; a model folder written "
                   "there would replace its config.json and side files: "
                   "choose another output folder\n",
                   o.output, what);
        return false;
      }
      if (pathWithin(in, out)) {
        fmt::print(stderr,
                   "archc: error: -o '{}' contains {}; archc does not "
                   "write a model folder around its input: choose another "
                   "output folder\n",
                   o.output, what);
        return false;
      }
    }
    // A subfolder of the output that is a symlink into an input folder
    // (onnx/ -> the checkpoint) would take the model's files there.
    for (const auto &entry : fs::directory_iterator(o.output, ec)) {
      std::error_code lec;
      if (!entry.is_symlink(lec) || !fs::is_directory(entry.path(), lec))
        continue;
      std::string sub = realPath(entry.path().string());
      for (const auto &[folder, what] : folders) {
        std::string in = realPath(folder);
        if (in == sub || pathWithin(in, sub)) {
          fmt::print(stderr,
                     "archc: error: '{}' in -o '{}' is a symlink to {}; the "
                     "model folder's files would be written there: choose "
                     "another output folder\n",
                     entry.path().filename().string(), o.output, what);
          return false;
        }
      }
    }
  }
  // Single files: -o and --plot never name a file the run reads.
  std::vector<std::pair<std::string, std::string>> files = {
      {o.input, "the .arch file"}, {o.config, "the config"}};
  if (!o.weights.empty() && !fs::is_directory(o.weights, ec))
    files.push_back({o.weights, "the checkpoint"});
  for (const std::string &target : {output ? o.output : "", o.plot}) {
    if (target.empty() || outputIsFolder(target))
      continue;
    std::string out = realPath(target);
    for (const auto &[file, what] : files)
      if (!file.empty() && realPath(file) == out) {
        fmt::print(stderr,
                   "archc: error: '{}' is {} '{}'; archc never writes over "
                   "its inputs\n",
                   target, what, file);
        return false;
      }
    // A file of the input folder that the model consists of (its weights,
    // configs, tokenizer), whether this run reads it or not.
    std::string name = fs::path(out).filename().string();
    for (const auto &[folder, what] : folders)
      if (fs::path(out).parent_path() == fs::path(realPath(folder)) &&
          fs::exists(out, ec) && isModelFolderFileName(name)) {
        fmt::print(stderr,
                   "archc: error: '{}' is '{}' of {}; archc never writes "
                   "over the files of its input\n",
                   target, name, what);
        return false;
      }
  }
  return true;
}

} // namespace archc
