//===- ModelInput.cpp - A model folder as input ---------------------------===//
//
// This file implements resolveModelInput().
//
//===----------------------------------------------------------------------===//
#include "driver/ModelInput.h"

#include <fmt/format.h>

#include <cstdio>
#include <filesystem>

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
  if ((o.emit == EmitTarget::Onnx || o.emit == EmitTarget::Profile) &&
      o.weights.empty() && !o.initGiven && folderHasWeights(dir))
    o.weights = dir;
  return true;
}

} // namespace archc
