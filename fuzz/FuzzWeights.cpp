//===- FuzzWeights.cpp - Fuzz target: binding a checkpoint's weights ------===//
//
// The input is a safetensors file bound to the tiny Llama model's weights
// (and, when the first byte is odd, read as an FP8 checkpoint of 2 x 2
// blocks): the header parser, the binder (names, shapes, dtypes, scale
// sidecars) and the readers that stream the weights into floats.
//
//===----------------------------------------------------------------------===//
#include "FuzzCommon.h"

#include "checkpoint/QuantizedCheckpoint.h"

#include <algorithm>
#include <vector>

namespace {
const archc::ir::Module *tinyModule() {
  using namespace archc;
  static Compilation c;
  static const ir::Module *m = [] {
    Options opts;
    opts.input =
        (std::filesystem::path(bundledArchsDir()) / "llama.arch").string();
    opts.config = fuzz::tinyConfig("llama");
    return fuzz::compileQuietly(opts, c) ? c.module.get() : nullptr;
  }();
  return m;
}
} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  using namespace archc;
  const ir::Module *m = tinyModule();
  if (!m)
    __builtin_trap(); // the tiny model itself must compile
  static const std::string path = fuzz::scratchPath("model.safetensors");
  if (!fuzz::writeBytes(path, data, size))
    return 0;
  SourceMgr sm;
  DiagnosticEngine diags(sm);
  diags.setCapture(true);
  Checkpoint ckpt;
  if (!ckpt.open(path, diags))
    return 0;
  ir::CheckpointQuant quant;
  if (size > 0 && (data[0] & 1)) {
    quant.method = ir::CheckpointQuant::Method::FP8;
    quant.blockRows = quant.blockCols = 2;
  }
  CheckpointBinder binder(ckpt, quant);
  std::vector<float> buffer;
  for (const ir::WeightDecl &w : m->weights) {
    std::vector<int64_t> shape;
    uint64_t elements = 1;
    for (const ir::SymExpr &d : w.type.dims) {
      shape.push_back(d.getConstant().value_or(0));
      elements *= static_cast<uint64_t>(shape.back());
    }
    std::vector<int64_t> layers =
        w.layers.empty() ? std::vector<int64_t>{-1} : w.layers;
    for (int64_t l : layers) {
      const StoredTensor *t = binder.bind(w.instantiate(l, -1), shape,
                                          ir::isFloat(w.type.dtype), false);
      if (!t)
        continue;
      // Stream the weight as the ONNX writer does, in chunks.
      std::unique_ptr<FloatSource> src = binder.source(*t);
      buffer.resize(std::min<uint64_t>(elements, 4096));
      for (uint64_t at = 0; at < elements; at += buffer.size()) {
        uint64_t n = std::min<uint64_t>(buffer.size(), elements - at);
        src->read(at, n, buffer.data());
        src->release(at, n);
      }
    }
  }
  binder.unused();
  binder.report(diags, path);
  return 0;
}
