//===- ModelInput.cpp - A model folder as input ---------------------------===//
//
// This file implements resolveModelInput().
//
//===----------------------------------------------------------------------===//
#include "driver/ModelInput.h"

#include "support/FileRead.h"

#include <fmt/format.h>

#include <cstdio>
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

bool resolveModelInput(Options &o) {
  std::error_code ec;
  std::string dir;
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
