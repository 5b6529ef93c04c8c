//===- FuzzConfig.cpp - Fuzz target: config.json binding ------------------===//
//
// The input is a config.json, compiled with the bundled family its
// `architectures` names (as `archc --config FILE` does): JSON parsing with
// positions, config binding (types, aliases, defaults, checks) and the
// family's evaluation into IR, so every family's arithmetic on config values
// is reached.
//
//===----------------------------------------------------------------------===//
#include "FuzzCommon.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  using namespace archc;
  static const std::string path = fuzz::scratchPath("config.json");
  if (!fuzz::writeBytes(path, data, size))
    return 0;
  Options opts;
  opts.config = path;
  Compilation c;
  fuzz::compileQuietly(opts, c);
  return 0;
}
