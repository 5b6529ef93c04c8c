//===- FuzzArch.cpp - Fuzz target: the .arch front end --------------------===//
//
// The input is an .arch file, compiled with the tiny Llama config: lexer,
// parser, Sema, the evaluator (IR generation), the verifier and the passes.
//
//===----------------------------------------------------------------------===//
#include "FuzzCommon.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  using namespace archc;
  static const std::string path = fuzz::scratchPath("input.arch");
  if (!fuzz::writeBytes(path, data, size))
    return 0;
  Options opts;
  opts.input = path;
  opts.config = fuzz::tinyConfig("llama");
  Compilation c;
  fuzz::compileQuietly(opts, c);
  return 0;
}
