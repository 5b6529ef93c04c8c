//===- BundledSnapshot.cpp - The AST snapshot archc was built with --------===//
//
// This file implements bundledAstSnapshotPath() and bundledAstSnapshot().
//
//===----------------------------------------------------------------------===//
#include "frontend/BundledSnapshot.h"

#include <cstdlib>
#include <filesystem>

namespace archc {

std::string bundledAstSnapshotPath() {
  if (const char *env = std::getenv("ARCHC_AST_SNAPSHOT")) {
    std::string v = env;
    if (v.empty() || v == "off" || v == "none" || v == "0")
      return "";
    return v;
  }
  std::error_code ec;
  std::filesystem::path exe =
      std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec)
    return kAstSnapshotFileName;
  return (exe.parent_path() / kAstSnapshotFileName).string();
}

const AstSnapshot *bundledAstSnapshot(std::string *status) {
  struct Loaded {
    std::unique_ptr<AstSnapshot> snapshot;
    std::string status;
  };
  static const Loaded loaded = [] {
    Loaded l;
    std::string path = bundledAstSnapshotPath();
    if (path.empty()) {
      l.status = "disabled (ARCHC_AST_SNAPSHOT)";
      return l;
    }
    std::string error;
    l.snapshot = AstSnapshot::open(path, error);
    l.status = l.snapshot ? "using '" + path + "' (" +
                                std::to_string(l.snapshot->getPaths().size()) +
                                " files)"
                          : "not using '" + path + "': " + error;
    return l;
  }();
  if (status)
    *status = loaded.status;
  return loaded.snapshot.get();
}

} // namespace archc
