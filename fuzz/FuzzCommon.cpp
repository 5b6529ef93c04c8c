//===- FuzzCommon.cpp - Shared helpers of the fuzz targets ----------------===//
#include "FuzzCommon.h"

#include "frontend/Program.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <stdexcept>

#include <unistd.h>

namespace archc::fuzz {

namespace fs = std::filesystem;

std::string scratchPath(const std::string &name) {
  static const std::string dir = [] {
    const char *tmp = std::getenv("TMPDIR");
    fs::path d = fs::path(tmp && *tmp ? tmp : "/tmp") /
                 ("archc-fuzz-" + std::to_string(getpid()));
    std::error_code ec;
    fs::create_directories(d, ec);
    return d.string();
  }();
  return (fs::path(dir) / name).string();
}

bool writeBytes(const std::string &path, const uint8_t *data, size_t size) {
  std::FILE *f = std::fopen(path.c_str(), "wb");
  if (!f)
    return false;
  bool ok = std::fwrite(data, 1, size, f) == size;
  return std::fclose(f) == 0 && ok;
}

std::string tinyConfig(const std::string &family) {
  return (fs::path(bundledArchsDir()) / "configs" / "tiny" / (family + ".json"))
      .string();
}

bool compileQuietly(const Options &opts, Compilation &c) {
  c.diags->setCapture(true);
  c.diags->setErrorLimit(0);
  std::ostringstream irOut;
  // As the driver: a symbolic dim overflowing int64 outside the evaluator
  // is reported (archc.cpp). Any other exception is a finding.
  try {
    return compileModule(opts, c, irOut);
  } catch (const std::overflow_error &) {
    return false;
  }
}

} // namespace archc::fuzz
