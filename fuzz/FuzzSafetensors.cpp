//===- FuzzSafetensors.cpp - Fuzz target: the safetensors header parser ---===//
//
// The input is a whole safetensors file held in memory: header length,
// header JSON, dtypes, shapes, byte counts and offsets.
//
//===----------------------------------------------------------------------===//
#include "checkpoint/Safetensors.h"

#include <cstdint>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::vector<archc::StTensor> tensors;
  std::string error;
  if (archc::parseSafetensorsHeader(data, size, "fuzz.safetensors", tensors,
                                    error)) {
    // Every accepted tensor lies inside the buffer.
    for (const archc::StTensor &t : tensors)
      if (t.data < data || t.data + t.size > data + size)
        __builtin_trap();
  }
  return 0;
}
