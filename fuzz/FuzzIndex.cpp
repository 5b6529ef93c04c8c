//===- FuzzIndex.cpp - Fuzz target: the shard index reader ----------------===//
//
// The input is a model.safetensors.index.json in a folder that holds two
// small shards (a.safetensors: tensors "x", "y"; b.safetensors: "z") and,
// outside it, a file the index must never open (../outside/secret, also
// reachable through the symlink link.safetensors). Checkpoint::open reads
// the index in one pass and opens the shards it names: every failure must
// be a reported error, and the file outside must never become an input.
//
//===----------------------------------------------------------------------===//
#include "FuzzCommon.h"

#include "checkpoint/Safetensors.h"
#include "support/FileRead.h"

#include <cstring>
#include <filesystem>

namespace {
namespace fs = std::filesystem;

void writeShard(const std::string &path,
                const std::vector<std::string> &names) {
  std::string header = "{";
  std::string data;
  for (size_t i = 0; i < names.size(); ++i) {
    header += (i ? ", \"" : "\"") + names[i] +
              "\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [" +
              std::to_string(i * 8) + ", " + std::to_string(i * 8 + 8) + "]}";
    float v[2] = {1.0f, float(i)};
    data.append(reinterpret_cast<const char *>(v), 8);
  }
  header += "}";
  std::string bytes(8, '\0');
  uint64_t n = header.size();
  std::memcpy(bytes.data(), &n, 8);
  bytes += header + data;
  archc::fuzz::writeBytes(path, reinterpret_cast<const uint8_t *>(bytes.data()),
                          bytes.size());
}

const std::string &folder() {
  static const std::string dir = [] {
    fs::path root = archc::fuzz::scratchPath("index");
    std::error_code ec;
    fs::create_directories(root / "ckpt", ec);
    fs::create_directories(root / "outside", ec);
    writeShard((root / "ckpt" / "a.safetensors").string(), {"x", "y"});
    writeShard((root / "ckpt" / "b.safetensors").string(), {"z"});
    writeShard((root / "outside" / "secret").string(), {"x"});
    fs::create_symlink("../outside/secret", root / "ckpt" / "link.safetensors",
                       ec);
    return (root / "ckpt").string();
  }();
  return dir;
}
} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  using namespace archc;
  const std::string index =
      (fs::path(folder()) / "model.safetensors.index.json").string();
  if (!fuzz::writeBytes(index, data, size))
    return 0;
  SourceMgr sm;
  DiagnosticEngine diags(sm);
  diags.setCapture(true);
  diags.setErrorLimit(0);
  Checkpoint ckpt;
  ckpt.open(folder(), diags);
  // Whatever the index says, the file outside the folder is never read.
  InputFile found;
  const std::string secret =
      (fs::path(folder()).parent_path() / "outside" / "secret").string();
  if (findInputFile(secret, found) &&
      found.path.find("outside") != std::string::npos)
    __builtin_trap();
  return 0;
}
